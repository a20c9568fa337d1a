// The results of an analysis, as the writers (result_files.hpp), `check` and the figures (svg.hpp)
// see them: one ModelReport per model and representation. Needs no checkpoint reader.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrank/base/attention_series.hpp"
#include "kvrank/base/geometry.hpp"
#include "kvrank/metric/diversity.hpp"

namespace kvrank {

struct Summary {
  double erank_mean = 0;
  double erank_centered_mean = 0;
  double erank_pct_mean = 0;
  double erank_centered_pct_mean = 0;
};

/// Means over the layers of a report (src/report/summary.cpp).
Summary summarize(const std::vector<LayerMetrics>& layers);

/// The family and variant of the fully-redundant reference series (`--with-baseline`).
inline constexpr std::string_view kBaseline = "baseline";

/// One model × one representation. Fields match the result file (docs/result-format.md). Family
/// and variant are family.hpp's names, or kBaseline; they stay text because result files of other
/// versions are read back (result_files.hpp) and must round-trip.
/// Where a model's numbers came from and what shaped them, written with every result so that the
/// file says how to reproduce it — and nothing that changes from run to run (no times, no host).
/// Files of schema_version 1 carry none of it: every field is then empty.
struct Provenance {
  std::optional<std::string> input;        ///< the argument as given: a path or ORG/NAME[@REV]
  std::optional<std::string> hf_repo;      ///< ORG/NAME, when it was found in the hub cache
  std::optional<std::string> hf_revision;  ///< the cached snapshot's commit hash, then
  std::optional<std::string> dtype;        ///< the weights' element type(s) read: "BF16", "F16,F32"
  std::optional<std::string> layers;       ///< `--layers` ("0-11,20"); empty: every layer
  std::optional<std::string> map;          ///< the `--map` file
  std::optional<std::string> qk_norm_gain;  ///< QK-norm gains folded in: "weight", "1+weight"
  /// --fold-input-norm: the pre-attention norm's gain folded in, "weight" or "1+weight"; empty
  /// when not folded (the default) and in files written before it was recorded.
  std::optional<std::string> input_norm_gain;

  bool operator==(const Provenance&) const = default;
};

/// The per-layer curves (CurveField, below).
enum class Curve { erank, erank_pct, erank_centered, erank_centered_pct, mean_similarity, pcs_90 };

struct ModelReport {
  std::string label;
  std::string path;
  std::optional<std::int64_t> step;  ///< the training step of the checkpoint; empty: unknown
  /// The training run, when the caller named it (the Python module's `run=`; JSON "run", written
  /// only when set); empty: training_run() reads it from the path.
  std::optional<std::string> run;
  Provenance source;
  std::string family;
  /// The model type (config.json's model_type: qwen3, gemma3 …; kvrank/layout/model_type.hpp)
  /// when known, else empty; JSON "model_type", null when empty (and when read from older files).
  std::string model_type;
  std::string variant;
  ModelGeometry geometry;
  std::string repr = "qk";
  /// The attention series of an encoder or encoder-decoder model (JSON "attention"); empty for
  /// decoder-only models and in older files, and then not written.
  std::optional<AttentionSeries> attention;
  /// A hybrid's layers that have attention heads (Jamba, Zamba 2 …), increasing, in the model's
  /// own numbers (JSON "attention_layers"); empty when every layer has them, and then not written.
  /// `merge` expects these layers from the parts of one run.
  std::vector<int> attention_layers;
  std::vector<LayerMetrics> layers;
  Summary summary;
  /// Curves the file was written without (its schema_version predates them, CurveField::since):
  /// their values in `layers` are the defaults and their means NaN. Empty for every file of the
  /// current version; `check` refuses to compare them and `merge` to write them.
  std::vector<Curve> absent_curves;
};

inline bool is_baseline(const ModelReport& model) { return model.variant == kBaseline; }

/// Means over the layers of a report (its Summary): analyze and merge both write it this way.
Summary summarize(const std::vector<LayerMetrics>& layers);

/// The per-layer curves of a result (LayerMetrics) that every writer prints, `check` compares and
/// `plot` draws. One table (src/report/metric_table.cpp) describes each one — its name, value, axis
/// label, summary mean and table column — and the JSON, CSV and table writers and the JSON reader
/// are driven by it: a new curve is one row there (plus its LayerMetrics field), whose `since` is
/// the new schema_version, so that the files written before it stay readable (without it). In the
/// order of the terminal table's columns.
struct CurveField {
  Curve metric;
  std::string_view name;  ///< the JSON key and CSV column
  double (*value)(const LayerMetrics&);
  void (*set)(LayerMetrics&, double);
  bool integral;                 ///< written and read as an integer
  std::string_view axis_label;   ///< the y-axis title of its figure
  bool fully_redundant_at_one;   ///< the 1-head reference line belongs on its figure
  double Summary::*mean;         ///< its mean over the layers in Summary; nullptr: not summarised
  std::string_view table_title;  ///< its terminal-table heading, padded to the column
  const char* table_pattern;     ///< printf pattern of one value (a double) in the table
  int since;                     ///< the schema_version that introduced it (docs/result-format.md)
};

/// Every metric, in enum order.
std::span<const CurveField> metric_fields() noexcept;
const CurveField& curve_field(Curve metric) noexcept;

std::string_view curve_name(Curve metric) noexcept;
/// Parses a metric's JSON name; throws kvrank::Error "--metric: expected erank, …, found "x""
/// otherwise (check's and plot's --metric).
Curve parse_curve(std::string_view name);
double curve_value(const LayerMetrics& layer, Curve metric) noexcept;
/// The y-axis title of a figure of `metric` ("Effective rank", …).
std::string_view curve_axis_label(Curve metric) noexcept;
/// Whether the fully-redundant model (one effective head) sits at 1.0 on this metric's axis.
bool fully_redundant_at_one(Curve metric) noexcept;
/// The key of a summarised metric's mean in the JSON summary: "erank_mean", …
std::string summary_key(const CurveField& field);

/// The geometry fields of a result, named as in the JSON and CSV: the integers every model has,
/// then the ranks only some families have (null elsewhere).
struct GeometryField {
  std::string_view name;
  int ModelGeometry::*value;
  int since;  ///< the schema_version that introduced it
};
struct OptionalGeometryField {
  std::string_view name;
  std::optional<int> ModelGeometry::*value;
  int since;
};

/// The names a result's "repr" may have (the head representations of layout.hpp's Repr: a test
/// checks that they agree), and those of options.qk_norm_gain and options.input_norm_gain.
inline constexpr std::array<std::string_view, 4> kReprNames{"qk", "ov", "k", "v"};
inline constexpr std::array<std::string_view, 2> kNormGainNames{"weight", "1+weight"};
std::span<const GeometryField> geometry_fields() noexcept;
std::span<const OptionalGeometryField> optional_geometry_fields() noexcept;

}  // namespace kvrank

// The results of an analysis, as the writers (report.hpp), `check` and the figures (svg.hpp) see
// them: one ModelReport per model and representation. Needs no checkpoint reader.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrank/metric/diversity.hpp"

namespace kvrank {

struct Summary {
  double erank_mean = 0;
  double erank_centered_mean = 0;
  double erank_pct_mean = 0;
  double erank_centered_pct_mean = 0;
};

/// The family and variant of the fully-redundant reference series (`--with-baseline`).
inline constexpr std::string_view kBaseline = "baseline";

/// One model × one representation. Fields match the JSON schema of SPEC.md §3. Family and variant
/// are family.hpp's names, or kBaseline; they stay text because result files of other versions
/// are read back (report.hpp) and must round-trip.
struct ModelReport {
  std::string label;
  std::string path;
  std::string family;
  /// The model type (config.json's model_type: qwen3, gemma3 …; kvrank/layout/model_type.hpp)
  /// when known, else empty; JSON "model_type", null when empty (and when read from older files).
  std::string model_type;
  std::string variant;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int d_model = 0;
  int num_layers = 0;
  std::optional<int> lrkv_rank;
  std::optional<int> mla_kv_lora_rank;
  std::string repr = "qk";
  std::vector<LayerMetrics> layers;
  Summary summary;
};

inline bool is_baseline(const ModelReport& model) { return model.variant == kBaseline; }

/// The per-layer curves of a result (LayerMetrics) that `check` compares and `plot` draws, named
/// as in the JSON schema (SPEC.md §3); one table (src/report/metric_table.cpp) holds each one's
/// name, value and axis label.
enum class Metric { erank, erank_centered, erank_pct, erank_centered_pct, mean_similarity, pcs_90 };

std::string_view metric_name(Metric metric) noexcept;
/// Parses a metric's JSON name; throws kvrank::Error naming the metrics otherwise.
Metric parse_metric(std::string_view name);
double metric_value(const LayerMetrics& layer, Metric metric) noexcept;
/// The y-axis title of a figure of `metric` ("Effective rank", …).
std::string_view metric_axis_label(Metric metric) noexcept;
/// Whether the fully-redundant model (one effective head) sits at 1.0 on this metric's axis.
bool fully_redundant_at_one(Metric metric) noexcept;

}  // namespace kvrank

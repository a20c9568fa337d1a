// The application layer's requests: one type per command, holding its options typed (numbers as
// numbers, names as the library's enums), with one validate() that names the option and the rule
// it breaks, in the style of Ceres's Options::IsValid:
//
//   kvrank::app::AnalyzeRequest request;
//   request.inputs = {"data/tiny/mha"};
//   request.threads = -1;
//   request.validate();  // throws kvrank::Error "--threads: must be 0 (automatic) or more, found
//   -1"
//
// A front end (the command line, the Python module) converts its arguments into a request and
// hands it to run_*() (commands.hpp); the options are named as the command line spells them,
// which is what docs and messages use. Checks that need the input's contents (a layer past the
// model's last, a --family the checkpoint does not fit) stay with the library code that reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/analysis/plan.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/plot/figure_options.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/check.hpp"
#include "kvrank/synth/synth.hpp"

namespace kvrank::app {

/// Exit codes of every front end (docs/result-format.md).
inline constexpr int kExitOk = 0;
/// `check` found a change beyond tolerance.
inline constexpr int kExitRegression = 1;
/// Invalid input or usage (a kvrank::Error), nothing usable written.
inline constexpr int kExitInvalidInput = 2;
/// Any other exception: a bug.
inline constexpr int kExitInternal = 3;
/// `analyze --keep-going`: some inputs failed (each named), the others written.
inline constexpr int kExitSomeInputsFailed = 4;

/// How a checkpoint is read: the options `analyze` and `inspect` share (--family … --activations).
struct LayoutRequest {
  std::optional<std::string> family;  ///< --family: a family, model type or "mla"
  std::optional<int> heads;           ///< --heads, ≥ 1
  std::optional<int> kv_heads;        ///< --kv-heads, ≥ 1
  std::optional<int> head_dim;        ///< --head-dim, ≥ 1
  std::optional<std::string> map_file;
  bool npy_bf16 = false;  ///< --npy-dtype bf16
  bool activations = false;
  bool fold_input_norm = false;

  void validate() const;
  LayoutOverrides overrides() const;
  OpenOptions open_options() const;
};

/// The result formats analyze and baseline write, named by --format or -o's extension.
enum class ResultFormat { table, json, csv, tsv };

struct AnalyzeRequest {
  std::vector<std::string> inputs;  ///< paths, repo ids ORG/NAME[@REV]
  std::vector<std::string> labels;  ///< --label, one per input in order (at most one each)
  std::vector<std::int64_t> steps;  ///< --step, one per input in order, each ≥ 0
  /// The training run of each input, in order (Python's runs=; result files' `run`): at most one
  /// each, none empty. Unnamed: the folder holding the checkpoint folders (training_run.hpp).
  std::vector<std::string> runs;
  std::vector<Repr> reprs;  ///< --repr; empty: qk (k,v for K/V-only inputs)
  AttentionChoice attention = AttentionChoice::all;
  std::optional<std::vector<int>> layers;  ///< --layers; empty: all
  std::optional<LayerShard> shard;         ///< --layer-shard
  std::optional<ResultFormat> format;      ///< --format; empty: from -o's extension, else table
  std::string output;                      ///< -o; empty or "-": stdout
  bool similarity = false;                 ///< JSON only
  /// --pairs K: each layer's K most similar head pairs named (1 … kMaxNamedPairs; unset: none).
  std::optional<int> pairs;
  bool summary = false;  ///< CSV/TSV only
  bool with_baseline = false;
  int threads = 0;  ///< 0: automatic (compute.hpp)
  bool keep_going = false;
  LayoutRequest layout;

  void validate() const;
  /// The format written: -o's extension, else --format, else the table (validate() refuses a
  /// --format that contradicts the extension).
  ResultFormat output_format() const;
};

struct InspectRequest {
  std::vector<std::string> inputs;
  bool json = false;  ///< --format json; else the text listing
  LayoutRequest layout;

  void validate() const;
};

/// Where `check` writes GitHub Actions annotations and the job summary: auto (when
/// $GITHUB_ACTIONS is "true"), always (github) or never (none).
enum class Annotate { automatic, github, none };

struct CheckRequest {
  std::string current;   ///< result JSON of this run
  std::string golden;    ///< --baseline
  CheckOptions options;  ///< --metric, --direction, --abs-tol (finite, ≥ 0), --rel-tol (the same)
  bool json = false;     ///< --format json; else text
  Annotate annotate = Annotate::automatic;

  void validate() const;
};

struct PlotRequest {
  std::vector<std::string> inputs;  ///< FILE or FILE=Panel title
  /// In place of inputs: results in memory (the Python module's), each with its title and the
  /// name that stands for it in messages.
  std::vector<Panel> panels;
  std::string output;     ///< .svg, .png, .pdf, or "-" (SVG on stdout)
  FigureSettings figure;  ///< checked by plot_options() (figure_options.hpp)
  std::vector<std::string> panel_titles;
  std::string over_steps;            ///< layers, mean, heatmap, or empty
  std::optional<int> heatmap_layer;  ///< ≥ 0
  std::string heatmap_model;         ///< a label; empty: the first model

  void validate() const;
};

struct MergeRequest {
  std::vector<std::string> parts;
  std::string output;
  std::optional<std::vector<int>> layers;

  void validate() const;
};

struct BaselineRequest {
  int layers = 0;
  /// --heads: what "fully redundant" is measured against. Unset: 2, the fewest heads that can be
  /// redundant — one head has nothing to repeat, and its percentage would read 100 %.
  std::optional<int> heads;
  std::optional<ResultFormat> format;
  std::string output;

  void validate() const;
  int head_count() const { return heads.value_or(2); }
};

/// `diff A B`: two checkpoints (or result files) of one shape compared (analysis/diff.hpp).
struct DiffRequest {
  std::string a;
  std::string b;
  std::vector<std::string> labels;  ///< --label: A's and B's, in order (at most two)
  std::vector<Repr> reprs;          ///< --repr; empty: qk and ov (k and v for K/V-only inputs)
  AttentionChoice attention = AttentionChoice::all;
  std::optional<std::vector<int>> layers;  ///< --layers; empty: all
  std::optional<ResultFormat> format;      ///< --format; empty: from -o's extension, else table
  std::string output;                      ///< -o; empty or "-": stdout
  int top = 10;            ///< --top: the heads that moved most, listed (0 … kMaxDiffTop)
  std::string figure;      ///< --figure: layers × heads heatmap (.svg, .png, .pdf); empty: none
  std::string colour_map;  ///< --colour-map of --figure, as plot's; empty: rdbu
  LayoutRequest layout;

  void validate() const;
  ResultFormat output_format() const;
};

/// `plan CHECKPOINT... --kv-heads G`: a conversion plan per checkpoint (analysis/plan.hpp).
struct PlanRequest {
  std::vector<std::string> inputs;
  std::vector<std::string> labels;  ///< --label, at most one per input
  /// --kv-heads (≥ 1; that it divides the model's comes with the model), --gauge, --objective,
  /// --rope, --layers, --latent-energy (in (0, 1]), --random (1 … kMaxRandomPartitions), --seed.
  PlanOptions options;
  std::optional<std::string> family;   ///< --family: a family or model type
  std::optional<ResultFormat> format;  ///< --format: table, json or csv; empty: from -o
  std::string output;                  ///< -o; empty or "-": stdout
  std::string write_checkpoint;        ///< --write-checkpoint DIR (one input only)

  void validate() const;
  ResultFormat output_format() const;
};

/// The most random partitions --random draws for the baseline median.
inline constexpr int kMaxRandomPartitions = 100000;

/// The most heads --top lists.
inline constexpr int kMaxDiffTop = 100000;

struct SynthRequest {
  SynthOptions options;  ///< checked by write_synthetic_checkpoint (synth.hpp), naming the option
  std::string output;    ///< the folder written

  void validate() const;
};

/// "table", "json", "csv", "tsv".
std::string_view result_format_name(ResultFormat format) noexcept;
/// Parses a --format name; throws kvrank::Error listing the names.
ResultFormat parse_result_format(std::string_view name);
/// The format names, in table order ("table, json, csv or tsv" with " or ").
std::vector<std::string> result_format_names();
/// "table", "json", "csv": the formats a plan is written in (no TSV).
std::vector<std::string> plan_format_names();
/// The format -o's extension names (.json, .csv, .tsv, .txt, any case); nullopt for any other.
std::optional<ResultFormat> format_of_extension(const std::string& output);
/// The format a result is written in: -o's extension, else --format, else the table (the
/// requests' validate() refuses a --format that contradicts the extension).
ResultFormat written_format(const std::optional<ResultFormat>& format, const std::string& output);

/// "auto", "github", "none" (the command line's names).
std::vector<std::string> annotate_names();
std::string_view annotate_name(Annotate choice) noexcept;
/// Parses an --annotate name; throws kvrank::Error listing the names.
Annotate parse_annotate(std::string_view name);

/// "text", "table", "json": inspect's --format names (text and table are the same listing).
std::vector<std::string> inspect_format_names();
/// Parses inspect's --format: true for json; throws kvrank::Error listing the names.
bool parse_inspect_json(std::string_view name);
/// "text", "json": check's --format names.
std::vector<std::string> check_format_names();
/// Parses check's --format: true for json; throws kvrank::Error listing the names.
bool parse_check_json(std::string_view name);

/// "auto", "none": plan's --gauge names.
std::vector<std::string> gauge_names();
/// "auto" for true (align heads before merging), "none" for false.
std::string_view gauge_name(bool align) noexcept;
/// Parses a --gauge name: true for auto (align heads before merging), false for none; throws
/// kvrank::Error listing the names.
bool parse_gauge(std::string_view name);

/// "qk,ov" → {qk, ov}: a comma list of representations (empty items skipped); throws
/// kvrank::Error on an unknown name.
std::vector<Repr> parse_repr_list(std::string_view text);

/// "erank,,pcs_90" → {"erank", "pcs_90"}: the items of a comma list, empty ones skipped.
std::vector<std::string> parse_name_list(std::string_view text);

/// "erank,pcs_90" → {Curve::erank, Curve::pcs_90}: check's --metric, a comma list of curve names
/// (empty items skipped); throws kvrank::Error on an unknown name.
std::vector<Curve> parse_metric_list(std::string_view text);

/// "0,0.5,1" → {0, 0.5, 1}: a comma list of numbers for `option` (empty items skipped); throws
/// kvrank::Error "OPTION: "ITEM" is not a number".
std::vector<double> parse_number_list(std::string_view option, std::string_view text);

/// The integer given for `option` as an int (text.hpp's parse_integer over int's range).
int parse_int_option(std::string_view option, std::string_view text);

}  // namespace kvrank::app

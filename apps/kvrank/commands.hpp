// The subcommands of the command line: their arguments as parsed by main.cpp, and one run_*
// function each that calls the library and writes the result.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/plot/figure_options.hpp"
#include "kvrank/synth/synth.hpp"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace kvrank::cli {

constexpr int kExitRegression = 1;
/// `analyze --keep-going`: some inputs failed (each named on stderr); the others were written.
constexpr int kExitSomeInputsFailed = 4;

// ---- options shared by analyze and inspect -----------------------------------------------------

struct LayoutFlags {
  std::string family;
  std::optional<int> heads;
  std::optional<int> kv_heads;
  std::optional<int> head_dim;
  std::string map_file;
  std::string npy_dtype;
  bool activations = false;
  bool fold_input_norm = false;

  void add_to(CLI::App& command);
  kvrank::LayoutOverrides overrides() const;
  kvrank::OpenOptions open_options() const;
};

// ---- subcommands -------------------------------------------------------------------------------

struct AnalyzeArgs {
  std::vector<std::string> paths;
  std::vector<std::string> labels;
  std::vector<std::int64_t> steps;
  std::string repr;
  std::string attention = "all";
  std::string layers;
  std::string layer_shard;
  std::string format;  ///< empty: from -o's extension, else table
  std::string output;
  bool similarity = false;
  int pairs = 0;  ///< `--pairs K`: name the K most similar head pairs per layer (0: none)
  bool summary = false;
  bool with_baseline = false;
  int threads = 0;
  bool quiet = false;
  bool keep_going = false;
  std::string progress = "auto";
  LayoutFlags layout;
};

struct InspectArgs {
  std::vector<std::string> paths;
  std::string format = "text";
  LayoutFlags layout;
};

struct CheckArgs {
  std::string current;
  std::string golden;
  std::string metrics = "erank,erank_centered";
  double abs_tol = 0.05;
  std::optional<double> rel_tol;
  std::string direction = "both";
  std::string format = "text";
  std::string annotate = "auto";  ///< auto: github when $GITHUB_ACTIONS is "true"
};

struct PlotArgs {
  std::vector<std::string> inputs;  ///< FILE or FILE=Panel title
  std::string output;
  kvrank::FigureSettings figure;
  std::vector<std::string> panel_titles;
  std::string over_steps;
  std::optional<int> heatmap_layer;
  std::string heatmap_model;
};

struct MergeArgs {
  std::vector<std::string> parts;
  std::string output;
  std::string layers;
};

struct BaselineArgs {
  int layers = 0;
  int heads = 1;
  std::string format;  ///< empty: from -o's extension, else table (as analyze)
  std::string output;
};

struct SynthArgs {
  kvrank::SynthOptions options;
  std::string redundancy = "0";
  std::string output;
};

/// The output format: the one -o's extension names, else --format, else `fallback` (a --format
/// contradicting the extension is a usage error). Shared by the commands that write results.
std::string output_format(const std::string& format, const std::string& output,
                          const std::string& fallback);
/// The items of a comma list, empty ones dropped.
std::vector<std::string> split_list(const std::string& text);
/// Refuses an integer option's value unless it is decimal digits (CLI11 alone also reads 0x10,
/// 0b1 and 1e1); bounds come from CLI::Range beside it.
CLI::Validator decimal_digits();

int run_analyze(const AnalyzeArgs& args);
int run_inspect(const InspectArgs& args);
/// 0 when the results match the golden file, kExitRegression otherwise.
int run_check(const CheckArgs& args);
int run_plot(const PlotArgs& args);
int run_merge(const MergeArgs& args);
int run_baseline(const BaselineArgs& args);
int run_synth(SynthArgs args);

}  // namespace kvrank::cli

// The subcommands of the command line, one table row each (Ninja's kTools): the name, the
// one-line summary, the function that declares its options into a request, and the function
// that runs the request. main.cpp builds the parser, the help and the "did you mean" lists from
// the table; adding a subcommand is one row in subcommands.cpp plus its two functions.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/app/requests.hpp"

namespace kvrank::cli {

/// A declared subcommand's request, run once the arguments are parsed; returns the exit code.
using Runner = std::function<int()>;

struct Subcommand {
  std::string name;
  std::string summary;
  /// Declares the options on `command`, bound to a request of its own; returns what runs it.
  std::function<Runner(CLI::App& command)> declare;
};

/// A row of the table: `Options` is the request (or a struct holding it and options only the
/// command line has, such as --progress); `declare` binds its fields to options, `run` runs it.
template <typename Options>
Subcommand subcommand(std::string name, std::string summary, void (*declare)(CLI::App&, Options&),
                      int (*run)(const Options&)) {
  auto attach = [declare, run](CLI::App& command) -> Runner {
    auto options = std::make_shared<Options>();
    declare(command, *options);
    return [options, run] { return run(*options); };
  };
  return {std::move(name), std::move(summary), std::move(attach)};
}

/// The table, in the order `kvrank --help` lists it.
const std::vector<Subcommand>& subcommands();

// ---- the rows' functions (declare.cpp declares, run.cpp runs)
// ------------------------------------

// ---- options several subcommands declare (declare.cpp)
// --------------------------------------------

/// --format (table, json, csv, tsv) and -o of the commands that write result tables.
void add_result_output(CLI::App& command, std::optional<app::ResultFormat>& format,
                       std::string& output);
/// --family, --heads, --kv-heads, --head-dim, --map, --npy-dtype, --activations,
/// --fold-input-norm: how a checkpoint is read (analyze, inspect).
void add_layout_options(CLI::App& command, app::LayoutRequest& layout);
/// --colour-map of the heatmaps (plot, diff's --figure); `defaults` says which map each kind of
/// heatmap takes without it. Its value is checked by the plot library (parse_colour_map).
void add_colour_map(CLI::App& command, std::string& colour_map, const std::string& defaults);
/// The metric names `plot --metric` and `check --metric` accept, from the metric table.
std::vector<std::string> metric_names();

/// analyze's request and the option only a terminal has.
struct AnalyzeCommand {
  app::AnalyzeRequest request;
  std::string progress = "auto";  ///< auto, bar, plain or none
};

void declare_analyze(CLI::App& command, AnalyzeCommand& options);
void declare_inspect(CLI::App& command, app::InspectRequest& request);
void declare_check(CLI::App& command, app::CheckRequest& request);
void declare_plot(CLI::App& command, app::PlotRequest& request);
void declare_merge(CLI::App& command, app::MergeRequest& request);
void declare_baseline(CLI::App& command, app::BaselineRequest& request);
void declare_synth(CLI::App& command, app::SynthRequest& request);
void declare_diff(CLI::App& command, app::DiffRequest& request);
void declare_plan(CLI::App& command, app::PlanRequest& request);

int run_analyze(const AnalyzeCommand& options);
int run_inspect(const app::InspectRequest& request);
int run_check(const app::CheckRequest& request);
int run_plot(const app::PlotRequest& request);
int run_merge(const app::MergeRequest& request);
int run_baseline(const app::BaselineRequest& request);
int run_synth(const app::SynthRequest& request);
int run_diff(const app::DiffRequest& request);
int run_plan(const app::PlanRequest& request);

}  // namespace kvrank::cli

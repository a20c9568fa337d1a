// The subcommands (commands.hpp): each maps its arguments to one library call and one writer.
#include "commands.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "kvrank/analysis/analysis.hpp"
#include "kvrank/analysis/inspect.hpp"
#include "kvrank/analysis/merge.hpp"
#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/base/atomic_file.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/plot/png.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/check.hpp"
#include "kvrank/report/report.hpp"
#include "terminal.hpp"

namespace fs = std::filesystem;

namespace kvrank::cli {
namespace {

// ---- output ------------------------------------------------------------------------------------

/// Where the data goes: stdout, or `-o FILE` (none, or "-": stdout). The file is claimed when the
/// command starts — a wrong -o fails at once rather than after the analysis — and published whole
/// by emit(); a failed or interrupted run leaves no partial file (atomic_file.hpp).
class Destination {
 public:
  Destination(const std::string& path, const std::vector<fs::path>& inputs) {
    if (!path.empty() && path != "-") file_.emplace(path, inputs);
  }

  void emit(const std::string& content) {
    if (!file_) return kvrank::write_stdout(content);
    file_->write(content);
    file_->commit();
  }

  /// The claimed file; nullptr when the data goes to stdout.
  kvrank::OutputFile* file() { return file_ ? &*file_ : nullptr; }

 private:
  std::optional<kvrank::OutputFile> file_;
};

std::vector<fs::path> as_paths(const std::vector<std::string>& names) {
  return {names.begin(), names.end()};
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) items.push_back(text.substr(start, end - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

}  // namespace

// ---- options shared by analyze and inspect -----------------------------------------------------

void LayoutFlags::add_to(CLI::App& command) {
  command.add_option("--family", family, "Force the checkpoint family (llama, gpt2, gpt_neox, …)");
  command.add_option("--heads", heads, "Query heads (overrides config.json)")
      ->check(CLI::PositiveNumber);
  command.add_option("--kv-heads", kv_heads, "Key/value heads (overrides config.json)")
      ->check(CLI::PositiveNumber);
  command.add_option("--head-dim", head_dim, "Head dimension (overrides config.json)")
      ->check(CLI::PositiveNumber);
  command.add_option("--map", map_file,
                     "JSON file naming the attention tensors (docs/map-format.md)");
  command.add_option("--npy-dtype", npy_dtype, "Element type of '<V2' NPY arrays")
      ->check(CLI::IsMember({"bf16"}));
  command.add_flag("--activations", activations, "Inputs are captured Q/K/V activations");
}

kvrank::LayoutOverrides LayoutFlags::overrides() const {
  kvrank::LayoutOverrides result;
  if (!family.empty()) result.family = family;
  result.heads = heads;
  result.kv_heads = kv_heads;
  result.head_dim = head_dim;
  if (!map_file.empty()) result.map_file = fs::path(map_file);
  result.activations = activations;
  return result;
}

kvrank::OpenOptions LayoutFlags::open_options() const {
  kvrank::OpenOptions result;
  result.npy.bf16_void = npy_dtype == "bf16";
  return result;
}

// ---- subcommands -------------------------------------------------------------------------------

namespace {

void warn_about_zero_heads(const kvrank::ModelReport& model) {
  for (const auto& layer : model.layers) {
    if (layer.zero_heads.empty()) continue;
    std::string heads;
    for (int head : layer.zero_heads) heads += (heads.empty() ? "" : ", ") + std::to_string(head);
    spdlog::warn("{}: layer {}: head(s) {} are all zero and were left out", model.label,
                 layer.layer, heads);
  }
}

/// After a run long enough for speed to matter, the advice of generic_blas_kernels_advice().
void advise_on_blas_kernels(std::chrono::steady_clock::duration elapsed) {
  if (elapsed < std::chrono::seconds(1)) return;
  if (const auto advice = kvrank::generic_blas_kernels_advice()) spdlog::info("{}", *advice);
}

std::string format_reports(const std::vector<kvrank::ModelReport>& models,
                           const AnalyzeArgs& args) {
  if (args.format == "json") {
    return to_json_text(to_json(models, {.include_similarity = args.similarity}));
  }
  if (args.format == "csv") return kvrank::to_csv(models);
  return kvrank::to_table(models);
}

}  // namespace

int run_analyze(const AnalyzeArgs& args) {
  kvrank::check_thread_count(args.threads);
  kvrank::AnalyzeOptions options;
  options.note = [](const std::string& message) { spdlog::info("{}", message); };
  // Every argument is resolved (and every label fixed) before any model is read or -o is claimed.
  const std::vector<kvrank::ModelInput> inputs =
      kvrank::resolve_models(args.paths, args.labels, options.note);

  std::vector<fs::path> input_paths;  // -o must not be one of them
  for (const auto& input : inputs) input_paths.push_back(input.path);
  if (!args.layout.map_file.empty()) input_paths.push_back(args.layout.map_file);
  Destination destination(args.output, input_paths);
  kvrank::set_compute_threads(args.threads);
  spdlog::debug("products: {}", kvrank::compute_backend_description());
  for (const auto& name : split_list(args.repr)) options.reprs.push_back(kvrank::parse_repr(name));
  if (!args.layers.empty()) options.layers = kvrank::parse_layer_list(args.layers);
  if (!args.layer_shard.empty()) options.shard = kvrank::parse_layer_shard(args.layer_shard);
  options.layout = args.layout.overrides();
  options.open = args.layout.open_options();

  ProgressBar progress(!args.quiet);
  const auto started = std::chrono::steady_clock::now();
  const std::vector<kvrank::ModelReport> models = kvrank::analyze_models(
      inputs, options, args.with_baseline,
      [&](const std::string& label, int done, int total) { progress.update(label, done, total); });
  progress.finish();
  for (const auto& model : models) warn_about_zero_heads(model);
  destination.emit(format_reports(models, args));
  advise_on_blas_kernels(std::chrono::steady_clock::now() - started);
  return 0;
}

int run_inspect(const InspectArgs& args) {
  std::vector<kvrank::InspectReport> reports;
  for (const auto& path : args.paths) {
    const auto checkpoint = kvrank::Checkpoint::open(kvrank::resolve_model_argument(path).path,
                                                     args.layout.open_options());
    reports.push_back(kvrank::inspect_checkpoint(checkpoint, args.layout.overrides()));
  }
  kvrank::write_stdout(args.format == "json" ? to_json_text(to_json(reports))
                                             : kvrank::to_text(reports));
  return 0;
}

namespace {

std::vector<kvrank::ModelReport> read_results(const std::string& path) {
  return kvrank::reports_from_json(kvrank::read_json_object(path), path);
}

}  // namespace

int run_check(const CheckArgs& args) {
  kvrank::CheckOptions options;
  options.metrics.clear();
  for (const auto& name : split_list(args.metrics))
    options.metrics.push_back(kvrank::parse_metric(name));
  options.abs_tol = args.abs_tol;
  options.rel_tol = args.rel_tol;
  const auto violations = kvrank::check_reports(
      read_results(args.current), read_results(args.golden), options, args.current, args.golden);
  const std::string current = kvrank::printable(args.current);
  const std::string golden = kvrank::printable(args.golden);
  if (violations.empty()) {
    kvrank::write_stdout("kvrank check: " + current + " matches " + golden + " within tolerance\n");
    return 0;
  }
  kvrank::write_stdout(kvrank::format_violations(violations) +
                       "kvrank check: " + std::to_string(violations.size()) +
                       " regression(s) against " + golden + "\n");
  return kExitRegression;
}

namespace {

/// SVG, or PNG through rsvg-convert when the output name ends in .png (never "-": a file).
void write_figure(const std::string& svg, const std::string& output, Destination& destination) {
  if (fs::path(output).extension() != ".png" || destination.file() == nullptr) {
    destination.emit(svg);
    return;
  }
  kvrank::render_png(svg, *destination.file());
  destination.file()->commit();
}

const kvrank::ModelReport& pick_model(const std::vector<kvrank::ModelReport>& models,
                                      const std::string& label, const std::string& file) {
  for (const auto& model : models) {
    if (label.empty() || model.label == label) return model;
  }
  throw kvrank::Error(file,
                      label.empty() ? "holds no model" : "has no model labelled \"" + label + "\"");
}

}  // namespace

int run_plot(const PlotArgs& args) {
  Destination destination(args.output, as_paths(args.inputs));
  if (args.heatmap_layer) {
    const auto models = read_results(args.inputs.front());
    const auto& model = pick_model(models, args.heatmap_model, args.inputs.front());
    std::string svg;
    try {
      svg = kvrank::plot_heatmap_svg(model, *args.heatmap_layer, args.title);
    } catch (const kvrank::Error& e) {  // the plotter knows the model, not the file it came from
      throw kvrank::Error(args.inputs.front(), e.what());
    }
    write_figure(svg, args.output, destination);
    return 0;
  }
  std::vector<kvrank::Panel> panels;
  for (const auto& input : args.inputs) {
    panels.push_back({fs::path(input).stem().string(), read_results(input), input});
  }
  write_figure(kvrank::plot_curves_svg(
                   panels, {.metric = kvrank::parse_metric(args.metric), .title = args.title}),
               args.output, destination);
  return 0;
}

int run_merge(const MergeArgs& args) {
  std::vector<kvrank::ResultPart> parts;
  for (const auto& path : args.parts) parts.push_back({path, kvrank::read_json_object(path)});
  kvrank::MergeOptions options;
  if (!args.layers.empty()) options.layers = kvrank::parse_layer_list(args.layers);
  Destination destination(args.output, as_paths(args.parts));
  // Written as analyze writes results (to_json_text), so a merge matches a whole run byte for byte.
  destination.emit(kvrank::to_json_text(kvrank::merge_results(parts, options)));
  return 0;
}

int run_baseline(const BaselineArgs& args) {
  Destination destination(args.output, {});
  AnalyzeArgs as_analyze;
  as_analyze.format = args.format;
  destination.emit(
      format_reports({kvrank::fully_redundant_baseline(args.layers, args.heads)}, as_analyze));
  return 0;
}

int run_synth(SynthArgs args) {
  args.options.redundancy.clear();
  for (const auto& item : split_list(args.redundancy)) {
    try {
      std::size_t used = 0;
      args.options.redundancy.push_back(std::stod(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::logic_error&) {
      throw kvrank::Error("", "--redundancy: \"" + item + "\" is not a number");
    }
  }
  kvrank::write_synthetic_checkpoint(args.options, args.output);
  return 0;
}

}  // namespace kvrank::cli

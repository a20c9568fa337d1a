// The subcommands (commands.hpp): each maps its arguments to one library call and one writer.
#include "commands.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "kvrank/analysis/analysis.hpp"
#include "kvrank/analysis/inspect.hpp"
#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/base/atomic_file.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/base/usage.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/plot/figure_options.hpp"
#include "kvrank/plot/png.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/check.hpp"
#include "kvrank/report/merge.hpp"
#include "kvrank/report/result_files.hpp"
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

/// The formats a result can be written in, and the -o extensions that name them.
struct FormatExtension {
  const char* extension;
  const char* format;
};
constexpr FormatExtension kFormatExtensions[] = {
    {".json", "json"}, {".csv", "csv"}, {".tsv", "tsv"}, {".txt", "table"}};

/// The format -o's extension names (.json, .csv, .tsv, .txt, in any case); nullopt for any other.
std::optional<std::string> format_of_extension(const std::string& output) {
  const std::string extension = kvrank::ascii_lower(fs::path(output).extension().string());
  for (const auto& known : kFormatExtensions)
    if (extension == known.extension) return known.format;
  return std::nullopt;
}

}  // namespace

/// The output format: the one -o's extension names, else --format, else `fallback`. A --format
/// that contradicts the extension is a usage error, so that `-o out.json` can never hold a table.
std::string output_format(const std::string& format, const std::string& output,
                          const std::string& fallback) {
  const std::optional<std::string> named = format_of_extension(output);
  if (!named) return format.empty() ? fallback : format;
  if (!format.empty() && format != *named)
    throw kvrank::Error("", "--format " + format + " contradicts -o " + output + " (a " +
                                fs::path(output).extension().string() + " file holds " + *named +
                                "): drop --format, or name the file for the format");
  return *named;
}

namespace {

/// Writes the closing line of a run that wrote a file: what, how much, how long.
void report_written(const std::string& output, const std::string& what,
                    std::chrono::steady_clock::time_point started) {
  if (output.empty() || output == "-") return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  char time[32];
  std::snprintf(time, sizeof time, "%.1f s", seconds);
  spdlog::info("wrote {}: {} in {}", output, what, time);
}

/// "1 layer", "12 layers".
std::string layers_text(std::size_t layers) {
  return std::to_string(layers) + (layers == 1 ? " layer" : " layers");
}

/// "3 models × 12 layers", or "3 models, 40 layers in all" when they differ.
std::string count_text(const std::vector<kvrank::ModelReport>& models) {
  std::size_t layers = 0;
  bool same = true;
  for (const auto& model : models) {
    layers += model.layers.size();
    same = same && model.layers.size() == models.front().layers.size();
  }
  const std::string count =
      std::to_string(models.size()) + (models.size() == 1 ? " model" : " models");
  if (same && !models.empty()) return count + " × " + layers_text(models.front().layers.size());
  return count + ", " + layers_text(layers) + " in all";
}

}  // namespace

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

CLI::Validator decimal_digits() {
  return CLI::Validator(
      [](const std::string& value) {
        const bool digits =
            !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
        return digits ? std::string() : "expected a decimal integer, found \"" + value + "\"";
      },
      "DECIMAL");
}

// ---- options shared by analyze and inspect -----------------------------------------------------

void LayoutFlags::add_to(CLI::App& command) {
  command.add_option("--family", family,
                     "Force the checkpoint's reader (default: detected from config.json and the "
                     "tensor names): " +
                         family_choice_list());
  command.add_option("--heads", heads, "Query heads (default: from config.json or the tensors)")
      ->check(CLI::PositiveNumber);
  command
      .add_option("--kv-heads", kv_heads,
                  "Key/value heads (default: from config.json or the tensors)")
      ->check(CLI::PositiveNumber);
  command
      .add_option("--head-dim", head_dim,
                  "Head dimension (default: from config.json or the tensors)")
      ->check(CLI::PositiveNumber);
  command.add_option(
      "--map", map_file,
      "JSON file naming the attention tensors (docs/map-format.md; default: none, names "
      "are recognised)");
  command
      .add_option("--npy-dtype", npy_dtype,
                  "Element type of '<V2' NPY arrays (default: refused, the type is unknown)")
      ->check(CLI::IsMember({"bf16"}));
  command.add_flag("--activations", activations, "Inputs are captured Q/K/V activations");
  command.add_flag("--fold-input-norm", fold_input_norm,
                   "Fold the pre-attention norm's gain into q, k and v (docs/metric.md)");
}

kvrank::LayoutOverrides LayoutFlags::overrides() const {
  kvrank::LayoutOverrides result;
  if (!family.empty()) result.family = family;
  result.heads = heads;
  result.kv_heads = kv_heads;
  result.head_dim = head_dim;
  if (!map_file.empty()) result.map_file = fs::path(map_file);
  result.activations = activations;
  result.fold_input_norm = fold_input_norm;
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
                           const std::string& format, const AnalyzeArgs& args) {
  if (format == "json") {
    return to_json_text(to_json(models, {.include_similarity = args.similarity}));
  }
  if (format == "csv" || format == "tsv") {
    return kvrank::to_csv(models,
                          {.separator = format == "csv" ? ',' : '\t', .summary = args.summary});
  }
  return kvrank::to_table(models);
}

/// --similarity and --summary change what one format holds; with any other they are refused
/// rather than dropped.
void check_format_flags(const AnalyzeArgs& args, const std::string& format) {
  if (args.similarity && format != "json")
    throw kvrank::Error("",
                        "--similarity: the H×H matrices go only into JSON (--format json or "
                        "-o FILE.json), not into " +
                            format);
  if (args.summary && format != "csv" && format != "tsv")
    throw kvrank::Error("",
                        "--summary: one row per model and representation is a CSV or TSV "
                        "form (--format csv or -o FILE.csv), not " +
                            format);
}

/// With --keep-going, an input that fails is named on stderr and left out; otherwise its error
/// ends the run.
class InputFailures {
 public:
  explicit InputFailures(bool keep_going) : keep_going_(keep_going) {}

  /// Runs `step` for `input`; true when it succeeded.
  template <typename Step>
  bool attempt(const std::string& input, Step&& step, Progress* progress = nullptr) {
    try {
      step();
      return true;
    } catch (const kvrank::Error& error) {
      if (!keep_going_) throw;
      if (progress) progress->finish();
      print_error(error.what());
      failed_.push_back(input);
      return false;
    }
  }

  /// After the run: 0, or kExitSomeInputsFailed with a line counting the failures.
  int exit_code(std::size_t inputs) const {
    if (failed_.empty()) return 0;
    print_error(std::to_string(failed_.size()) + " of " + std::to_string(inputs) +
                " inputs failed (named above); the results of the others were written");
    return kExitSomeInputsFailed;
  }

  bool all_failed(std::size_t inputs) const { return failed_.size() == inputs; }

 private:
  bool keep_going_;
  std::vector<std::string> failed_;
};

}  // namespace

int run_analyze(const AnalyzeArgs& args) {
  const auto started = std::chrono::steady_clock::now();
  kvrank::check_given_per_input("--label", args.labels.size(), args.paths.size());
  kvrank::check_given_per_input("--step", args.steps.size(), args.paths.size());
  kvrank::check_thread_count(args.threads);
  const std::string format = output_format(args.format, args.output, "table");
  check_format_flags(args, format);
  kvrank::AnalyzeOptions options;
  options.note = [](const std::string& message) { spdlog::info("{}", message); };
  // Only the JSON result holds each head's own rank: a table or CSV spares its eigenproblems.
  options.head_ranks = format == "json" ? kvrank::HeadRanks::computed : kvrank::HeadRanks::skipped;
  // Every argument is resolved (and every label fixed) before any model is read or -o is claimed.
  InputFailures failures(args.keep_going);
  std::vector<kvrank::ModelInput> inputs;
  std::vector<kvrank::LabelChoice> choices;
  for (std::size_t i = 0; i < args.paths.size(); ++i) {
    failures.attempt(args.paths[i], [&] {
      inputs.push_back(kvrank::resolve_model_argument(args.paths[i]));
      const bool given = i < args.labels.size();
      choices.push_back({given ? args.labels[i] : inputs.back().label, given, args.paths[i]});
    });
  }
  const std::vector<std::string> labels = kvrank::unique_labels(choices, options.note);

  std::vector<fs::path> input_paths;  // -o must not be one of them
  for (const auto& input : inputs) input_paths.push_back(input.path);
  if (!args.layout.map_file.empty()) input_paths.push_back(args.layout.map_file);
  Destination destination(args.output, input_paths);
  const kvrank::ThreadFit threads = kvrank::apply_compute_threads(args.threads);
  if (!threads.reason.empty()) spdlog::info("{}", threads.reason);
  spdlog::debug("threads: {}", threads.threads);
  spdlog::debug("products: {}", kvrank::compute_backend_description());
  for (const auto& name : split_list(args.repr)) options.reprs.push_back(kvrank::parse_repr(name));
  options.attention = kvrank::parse_attention_choice(args.attention);
  if (!args.layers.empty()) options.layers = kvrank::parse_layer_list(args.layers);
  if (!args.layer_shard.empty()) options.shard = kvrank::parse_layer_shard(args.layer_shard);
  options.layout = args.layout.overrides();
  options.open = args.layout.open_options();

  Progress progress(progress_mode(args.progress, args.quiet), static_cast<int>(inputs.size()));
  options.progress = [&](int done, int total) { progress.update(done, total); };
  std::vector<kvrank::ModelReport> models;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    progress.start_model(static_cast<int>(i), labels[i]);
    options.step = i < args.steps.size() ? std::optional(args.steps[i]) : std::nullopt;
    failures.attempt(
        inputs[i].argument,
        [&] {
          for (auto& model : kvrank::analyze_checkpoint(inputs[i], labels[i], options)) {
            warn_about_zero_heads(model);
            models.push_back(std::move(model));
          }
        },
        &progress);
  }
  progress.finish();
  if (failures.all_failed(args.paths.size()))
    throw kvrank::Error("", "no input could be analysed (each is named above)");
  if (args.with_baseline && !models.empty()) {
    models.push_back(kvrank::fully_redundant_baseline(models.front().geometry.num_layers,
                                                      models.front().geometry.heads));
  }
  for (auto& model : models)  // --pairs: the most similar heads, named
    for (auto& layer : model.layers)
      if (args.pairs > 0) kvrank::name_redundant_heads(layer, static_cast<std::size_t>(args.pairs));
  destination.emit(format_reports(models, format, args));
  advise_on_blas_kernels(std::chrono::steady_clock::now() - started);
  report_written(args.output, count_text(models), started);
  return failures.exit_code(args.paths.size());
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

namespace {

bool annotate_for_github(const std::string& choice) {
  if (choice != "auto") return choice == "github";
  const char* actions = std::getenv("GITHUB_ACTIONS");
  return actions != nullptr && std::string(actions) == "true";
}

/// Under GitHub Actions: one annotation per change — on stdout, or on stderr when stdout holds the
/// JSON comparison (the runner reads workflow commands from both) — and the job summary appended
/// to $GITHUB_STEP_SUMMARY when the runner names one.
void annotate_github(const std::vector<kvrank::Violation>& violations,
                     const kvrank::CheckOptions& options, const CheckArgs& args) {
  const std::string annotations = kvrank::github_annotations(violations, args.current);
  if (args.format == "json")
    std::fputs(annotations.c_str(), stderr);
  else
    kvrank::write_stdout(annotations);
  const char* summary = std::getenv("GITHUB_STEP_SUMMARY");
  if (summary == nullptr || *summary == '\0') return;
  std::ofstream out(summary, std::ios::app);
  out << kvrank::markdown_summary(violations, options, args.current, args.golden);
  if (!out) spdlog::warn("could not append the job summary to {}", summary);
}

}  // namespace

int run_check(const CheckArgs& args) {
  kvrank::CheckOptions options;
  options.metrics.clear();
  for (const auto& name : split_list(args.metrics))
    options.metrics.push_back(kvrank::parse_curve(name));
  options.abs_tol = args.abs_tol;
  options.rel_tol = args.rel_tol;
  options.direction = kvrank::parse_direction(args.direction);
  const auto violations = kvrank::check_reports(
      read_results(args.current), read_results(args.golden), options, args.current, args.golden);
  if (annotate_for_github(args.annotate)) annotate_github(violations, options, args);
  if (args.format == "json") {
    kvrank::write_stdout(kvrank::to_json_text(
        kvrank::check_to_json(violations, options, args.current, args.golden)));
    return violations.empty() ? 0 : kExitRegression;
  }
  const std::string current = kvrank::printable(args.current);
  const std::string golden = kvrank::printable(args.golden);
  if (violations.empty()) {
    kvrank::write_stdout("kvrank check: " + current + " matches " + golden + " within tolerance\n");
    return 0;
  }
  kvrank::write_stdout(kvrank::format_violations(violations) +
                       "kvrank check: " + std::to_string(violations.size()) +
                       " value(s) changed beyond tolerance against " + golden + "\n");
  return kExitRegression;
}

namespace {

/// The output's format: SVG on stdout ("-"), else by the extension (any other is a usage error,
/// raised before anything is read or written).
kvrank::FigureFormat output_format(const std::string& output) {
  return output == "-" ? kvrank::FigureFormat::svg : kvrank::figure_format(output);
}

/// SVG as it is, or PNG/PDF through rsvg-convert.
void write_figure(const std::string& svg, kvrank::FigureFormat format, const PlotArgs& args,
                  Destination& destination) {
  if (format == kvrank::FigureFormat::svg || destination.file() == nullptr) {
    destination.emit(svg);
    return;
  }
  kvrank::render_figure(svg, format, kvrank::png_dpi(args.figure), *destination.file());
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

/// An input FILE=Title: the file and its panel title. A whole argument naming an existing file
/// is that file, '=' and all.
std::pair<std::string, std::optional<std::string>> titled_input(const std::string& argument) {
  std::error_code error;
  const std::size_t equals = argument.find('=');
  if (equals == std::string::npos || fs::exists(argument, error)) return {argument, std::nullopt};
  return {argument.substr(0, equals), argument.substr(equals + 1)};
}

std::vector<kvrank::Panel> plot_panels(const PlotArgs& args) {
  std::vector<kvrank::Panel> panels;
  for (const std::string& input : args.inputs) {
    const auto [file, title] = titled_input(input);
    panels.push_back({title.value_or(fs::path(file).stem().string()), read_results(file), file});
  }
  kvrank::apply_panel_titles(panels, args.panel_titles);
  return panels;
}

std::vector<fs::path> plot_input_paths(const PlotArgs& args) {
  std::vector<fs::path> paths;
  for (const auto& input : args.inputs) paths.emplace_back(titled_input(input).first);
  if (!args.figure.style_file.empty()) paths.emplace_back(args.figure.style_file);
  return paths;
}

std::string similarity_figure(const PlotArgs& args) {
  const std::string file = titled_input(args.inputs.front()).first;
  const auto models = read_results(file);
  const auto& model = pick_model(models, args.heatmap_model, file);
  try {
    return kvrank::plot_heatmap_svg(model, *args.heatmap_layer, args.figure.title);
  } catch (const kvrank::Error& e) {  // the plotter knows the model, not the file it came from
    throw kvrank::Error(file, e.what());
  }
}

}  // namespace

int run_plot(const PlotArgs& args) {
  const auto started = std::chrono::steady_clock::now();
  const kvrank::FigureFormat format = output_format(args.output);
  const kvrank::PlotOptions options = kvrank::plot_options(args.figure);
  if (!args.over_steps.empty()) kvrank::check_step_plot_inputs(args.inputs.size());
  Destination destination(args.output, plot_input_paths(args));
  std::string svg;
  std::string drawn;
  if (args.heatmap_layer) {
    svg = similarity_figure(args);
    drawn = "the similarity of layer " + std::to_string(*args.heatmap_layer);
  } else if (!args.over_steps.empty()) {
    svg = kvrank::plot_steps_svg(plot_panels(args).front(),
                                 kvrank::parse_step_plot(args.over_steps), options);
    drawn = args.over_steps + " over training steps";
  } else {
    const auto panels = plot_panels(args);
    svg = kvrank::plot_curves_svg(panels, options);
    drawn = std::to_string(panels.size()) + (panels.size() == 1 ? " result file" : " result files");
  }
  write_figure(svg, format, args, destination);
  report_written(args.output, drawn, started);
  return 0;
}

int run_merge(const MergeArgs& args) {
  const auto started = std::chrono::steady_clock::now();
  if (const auto named = format_of_extension(args.output); named && *named != "json")
    throw kvrank::Error(
        "", "-o " + args.output + ": merge writes JSON, not " + *named + " (name the file .json)");
  std::vector<kvrank::ResultPart> parts;
  for (const auto& path : args.parts) parts.push_back({path, kvrank::read_json_object(path)});
  kvrank::MergeOptions options;
  if (!args.layers.empty()) options.layers = kvrank::parse_layer_list(args.layers);
  Destination destination(args.output, as_paths(args.parts));
  // Written as analyze writes results (to_json_text), so a merge matches a whole run byte for byte.
  const nlohmann::json merged = kvrank::merge_results(parts, options);
  destination.emit(kvrank::to_json_text(merged));
  report_written(args.output,
                 count_text(kvrank::reports_from_json(merged, args.output)) + " from " +
                     std::to_string(args.parts.size()) +
                     (args.parts.size() == 1 ? " part" : " parts"),
                 started);
  return 0;
}

int run_baseline(const BaselineArgs& args) {
  const auto started = std::chrono::steady_clock::now();
  const std::string format = output_format(args.format, args.output, "table");
  Destination destination(args.output, {});
  const std::vector<kvrank::ModelReport> models{
      kvrank::fully_redundant_baseline(args.layers, args.heads)};
  destination.emit(format_reports(models, format, AnalyzeArgs{}));
  report_written(args.output, count_text(models), started);
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
  const auto started = std::chrono::steady_clock::now();
  kvrank::write_synthetic_checkpoint(args.options, args.output);
  report_written(args.output,
                 "a " + args.options.family + " checkpoint of " +
                     layers_text(static_cast<std::size_t>(args.options.layers)),
                 started);
  return 0;
}

}  // namespace kvrank::cli

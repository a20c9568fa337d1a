// kvrank — the command line. Parses arguments, calls one library function per subcommand, prints.
// All the work lives in kvrank_core; this file only maps subcommands to library calls, results to
// writers, and errors to exit codes:
//   0 success · 1 `check` found a regression · 2 invalid input or usage · 3 internal error.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/analysis.hpp"
#include "kvrank/check.hpp"
#include "kvrank/error.hpp"
#include "kvrank/inspect.hpp"
#include "kvrank/report.hpp"
#include "kvrank/svg.hpp"
#include "kvrank/synth.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int kExitRegression = 1;
constexpr int kExitInvalidInput = 2;
constexpr int kExitInternal = 3;

// ---- output ------------------------------------------------------------------------------------

/// Data goes to stdout, or to `path` written atomically (a failed run leaves no partial file).
void emit(const std::string& content, const std::string& path) {
  if (path.empty() || path == "-") {
    std::cout << content << std::flush;
  } else {
    kvrank::write_file_atomically(path, content);
  }
}

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {}
  ~ProgressBar() { finish(); }

  void update(const std::string& label, int done, int total) {
    if (!enabled_ || total <= 0) return;
    constexpr int kWidth = 30;
    const int filled = done * kWidth / total;
    std::fprintf(stderr, "\r%-24.24s [%s%s] %d/%d layers", label.c_str(),
                 std::string(static_cast<std::size_t>(filled), '#').c_str(),
                 std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), done, total);
    drawn_ = true;
  }

  void finish() {
    if (drawn_) std::fputs("\r\033[K", stderr);
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

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

// ---- options shared by analyze and inspect -----------------------------------------------------

struct LayoutFlags {
  std::string family;
  std::optional<int> heads;
  std::optional<int> kv_heads;
  std::optional<int> head_dim;
  std::string map_file;
  std::string npy_dtype;
  bool activations = false;

  void add_to(CLI::App& command) {
    command.add_option("--family", family,
                       "Force the checkpoint family (llama, gpt2, gpt_neox, …)");
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

  kvrank::LayoutOverrides overrides() const {
    kvrank::LayoutOverrides result;
    if (!family.empty()) result.family = family;
    result.heads = heads;
    result.kv_heads = kv_heads;
    result.head_dim = head_dim;
    if (!map_file.empty()) result.map_file = fs::path(map_file);
    result.activations = activations;
    return result;
  }

  kvrank::OpenOptions open_options() const {
    kvrank::OpenOptions result;
    result.npy.bf16_void = npy_dtype == "bf16";
    return result;
  }
};

// ---- subcommands -------------------------------------------------------------------------------

struct AnalyzeArgs {
  std::vector<std::string> paths;
  std::vector<std::string> labels;
  std::string repr;
  std::string layers;
  std::string format = "table";
  std::string output;
  bool similarity = false;
  bool with_baseline = false;
  int threads = 0;
  bool quiet = false;
  LayoutFlags layout;
};

void warn_about_zero_heads(const kvrank::ModelReport& model) {
  for (const auto& layer : model.layers) {
    if (layer.zero_heads.empty()) continue;
    std::string heads;
    for (int head : layer.zero_heads) heads += (heads.empty() ? "" : ", ") + std::to_string(head);
    spdlog::warn("{}: layer {}: head(s) {} are all zero and were left out", model.label,
                 layer.layer, heads);
  }
}

std::string format_reports(const std::vector<kvrank::ModelReport>& models,
                           const AnalyzeArgs& args) {
  if (args.format == "json") {
    return to_json(models, {.include_similarity = args.similarity}).dump(2) + "\n";
  }
  if (args.format == "csv") return kvrank::to_csv(models);
  return kvrank::to_table(models);
}

int run_analyze(const AnalyzeArgs& args) {
  if (args.labels.size() > args.paths.size()) {
    throw kvrank::Error("", "--label given " + std::to_string(args.labels.size()) + " times for " +
                                std::to_string(args.paths.size()) + " input(s)");
  }
  kvrank::set_compute_threads(args.threads);
  kvrank::AnalyzeOptions options;
  for (const auto& name : split_list(args.repr)) options.reprs.push_back(kvrank::parse_repr(name));
  if (!args.layers.empty()) options.layers = kvrank::parse_layer_list(args.layers);
  options.layout = args.layout.overrides();
  options.open = args.layout.open_options();
  options.note = [](const std::string& message) { spdlog::info("{}", message); };

  ProgressBar progress(!args.quiet);
  std::vector<kvrank::ModelReport> models;
  for (std::size_t i = 0; i < args.paths.size(); ++i) {
    const fs::path path = args.paths[i];
    const std::string label = i < args.labels.size() ? args.labels[i] : kvrank::default_label(path);
    options.progress = [&](int done, int total) { progress.update(label, done, total); };
    for (auto& model : kvrank::analyze_checkpoint(path, label, options)) {
      warn_about_zero_heads(model);
      models.push_back(std::move(model));
    }
  }
  progress.finish();
  if (args.with_baseline && !models.empty()) {
    models.push_back(
        kvrank::fully_redundant_baseline(models.front().num_layers, models.front().heads));
  }
  emit(format_reports(models, args), args.output);
  return 0;
}

struct InspectArgs {
  std::vector<std::string> paths;
  std::string format = "text";
  LayoutFlags layout;
};

int run_inspect(const InspectArgs& args) {
  std::vector<kvrank::InspectReport> reports;
  for (const auto& path : args.paths) {
    const auto checkpoint = kvrank::Checkpoint::open(path, args.layout.open_options());
    reports.push_back(kvrank::inspect_checkpoint(checkpoint, args.layout.overrides()));
  }
  std::cout << (args.format == "json" ? to_json(reports).dump(2) + "\n" : kvrank::to_text(reports));
  return 0;
}

std::vector<kvrank::ModelReport> read_results(const std::string& path) {
  return kvrank::reports_from_json(kvrank::read_json_object(path), path);
}

struct CheckArgs {
  std::string current;
  std::string golden;
  std::string metrics = "erank,erank_centered";
  double abs_tol = 0.05;
  std::optional<double> rel_tol;
};

int run_check(const CheckArgs& args) {
  kvrank::CheckOptions options;
  options.metrics = split_list(args.metrics);
  options.abs_tol = args.abs_tol;
  options.rel_tol = args.rel_tol;
  for (const auto& metric : options.metrics)
    (void)kvrank::metric_value({}, metric);  // validate names
  const auto violations = kvrank::check_reports(
      read_results(args.current), read_results(args.golden), options, args.current, args.golden);
  if (violations.empty()) {
    std::cout << "kvrank check: " << args.current << " matches " << args.golden
              << " within tolerance\n";
    return 0;
  }
  std::cout << kvrank::format_violations(violations);
  std::cout << "kvrank check: " << violations.size() << " regression(s) against " << args.golden
            << "\n";
  return kExitRegression;
}

struct PlotArgs {
  std::vector<std::string> inputs;
  std::string output;
  std::string metric = "erank";
  std::string title;
  std::optional<int> heatmap_layer;
  std::string heatmap_model;
};

/// SVG, or PNG through rsvg-convert when the output name ends in .png.
void write_figure(const std::string& svg, const std::string& output) {
  if (fs::path(output).extension() != ".png") {
    emit(svg, output);
    return;
  }
  const fs::path svg_path = fs::path(output).replace_extension(".svg");
  kvrank::write_file_atomically(svg_path, svg);
  const std::string command =
      "rsvg-convert -f png -o '" + output + "' '" + svg_path.string() + "' 2>/dev/null";
  if (std::system(command.c_str()) != 0) {
    throw kvrank::Error(output, "cannot render PNG (is rsvg-convert installed?); the SVG is at " +
                                    svg_path.string());
  }
}

const kvrank::ModelReport& pick_model(const std::vector<kvrank::ModelReport>& models,
                                      const std::string& label, const std::string& file) {
  for (const auto& model : models) {
    if (label.empty() || model.label == label) return model;
  }
  throw kvrank::Error(file,
                      label.empty() ? "holds no model" : "has no model labelled \"" + label + "\"");
}

int run_plot(const PlotArgs& args) {
  if (args.heatmap_layer) {
    const auto models = read_results(args.inputs.front());
    const auto& model = pick_model(models, args.heatmap_model, args.inputs.front());
    std::string svg;
    try {
      svg = kvrank::plot_heatmap_svg(model, *args.heatmap_layer, args.title);
    } catch (const kvrank::Error& e) {  // the plotter knows the model, not the file it came from
      throw kvrank::Error(args.inputs.front(), e.what());
    }
    write_figure(svg, args.output);
    return 0;
  }
  std::vector<kvrank::Panel> panels;
  for (const auto& input : args.inputs) {
    panels.push_back({fs::path(input).stem().string(), read_results(input)});
  }
  write_figure(kvrank::plot_curves_svg(panels, {.metric = args.metric, .title = args.title}),
               args.output);
  return 0;
}

struct BaselineArgs {
  int layers = 0;
  int heads = 1;
  std::string format = "json";
  std::string output;
};

int run_baseline(const BaselineArgs& args) {
  AnalyzeArgs as_analyze;
  as_analyze.format = args.format;
  emit(format_reports({kvrank::fully_redundant_baseline(args.layers, args.heads)}, as_analyze),
       args.output);
  return 0;
}

struct SynthArgs {
  kvrank::SynthOptions options;
  std::string redundancy = "0";
  std::string output;
};

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

// ---- wiring ------------------------------------------------------------------------------------

CLI::App* add_analyze(CLI::App& app, AnalyzeArgs& args) {
  auto* command = app.add_subcommand("analyze", "Per-layer effective rank of attention heads");
  command->add_option("paths", args.paths, "Checkpoints: .safetensors, HF folders, .npy/.npz")
      ->required();
  command->add_option("--label", args.labels, "Label of each model, in order (default: its name)");
  command->add_option("--repr", args.repr, "Head representation(s): qk, ov, k, v (comma list)");
  command->add_option("--layers", args.layers, "Layers to analyse, e.g. 0-11,20");
  command->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  command->add_option("-o,--output", args.output, "Write to FILE (atomically) instead of stdout");
  command->add_flag("--similarity", args.similarity, "Include each layer's H×H similarity (JSON)");
  command->add_flag("--with-baseline", args.with_baseline, "Add the fully-redundant series");
  command->add_option("--threads", args.threads, "Threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  args.layout.add_to(*command);
  return command;
}

CLI::App* add_inspect(CLI::App& app, InspectArgs& args) {
  auto* command =
      app.add_subcommand("inspect", "List tensors and the detected family/variant/heads");
  command->add_option("paths", args.paths, "Checkpoints")->required();
  command->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"text", "table", "json"}));
  args.layout.add_to(*command);
  return command;
}

CLI::App* add_check(CLI::App& app, CheckArgs& args) {
  auto* command =
      app.add_subcommand("check", "Compare rank curves with a golden file (exit 1 on regression)");
  command->add_option("current", args.current, "Result JSON of this run")->required();
  command->add_option("--baseline", args.golden, "Golden result JSON")->required();
  command->add_option("--metric", args.metrics, "Metrics to compare (comma list)");
  command->add_option("--abs-tol", args.abs_tol, "Absolute tolerance")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--rel-tol", args.rel_tol, "Relative tolerance")
      ->check(CLI::NonNegativeNumber);
  return command;
}

CLI::App* add_plot(CLI::App& app, PlotArgs& args) {
  auto* command = app.add_subcommand("plot", "Draw rank curves (one panel per file) as SVG or PNG");
  command->add_option("inputs", args.inputs, "Result JSON files")->required();
  command->add_option("-o,--output", args.output, "Figure file (.svg, or .png via rsvg-convert)")
      ->required();
  command->add_option("--metric", args.metric, "Metric on the y axis");
  command->add_option("--title", args.title, "Figure title");
  command
      ->add_option("--heatmap", args.heatmap_layer, "Draw this layer's similarity matrix instead")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--model", args.heatmap_model,
                      "Model label for --heatmap (default: the first)");
  return command;
}

CLI::App* add_baseline(CLI::App& app, BaselineArgs& args) {
  auto* command = app.add_subcommand("baseline", "The fully-redundant series (1.0 at every layer)");
  command->add_option("--layers", args.layers, "Number of layers")
      ->required()
      ->check(CLI::PositiveNumber);
  command->add_option("--heads", args.heads, "Heads per layer")->check(CLI::PositiveNumber);
  command->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  command->add_option("-o,--output", args.output, "Write to FILE instead of stdout");
  return command;
}

CLI::App* add_synth(CLI::App& app, SynthArgs& args) {
  auto& o = args.options;
  auto* command =
      app.add_subcommand("synth", "Write a seeded test checkpoint of any family/variant");
  command->add_option("--family", o.family,
                      "llama, gpt2, gpt_neox, falcon, phi3, deepseek_v2, lrkv");
  command->add_option("--variant", o.variant, "mha, gqa, mqa, mla, lrkv");
  command->add_option("--layers", o.layers, "Layers");
  command->add_option("--heads", o.heads, "Query heads");
  command->add_option("--kv-heads", o.kv_heads, "Key/value heads");
  command->add_option("--head-dim", o.head_dim, "Head dimension");
  command->add_option("--d-model", o.d_model, "Hidden size (default heads × head dim)");
  command->add_option("--rank", o.rank, "LRKV rank r");
  command->add_option("--kv-lora-rank", o.kv_lora_rank, "MLA latent size");
  command->add_option("--dtype", o.dtype, "f32, bf16 or f16");
  command->add_option("--shards", o.shards, "Number of safetensors shards");
  command->add_option("--redundancy", args.redundancy, "0..1, or one value per layer (comma list)");
  command->add_option("--seed", o.seed, "Random seed");
  command->add_option("-o,--output", args.output, "Output folder")->required();
  return command;
}

void configure_logging(int verbosity) {
  auto logger = spdlog::stderr_color_st("kvrank");
  logger->set_pattern("kvrank: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(verbosity < 0    ? spdlog::level::warn
                    : verbosity == 0 ? spdlog::level::info
                                     : spdlog::level::debug);
}

/// libgomp reads OMP_WAIT_POLICY once, when it loads (before main). Its default — idle workers spin
/// before sleeping — makes OpenMP workers fight OpenBLAS's threads for the same cores (measured on
/// the 128M benchmark shape with 2 threads: 0.40 s → 0.29 s). Unless the user chose a policy,
/// restart once with PASSIVE; if the restart fails, carry on as we are.
void prefer_passive_openmp_workers(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);
}

void print_error(const std::string& message) { std::cerr << "kvrank: error: " << message << "\n"; }

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_openmp_workers(argv);
  CLI::App app{"kvrank — how many effectively different attention heads each layer has"};
  app.set_version_flag("--version", std::string("kvrank ") + KVRANK_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // -q and -v also work after the subcommand
  bool quiet = false;
  int verbose = 0;
  app.add_flag("-q,--quiet", quiet, "Only errors and warnings on stderr, no progress bar");
  app.add_flag("-v,--verbose", verbose, "More detail on stderr");

  AnalyzeArgs analyze;
  InspectArgs inspect;
  CheckArgs check;
  PlotArgs plot;
  BaselineArgs baseline;
  SynthArgs synth;
  auto* analyze_command = add_analyze(app, analyze);
  auto* inspect_command = add_inspect(app, inspect);
  auto* check_command = add_check(app, check);
  auto* plot_command = add_plot(app, plot);
  auto* baseline_command = add_baseline(app, baseline);
  auto* synth_command = add_synth(app, synth);

  try {
    app.parse(argc, argv);
    configure_logging(quiet ? -1 : verbose);
    analyze.quiet = quiet;
    if (analyze_command->parsed()) return run_analyze(analyze);
    if (inspect_command->parsed()) return run_inspect(inspect);
    if (check_command->parsed()) return run_check(check);
    if (plot_command->parsed()) return run_plot(plot);
    if (baseline_command->parsed()) return run_baseline(baseline);
    if (synth_command->parsed()) return run_synth(synth);
    return kExitInternal;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(e.what());
    return kExitInvalidInput;
  } catch (const kvrank::Error& e) {
    print_error(e.what());
    return kExitInvalidInput;
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return kExitInternal;
  }
}

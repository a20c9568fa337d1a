// kvrank — the command line. Parses arguments, calls one library function per subcommand, prints.
// All the work lives in kvrank_core; this file only maps subcommands to library calls, results to
// writers, and errors to exit codes:
//   0 success · 1 `check` found a change beyond tolerance · 2 invalid input or usage (nothing
//   usable) · 3 internal error · 4 `analyze --keep-going`: some inputs failed, the others written
//   (docs/result-format.md).

#include <CLI/CLI.hpp>
#include <cstddef>
#include <exception>
#include <new>
#include <string>

#include "cmd_plan.hpp"
#include "commands.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/heap.hpp"
#include "kvrank/base/memory_limit.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/base/version.hpp"
#include "kvrank/layout/family.hpp"
#include "kvrank/report/result_model.hpp"
#include "terminal.hpp"

using namespace kvrank::cli;

namespace {

constexpr int kExitInvalidInput = 2;
constexpr int kExitInternal = 3;
constexpr std::size_t kUsageMessageBytes = 300;

// ---- wiring ------------------------------------------------------------------------------------

constexpr const char* kLoggingFooter =
    "-q/--quiet (errors and warnings only, no progress) and -v/--verbose (more detail) go before "
    "or after the subcommand.";

/// --format and -o of the commands that write result tables (analyze, baseline).
void add_result_output(CLI::App& command, std::string& format, std::string& output) {
  command
      .add_option("--format", format,
                  "Output format (default: from -o's extension .json/.csv/.tsv/.txt, else table)")
      ->check(CLI::IsMember({"table", "json", "csv", "tsv"}));
  command.add_option("-o,--output", output,
                     "Write to FILE (atomically; default: stdout); its extension sets the format");
}

CLI::App* add_analyze(CLI::App& app, AnalyzeArgs& args) {
  auto* command = app.add_subcommand("analyze", "Per-layer effective rank of attention heads");
  command
      ->add_option("paths", args.paths,
                   "Checkpoints: .safetensors files, Hugging Face folders (sharded too), repo ids "
                   "ORG/NAME[@REV] in the local hub cache, .gguf files, .npy/.npz arrays, captured "
                   "activations (--activations)")
      ->required();
  command->add_option("--label", args.labels, "Label of each model, in order (default: its name)");
  command
      ->add_option("--step", args.steps,
                   "Training step of each model, in order (default: from checkpoint-N folder "
                   "names or trainer_state.json)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--repr", args.repr,
                      "Head representation(s), a comma list of qk, ov, k, v (default: qk; k,v for "
                      "K/V-only inputs)");
  command
      ->add_option("--attention", args.attention,
                   "Attention series of encoders and encoder-decoders: self, cross or all "
                   "(default: all; decoder-only models have self only)")
      ->capture_default_str();
  command->add_option("--layers", args.layers, "Layers to analyse, e.g. 0-11,20 (default: all)");
  command->add_option("--layer-shard", args.layer_shard,
                      "Only slice I (0-based) of N of those layers, e.g. 2/8 (see merge; "
                      "default: all of them)");
  add_result_output(*command, args.format, args.output);
  command->add_flag("--similarity", args.similarity,
                    "Include each layer's H×H similarity matrix (JSON only)");
  command->add_flag("--summary", args.summary,
                    "One row per model and representation, the means (CSV/TSV only)");
  command->add_flag("--with-baseline", args.with_baseline, "Add the fully-redundant series");
  command
      ->add_option("--threads", args.threads,
                   "Threads (default: OMP_NUM_THREADS, else all cores; at most 4 × cores); "
                   "layers of under 2^20 attention weights run on one")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--progress", args.progress,
                   "Progress on stderr (auto: a bar on a terminal, plain lines elsewhere)")
      ->check(CLI::IsMember({"auto", "bar", "plain", "none"}))
      ->capture_default_str();
  command->add_flag("--keep-going", args.keep_going,
                    "Analyse the other inputs when one fails: name each failure, write the rest, "
                    "exit 4");
  args.layout.add_to(*command);
  command->footer(kLoggingFooter);
  return command;
}

CLI::App* add_inspect(CLI::App& app, InspectArgs& args) {
  auto* command =
      app.add_subcommand("inspect", "List tensors and the detected family/variant/heads");
  command->add_option("paths", args.paths, "Checkpoints")->required();
  command->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"text", "table", "json"}))
      ->capture_default_str();
  args.layout.add_to(*command);
  return command;
}

CLI::App* add_check(CLI::App& app, CheckArgs& args) {
  auto* command = app.add_subcommand(
      "check", "Compare rank curves with a golden file (exit 1 when one changed)");
  command->add_option("current", args.current, "Result JSON of this run")->required();
  command->add_option("--baseline", args.golden, "Golden result JSON")->required();
  command->add_option("--metric", args.metrics, "Metrics to compare (comma list of the JSON names)")
      ->capture_default_str();
  command->add_option("--abs-tol", args.abs_tol, "Absolute tolerance")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--rel-tol", args.rel_tol, "Relative tolerance (default: none)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--direction", args.direction,
                   "Which changes fail: down (a rank that falls), up, or both")
      ->check(CLI::IsMember({"down", "up", "both"}))
      ->capture_default_str();
  command->add_option("--format", args.format, "Output: text table or JSON")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command
      ->add_option(
          "--annotate", args.annotate,
          "GitHub Actions annotations and job summary (auto: when $GITHUB_ACTIONS is true)")
      ->check(CLI::IsMember({"auto", "github", "none"}))
      ->capture_default_str();
  return command;
}

/// The metric names `plot --metric` accepts, from the metric table.
std::vector<std::string> metric_names() {
  std::vector<std::string> names;
  for (const auto& field : kvrank::metric_fields()) names.emplace_back(field.name);
  return names;
}

CLI::App* add_plot(CLI::App& app, PlotArgs& args) {
  kvrank::FigureSettings& figure = args.figure;
  auto* command = app.add_subcommand(
      "plot", "Draw rank curves (one panel per file and representation) as SVG, PNG or PDF");
  command->add_option("inputs", args.inputs, "Result JSON files (FILE or FILE=Panel title)")
      ->required();
  command->add_option("-o,--output", args.output, "Figure file: .svg, .png or .pdf (any case)")
      ->required();
  command->add_option("--metric", figure.metric, "Metric on the y axis")
      ->check(CLI::IsMember(metric_names()))
      ->capture_default_str();
  command->add_option("--title", figure.title, "Figure title (default: none)");
  command->add_option(
      "--panel-title", args.panel_titles,
      "Title of each input's panel, in order (default: FILE=Title's title, else the "
      "file's name)");
  command
      ->add_option("--size", figure.size,
                   "Paper preset: column (3.5 in, 8 pt) or page (7 in, 9 pt) (default: none, the "
                   "size follows the panels)")
      ->check(CLI::IsMember({"column", "page"}));
  command->add_option("--width", figure.width, "Figure width in inches (default: from the panels)")
      ->check(CLI::Range(kvrank::kMinFigureInches, kvrank::kMaxFigureInches));
  command
      ->add_option("--height", figure.height, "Figure height in inches (default: from the width)")
      ->check(CLI::Range(kvrank::kMinFigureInches, kvrank::kMaxFigureInches));
  command
      ->add_option("--font-size", figure.font_size, "Axis-label font size in points (default 10)")
      ->check(CLI::Range(kvrank::kMinFontPoints, kvrank::kMaxFontPoints));
  command->add_option("--dpi", figure.dpi, "PNG resolution in pixels per inch (default 300)")
      ->check(CLI::Range(kvrank::kMinPngDpi, kvrank::kMaxPngDpi));
  command->add_option("--cols", figure.columns, "Panels per row (default: all in one row)")
      ->check(CLI::Range(1, kvrank::kMaxPanelColumns));
  command->add_flag("--share-y", figure.share_y, "One y range for every panel");
  command->add_option("--ylim", figure.ylim, "Fixed y range LOW,HIGH (default: from the data)");
  command->add_option("--legend", figure.legend, "Legend place")
      ->check(CLI::IsMember({"below", "right", "inside", "none"}))
      ->capture_default_str();
  command->add_option("--style", figure.style_file,
                      "JSON file: label -> {colour, marker, dash}, the same look in every figure");
  command
      ->add_option("--over-steps", args.over_steps,
                   "Metric against training step: layers (a line per layer), mean (a line per "
                   "run) or heatmap (layers x steps) (default: curves against layer)")
      ->check(CLI::IsMember({"layers", "mean", "heatmap"}));
  command
      ->add_option("--heatmap", args.heatmap_layer,
                   "Draw this layer's similarity matrix instead of curves (default: curves)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--model", args.heatmap_model,
                      "Model label for --heatmap (default: the first)");
  return command;
}

CLI::App* add_merge(CLI::App& app, MergeArgs& args) {
  auto* command = app.add_subcommand(
      "merge", "Join result files of parts of one run (array tasks, layer shards) into one");
  command->add_option("parts", args.parts, "Result JSON files, in task order")->required();
  command->add_option("-o,--output", args.output, "Write to FILE (atomically; default: stdout)");
  command->add_option("--layers", args.layers,
                      "The --layers the parts were cut from (default: every layer)");
  return command;
}

CLI::App* add_baseline(CLI::App& app, BaselineArgs& args) {
  auto* command = app.add_subcommand("baseline", "The fully-redundant series (1.0 at every layer)");
  command->add_option("--layers", args.layers, "Number of layers")
      ->required()
      ->check(CLI::PositiveNumber);
  command->add_option("--heads", args.heads, "Heads per layer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_result_output(*command, args.format, args.output);
  return command;
}

CLI::App* add_synth(CLI::App& app, SynthArgs& args) {
  auto& o = args.options;
  auto* command =
      app.add_subcommand("synth", "Write a seeded test checkpoint of any family/variant");
  command->add_option("--family", o.family, kvrank::synthesizable_family_list())
      ->capture_default_str();
  command->add_option("--variant", o.variant,
                      kvrank::variant_list(", ") + " (default: from the family and --kv-heads)");
  command->add_option("--layers", o.layers, "Layers")->capture_default_str();
  command->add_option("--heads", o.heads, "Query heads")->capture_default_str();
  command->add_option("--kv-heads", o.kv_heads, "Key/value heads (default: --heads; gqa needs it)");
  command->add_option("--head-dim", o.head_dim, "Head dimension")->capture_default_str();
  command->add_option("--d-model", o.d_model, "Hidden size (default heads × head dim)");
  command->add_option("--rank", o.rank, "LRKV rank r")->capture_default_str();
  command->add_option("--kv-lora-rank", o.kv_lora_rank, "MLA latent size")->capture_default_str();
  command->add_option("--q-lora-rank", o.q_lora_rank, "MLA query latent size (0: q_proj)")
      ->capture_default_str();
  command->add_option("--nope-dim", o.nope_dim, "MLA qk_nope_head_dim (default head dim)");
  command->add_option("--rope-dim", o.rope_dim, "MLA qk_rope_head_dim (default head dim / 2)");
  command->add_option("--v-head-dim", o.v_head_dim, "MLA v_head_dim (default head dim)");
  // The choices are checked by synth itself, with the message its tests expect.
  command->add_option("--dtype", o.dtype, "Weight type: f32, bf16 or f16")->capture_default_str();
  command->add_option("--shards", o.shards, "Number of safetensors shards")->capture_default_str();
  command
      ->add_option("--redundancy", args.redundancy,
                   "Head redundancy r in [0, 1], one value or one per layer (comma list): each "
                   "head's projections are (1-r)·own + r·shared, so 0 gives independent heads and "
                   "1 identical heads (erank 1)")
      ->capture_default_str();
  command->add_option("--seed", o.seed, "Random seed")->capture_default_str();
  command->add_option("-o,--output", args.output, "Output folder (required)")->required();
  command->footer("Only -o is required; every other option has the default shown.");
  return command;
}

/// An empty value is a value: `--layer-shard "$TASK"` with TASK unset must not read as "no option"
/// (it silently analysed every layer). Every option taking a value refuses "", except a title.
void refuse_empty_values(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& value) {
        return value.empty() ? std::string("empty value (an unset variable?)") : std::string();
      },
      "", "NON-EMPTY");
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size_max() > 0 && option->get_name() != "--title")
      option->check(non_empty);
  }
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; }))
    refuse_empty_values(*command);
}

/// Runs before any library's constructor: OpenBLAS maps a buffer per thread in its own and retries
/// forever when that fails, so under a memory limit the thread count is fitted before it runs.
[[gnu::section(".preinit_array"),
  gnu::used]] void (*fit_threads_before_libraries)(int, char**,
                                                   char**) = kvrank::fit_library_threads_at_start;

}  // namespace

int main(int argc, char** argv) {
  kvrank::reuse_freed_memory();  // layer after layer, the same large buffers (heap.hpp)
  CLI::App app{"kvrank — how many effectively different attention heads each layer has"};
  app.set_version_flag("--version", "kvrank " + std::string(kvrank::version()));
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
  MergeArgs merge;
  BaselineArgs baseline;
  SynthArgs synth;
  auto* analyze_command = add_analyze(app, analyze);
  auto* inspect_command = add_inspect(app, inspect);
  auto* check_command = add_check(app, check);
  auto* plot_command = add_plot(app, plot);
  auto* merge_command = add_merge(app, merge);
  auto* baseline_command = add_baseline(app, baseline);
  auto* synth_command = add_synth(app, synth);
  auto* plan_command = add_plan(app);
  refuse_empty_values(app);

  if (argc < 2) {  // bare `kvrank`: what it does and where to look, not a parse error
    print_error(
        "no subcommand given: kvrank analyze|inspect|check|plot|merge|baseline|synth "
        "(kvrank --help lists them, kvrank SUBCOMMAND --help their options)");
    return kExitInvalidInput;
  }
  try {
    app.parse(argc, argv);
    configure_logging(quiet ? -1 : verbose);
    analyze.quiet = quiet;
    if (analyze_command->parsed()) return run_analyze(analyze);
    if (inspect_command->parsed()) return run_inspect(inspect);
    if (check_command->parsed()) return run_check(check);
    if (plot_command->parsed()) return run_plot(plot);
    if (merge_command->parsed()) return run_merge(merge);
    if (baseline_command->parsed()) return run_baseline(baseline);
    if (synth_command->parsed()) return run_synth(synth);
    if (plan_command->parsed()) return run_plan();
    return kExitInternal;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 quotes a wrong value whole (`--format` with 8 MB): the message is cut like one.
    print_error(kvrank::excerpt(e.what(), kUsageMessageBytes));
    return kExitInvalidInput;
  } catch (const kvrank::Error& e) {
    print_error(e.what());
    return kExitInvalidInput;
  } catch (const std::bad_alloc&) {  // the input needs more memory than this process may have
    print_error(kvrank::out_of_memory_message());
    return kExitInvalidInput;
  } catch (const std::exception& e) {
    print_error(std::string("internal error: ") + e.what());
    return kExitInternal;
  }
}

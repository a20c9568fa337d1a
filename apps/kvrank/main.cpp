// kvrank — the command line. Parses arguments, calls one library function per subcommand, prints.
// All the work lives in kvrank_core; this file only maps subcommands to library calls, results to
// writers, and errors to exit codes:
//   0 success · 1 `check` found a regression · 2 invalid input or usage · 3 internal error.

#include <CLI/CLI.hpp>
#include <exception>
#include <string>

#include "commands.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/layout/family.hpp"
#include "terminal.hpp"

using namespace kvrank::cli;

namespace {

constexpr int kExitInvalidInput = 2;
constexpr int kExitInternal = 3;

// ---- wiring ------------------------------------------------------------------------------------

CLI::App* add_analyze(CLI::App& app, AnalyzeArgs& args) {
  auto* command = app.add_subcommand("analyze", "Per-layer effective rank of attention heads");
  command->add_option("paths", args.paths, "Checkpoints: .safetensors, HF folders, .npy/.npz")
      ->required();
  command->add_option("--label", args.labels, "Label of each model, in order (default: its name)");
  command->add_option("--repr", args.repr, "Head representation(s): qk, ov, k, v (comma list)");
  command->add_option("--layers", args.layers, "Layers to analyse, e.g. 0-11,20");
  command->add_option("--layer-shard", args.layer_shard,
                      "Only slice I (0-based) of N of those layers, e.g. 2/8 (see merge)");
  command->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  command->add_option("-o,--output", args.output, "Write to FILE (atomically) instead of stdout");
  command->add_flag("--similarity", args.similarity, "Include each layer's H×H similarity (JSON)");
  command->add_flag("--with-baseline", args.with_baseline, "Add the fully-redundant series");
  command->add_option("--threads", args.threads, "Threads (default: all cores; at most 4 × cores)")
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

CLI::App* add_merge(CLI::App& app, MergeArgs& args) {
  auto* command = app.add_subcommand(
      "merge", "Join result files of parts of one run (array tasks, layer shards) into one");
  command->add_option("parts", args.parts, "Result JSON files, in task order")->required();
  command->add_option("-o,--output", args.output, "Write to FILE (atomically) instead of stdout");
  command->add_option("--layers", args.layers,
                      "The --layers the parts were cut from (default: every layer)");
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
  command->add_option("--family", o.family, kvrank::synthesizable_family_list());
  command->add_option("--variant", o.variant, kvrank::variant_list(", "));
  command->add_option("--layers", o.layers, "Layers");
  command->add_option("--heads", o.heads, "Query heads");
  command->add_option("--kv-heads", o.kv_heads, "Key/value heads");
  command->add_option("--head-dim", o.head_dim, "Head dimension");
  command->add_option("--d-model", o.d_model, "Hidden size (default heads × head dim)");
  command->add_option("--rank", o.rank, "LRKV rank r");
  command->add_option("--kv-lora-rank", o.kv_lora_rank, "MLA latent size");
  command->add_option("--q-lora-rank", o.q_lora_rank, "MLA query latent size (0: q_proj)");
  command->add_option("--nope-dim", o.nope_dim, "MLA qk_nope_head_dim (default head dim)");
  command->add_option("--rope-dim", o.rope_dim, "MLA qk_rope_head_dim (default head dim / 2)");
  command->add_option("--v-head-dim", o.v_head_dim, "MLA v_head_dim (default head dim)");
  command->add_option("--dtype", o.dtype, "f32, bf16 or f16");
  command->add_option("--shards", o.shards, "Number of safetensors shards");
  command->add_option("--redundancy", args.redundancy, "0..1, or one value per layer (comma list)");
  command->add_option("--seed", o.seed, "Random seed");
  command->add_option("-o,--output", args.output, "Output folder")->required();
  return command;
}

}  // namespace

int main(int argc, char** argv) {
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

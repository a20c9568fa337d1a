// Each subcommand's options, bound to its request (subcommands.hpp). Only parsing happens here:
// a value becomes a typed field (decimal integers, the library's names); the rules the values
// must meet are the request's validate() (kvrank/app/requests.hpp) or the library's.
#include <sstream>

#include "kvrank/base/name_table.hpp"
#include "kvrank/layout/family.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/check.hpp"
#include "kvrank/report/result_model.hpp"
#include "option_kinds.hpp"
#include "subcommands.hpp"
#include "terminal.hpp"

namespace kvrank::cli {
namespace {

constexpr const char* kLoggingFooter =
    "-q/--quiet (errors and warnings only, no progress) and -v/--verbose (more detail) go before "
    "or after the subcommand.";

}  // namespace

void add_colour_map(CLI::App& command, std::string& colour_map, const std::string& defaults) {
  command.add_option("--colour-map", colour_map,
                     "Heatmap colours: viridis, rdbu or greys (default: " + defaults + ")");
}

std::vector<std::string> metric_names() {
  std::vector<std::string> names;
  for (const auto& field : metric_fields()) names.emplace_back(field.name);
  return names;
}

namespace {

/// "erank,erank_centered": `metrics` as --metric takes them (a default shown in help).
std::string metric_list(const std::vector<Curve>& metrics) {
  std::vector<std::string> names;
  for (Curve metric : metrics) names.emplace_back(curve_name(metric));
  return comma_list(names);
}

/// "0", "10", "0,0.5": numbers as an option takes them (a default shown in help).
std::string number_list(const std::vector<double>& numbers) {
  std::ostringstream text;
  for (std::size_t i = 0; i < numbers.size(); ++i) text << (i > 0 ? "," : "") << numbers[i];
  return text.str();
}

}  // namespace

void add_result_output(CLI::App& command, std::optional<app::ResultFormat>& format,
                       std::string& output) {
  add_choice(command, "--format", app::result_format_names(),
             "Output format (default: from -o's extension .json/.csv/.tsv/.txt, else table)",
             [&format](const std::string& name) { format = app::parse_result_format(name); });
  command.add_option("-o,--output", output,
                     "Write to FILE (atomically; default: stdout); its extension sets the format");
}

void add_layout_options(CLI::App& command, app::LayoutRequest& layout) {
  command.add_option("--family", layout.family,
                     "Force the checkpoint's reader (default: detected from config.json and the "
                     "tensor names): " +
                         family_choice_list());
  add_integer(command, "--heads", layout.heads,
              "Query heads (default: from config.json or the tensors)");
  add_integer(command, "--kv-heads", layout.kv_heads,
              "Key/value heads (default: from config.json or the tensors)");
  add_integer(command, "--head-dim", layout.head_dim,
              "Head dimension (default: from config.json or the tensors)");
  command.add_option(
      "--map", layout.map_file,
      "JSON file naming the attention tensors (docs/map-format.md; default: none, names "
      "are recognised)");
  command
      .add_option_function<std::string>(
          "--npy-dtype", [&layout](const std::string&) { layout.npy_bf16 = true; },
          "Element type of '<V2' NPY arrays (default: refused, the type is unknown)")
      ->check(one_of({"bf16"}));
  command.add_flag("--activations", layout.activations, "Inputs are captured Q/K/V activations");
  command.add_flag("--fold-input-norm", layout.fold_input_norm,
                   "Fold the pre-attention norm's gain into q, k and v (docs/metric.md)");
}

namespace {

/// --repr, --attention and --layers, as analyze and diff take them (`repr_default`: what an
/// absent --repr means; `verb`: what is done to the layers; `attention` holds the request's
/// default).
void add_heads_selection(CLI::App& command, std::vector<Repr>& reprs, AttentionChoice& attention,
                         std::optional<std::vector<int>>& layers, const std::string& repr_default,
                         const std::string& verb) {
  add_choice(command, "--repr", repr_names(),
             "Head representation(s), a comma list of " + name_list(repr_names()) +
                 " (default: " + repr_default + ")",
             [&reprs](const std::string& text) { reprs = app::parse_repr_list(text); });
  const std::string attention_default(attention_choice_name(attention));
  add_choice(
      command, "--attention", attention_choice_names(),
      "Attention series of encoders and encoder-decoders: " + name_list(attention_choice_names()) +
          " (default: " + attention_default + "; decoder-only models have self only)",
      [&attention](const std::string& name) { attention = parse_attention_choice(name); })
      ->default_str(attention_default);
  command.add_option_function<std::string>(
      "--layers", [&layers](const std::string& text) { layers = parse_layer_list(text); },
      "Layers to " + verb + ", e.g. 0-11,20 (default: all)");
}

/// analyze's options that choose what is measured.
void add_selection(CLI::App& command, app::AnalyzeRequest& request) {
  add_heads_selection(command, request.reprs, request.attention, request.layers,
                      "qk; k,v for K/V-only inputs", "analyse");
  command.add_option_function<std::string>(
      "--layer-shard",
      [&request](const std::string& text) { request.shard = parse_layer_shard(text); },
      "Only slice I (0-based) of N of those layers, e.g. 2/8 (see merge; default: all of them)");
}

}  // namespace

void declare_analyze(CLI::App& command, AnalyzeCommand& options) {
  app::AnalyzeRequest& request = options.request;
  command
      .add_option("paths", request.inputs,
                  "Checkpoints: .safetensors files, Hugging Face folders (sharded too), repo ids "
                  "ORG/NAME[@REV] in the local hub cache, .gguf files, .npy/.npz arrays, captured "
                  "activations (--activations)")
      ->required();
  command.add_option("--label", request.labels,
                     "Label of each model, in order (default: its name)");
  add_integer_list(command, "--step", request.steps,
                   "Training step of each model, in order (default: from checkpoint-N folder "
                   "names or trainer_state.json)");
  add_selection(command, request);
  add_result_output(command, request.format, request.output);
  command.add_flag("--similarity", request.similarity,
                   "Include each layer's H×H similarity matrix (JSON only)");
  add_integer(command, "--pairs", request.pairs,
              "Name each layer's K most similar head pairs and each head's nearest one "
              "(default: none)")
      ->type_name("K");
  command.add_flag("--summary", request.summary,
                   "One row per model and representation, the means (CSV/TSV only)");
  command.add_flag("--with-baseline", request.with_baseline, "Add the fully-redundant series");
  add_integer(command, "--threads", request.threads,
              "Threads (default: OMP_NUM_THREADS, else all cores; at most 4 × cores); "
              "layers of under 2^20 attention weights run on one");
  command
      .add_option("--progress", options.progress,
                  "Progress on stderr (auto: a bar on a terminal, plain lines elsewhere)")
      ->check(one_of(
          std::vector<std::string>(std::begin(kProgressChoices), std::end(kProgressChoices))))
      ->capture_default_str();
  command.add_flag("--keep-going", request.keep_going,
                   "Analyse the other inputs when one fails: name each failure, write the rest, "
                   "exit 4");
  add_layout_options(command, request.layout);
  command.footer(kLoggingFooter);
}

void declare_inspect(CLI::App& command, app::InspectRequest& request) {
  command.add_option("paths", request.inputs, "Checkpoints")->required();
  add_choice(command, "--format", app::inspect_format_names(), "Output format",
             [&request](const std::string& name) { request.json = app::parse_inspect_json(name); })
      ->default_str("text");
  add_layout_options(command, request.layout);
}

void declare_check(CLI::App& command, app::CheckRequest& request) {
  command.add_option("current", request.current, "Result JSON of this run")->required();
  command.add_option("--baseline", request.golden, "Golden result JSON")->required();
  add_choice(command, "--metric", metric_names(),
             "Metrics to compare (comma list of the JSON names)",
             [&request](const std::string& text) {
               request.options.metrics = app::parse_metric_list(text);
             })
      ->default_str(metric_list(request.options.metrics));
  command.add_option("--abs-tol", request.options.abs_tol, "Absolute tolerance")
      ->type_name("FLOAT:NONNEGATIVE")
      ->capture_default_str();
  command.add_option("--rel-tol", request.options.rel_tol, "Relative tolerance (default: none)")
      ->type_name("FLOAT:NONNEGATIVE");
  add_choice(
      command, "--direction", direction_names(),
      "Which changes fail: down (a rank that falls), up, or both",
      [&request](const std::string& name) { request.options.direction = parse_direction(name); })
      ->default_str(std::string(direction_name(request.options.direction)));
  add_choice(command, "--format", app::check_format_names(), "Output: text table or JSON",
             [&request](const std::string& name) { request.json = app::parse_check_json(name); })
      ->default_str("text");
  add_choice(command, "--annotate", app::annotate_names(),
             "GitHub Actions annotations (grouped per model and representation, at most 10) and "
             "the whole job summary (auto: when $GITHUB_ACTIONS is true)",
             [&request](const std::string& name) { request.annotate = app::parse_annotate(name); })
      ->default_str(std::string(app::annotate_name(request.annotate)));
}

void declare_merge(CLI::App& command, app::MergeRequest& request) {
  command.add_option("parts", request.parts, "Result JSON files, in task order")->required();
  command.add_option("-o,--output", request.output, "Write to FILE (atomically; default: stdout)");
  command.add_option_function<std::string>(
      "--layers", [&request](const std::string& text) { request.layers = parse_layer_list(text); },
      "The --layers the parts were cut from (default: every layer)");
}

void declare_baseline(CLI::App& command, app::BaselineRequest& request) {
  add_integer(command, "--layers", request.layers, "Number of layers")->required();
  add_integer(command, "--heads", request.heads,
              "Heads per layer, 2 or more (default: " + std::to_string(request.head_count()) +
                  ", the fewest that can be redundant)");
  add_result_output(command, request.format, request.output);
}

}  // namespace kvrank::cli

namespace kvrank::cli {

void declare_plot(CLI::App& command, app::PlotRequest& request) {
  FigureSettings& figure = request.figure;
  command
      .add_option("inputs", request.inputs,
                  "Result JSON files (FILE or FILE=Panel title), or plan JSON files")
      ->required();
  command.add_option("-o,--output", request.output, "Figure file: .svg, .png or .pdf (any case)")
      ->required();
  add_choice(command, "--metric", metric_names(), "Metric on the y axis",
             [&figure](const std::string& name) { figure.metric = name; })
      ->default_str(figure.metric);
  command.add_option("--title", figure.title, "Figure title (default: none)");
  command.add_option("--panel-title", request.panel_titles,
                     "Title of each input's panel, in order (default: FILE=Title's title, else "
                     "the file's name)");
  // --size, --legend and the ranges below are checked by the plot library (figure_options.hpp's
  // plot_options), before anything is read.
  command
      .add_option("--size", figure.size,
                  "Paper preset: column (3.5 in, 8 pt) or page (7 in, 9 pt) (default: none, the "
                  "size follows the panels)")
      ->type_name("TEXT:{column,page}");
  command.add_option("--width", figure.width, "Figure width in inches (default: from the panels)");
  command.add_option("--height", figure.height,
                     "Figure height in inches (default: from the width)");
  command.add_option(
      "--font-size", figure.font_size,
      "Axis-label font size in points (default " + number_list({PlotOptions{}.font_pt}) + ")");
  add_integer(command, "--dpi", figure.dpi,
              "PNG resolution in pixels per inch (default " + std::to_string(kDefaultPngDpi) + ")");
  add_integer(command, "--cols", figure.columns, "Panels per row (default: all in one row)");
  command.add_flag("--share-y", figure.share_y, "One y range for every panel");
  command.add_option("--ylim", figure.ylim, "Fixed y range LOW,HIGH (default: from the data)");
  command
      .add_option("--legend", figure.legend, "Legend place: below, right, inside[:CORNER], none")
      ->type_name("TEXT:{below,right,inside,inside:CORNER,none}")
      ->capture_default_str();
  add_choice(command, "--head-order", head_order_names(),
             "Heads of a --heatmap in index order, or clustered (similar heads side by side)",
             [&figure](const std::string& name) { figure.head_order = name; })
      ->default_str("index");
  add_colour_map(command, figure.colour_map, "rdbu for similarity, viridis over steps");
  command.add_option("--style", figure.style_file,
                     "JSON file: label -> {colour, marker, dash}, the same look in every figure");
  add_choice(command, "--over-steps", step_plot_names(),
             "Metric against training step: layers (a line per layer), mean (a line per run) or "
             "heatmap (layers x steps) (default: curves against layer)",
             [&request](const std::string& name) { request.over_steps = name; });
  add_integer(command, "--heatmap", request.heatmap_layer,
              "Draw this layer's similarity matrix instead of curves (default: curves)");
  command.add_option("--model", request.heatmap_model,
                     "Model label for --heatmap (default: the first)");
}

namespace {

/// synth's MLA options.
void add_latent_options(CLI::App& command, SynthOptions& o) {
  add_integer(command, "--kv-lora-rank", o.kv_lora_rank, "MLA latent size", true);
  add_integer(command, "--q-lora-rank", o.q_lora_rank, "MLA query latent size (0: q_proj)", true);
  add_integer(command, "--nope-dim", o.nope_dim, "MLA qk_nope_head_dim (default head dim)");
  add_integer(command, "--rope-dim", o.rope_dim, "MLA qk_rope_head_dim (default head dim / 2)");
  add_integer(command, "--v-head-dim", o.v_head_dim, "MLA v_head_dim (default head dim)");
}

}  // namespace

void declare_synth(CLI::App& command, app::SynthRequest& request) {
  SynthOptions& o = request.options;
  command.add_option("--family", o.family, synthesizable_family_list())->capture_default_str();
  command.add_option("--variant", o.variant,
                     variant_list(", ") + " (default: from the family and --kv-heads)");
  add_integer(command, "--layers", o.layers, "Layers", true);
  add_integer(command, "--heads", o.heads, "Query heads", true);
  add_integer(command, "--kv-heads", o.kv_heads,
              "Key/value heads (default: --heads; gqa needs it)");
  add_integer(command, "--head-dim", o.head_dim, "Head dimension", true);
  add_integer(command, "--d-model", o.d_model, "Hidden size (default heads × head dim)");
  add_integer(command, "--rank", o.rank, "LRKV rank r", true);
  add_latent_options(command, o);
  // The choices are checked by synth itself, with the message its tests expect.
  command.add_option("--dtype", o.dtype, "Weight type: f32, bf16 or f16")->capture_default_str();
  add_integer(command, "--shards", o.shards, "Number of safetensors shards", true);
  command
      .add_option_function<std::string>(
          "--redundancy",
          [&o](const std::string& text) {
            o.redundancy = app::parse_number_list("--redundancy", text);
          },
          "Head redundancy r in [0, 1], one value or one per layer (comma list): each head's "
          "projections are (1-r)·own + r·shared, so 0 gives independent heads and 1 identical "
          "heads (erank 1)")
      ->default_str(number_list(o.redundancy));
  add_integer(command, "--seed", o.seed, "Random seed", true);
  command.add_option("-o,--output", request.output, "Output folder (required)")->required();
  command.footer("Only -o is required; every other option has the default shown.");
}

void declare_diff(CLI::App& command, app::DiffRequest& request) {
  command.add_option("a", request.a, "The first model: a checkpoint, or a result JSON")->required();
  command.add_option("b", request.b, "The second model: a checkpoint, or a result JSON")
      ->required();
  command.add_option("--label", request.labels,
                     "Labels of A and B, in order (default: their names)");
  add_heads_selection(command, request.reprs, request.attention, request.layers,
                      "qk,ov; k,v for K/V-only inputs; a result file's own", "compare");
  add_result_output(command, request.format, request.output);
  add_integer(command, "--top", request.top,
              "How many of the heads that moved most the table and the JSON list", true)
      ->type_name("N");
  command.add_option(
      "--figure", request.figure,
      "Also draw head similarity as a layers x heads heatmap: .svg, .png or .pdf (default: none)");
  add_colour_map(command, request.colour_map, "rdbu");
  add_layout_options(command, request.layout);
}

void declare_plan(CLI::App& command, app::PlanRequest& request) {
  PlanOptions& options = request.options;
  command
      .add_option("paths", request.inputs, "Checkpoints with per-head keys and values (MHA, GQA)")
      ->required();
  command.add_option("--label", request.labels,
                     "Label of each model, in order (default: its name)");
  add_integer(command, "--kv-heads", options.kv_heads_after,
              "Key/value heads after the conversion (G; must divide the model's)")
      ->required();
  add_choice(command, "--gauge", app::gauge_names(),
             "Align heads before merging (auto) or not (none)",
             [&options](const std::string& name) { options.align = app::parse_gauge(name); })
      ->default_str(std::string(app::gauge_name(options.align)));
  add_choice(
      command, "--objective", plan_objective_names(),
      "What the groups minimise: merge (key_error + value_error) or qk (qk_error)",
      [&options](const std::string& name) { options.objective = parse_plan_objective(name); })
      ->default_str(std::string(plan_objective_name(options.objective)));
  add_choice(command, "--rope", rope_convention_names(),
             "RoPE convention of the keys (default: the model type's)",
             [&options](const std::string& name) { options.rope = parse_rope_convention(name); });
  command.add_option("--layers", options.layers, "Layers to plan, e.g. 0-11,20 (default: all)");
  add_choice(
      command, "--format", app::plan_format_names(),
      "Output format (default: from -o's extension .json/.csv, else table)",
      [&request](const std::string& name) { request.format = app::parse_result_format(name); });
  command.add_option("-o,--output", request.output,
                     "Write to FILE (atomically; default: stdout); its extension sets the format");
  command.add_option("--write-checkpoint", request.write_checkpoint,
                     "Also write the converted model (safetensors, G key/value heads) to DIR");
  command.add_option("--latent-energy", options.latent_energy,
                     "Also give latent_rank and latent_rank_forms at this energy, in (0, 1]");
  auto* refit = command.add_flag_function(
      "--refit", [&options](std::int64_t) { options.refit = true; },
      "Pool each group into the head that best keeps its members' attention and output forms, "
      "and refit queries and o_proj columns to it (docs/plan.md; the default, except with "
      "--gauge none)");
  command
      .add_flag_function(
          "--no-refit", [&options](std::int64_t) { options.refit = false; },
          "Mean-pool each group's aligned heads instead, keeping each query head's own q_proj "
          "rows and o_proj columns (rotated)")
      ->excludes(refit);
  add_integer(command, "--random", options.random_partitions,
              "Random partitions for the baseline median", true);
  add_integer(command, "--seed", options.seed, "Seed of the random partitions and the local search",
              true);
  command.add_option("--family", request.family,
                     "Force the checkpoint's reader, as analyze's --family (default: detected)");
}

}  // namespace kvrank::cli

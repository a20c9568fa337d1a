// `kvrank diff A B` (cmd_diff.hpp): options in, diff_models (analysis/diff.hpp) called, the
// comparison written as a table, JSON, CSV or TSV, and optionally its head-similarity figure.
#include "cmd_diff.hpp"

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <optional>

#include "kvrank/analysis/diff.hpp"
#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/base/atomic_file.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/plot/diff_heatmap.hpp"
#include "kvrank/plot/figure_options.hpp"
#include "kvrank/plot/png.hpp"
#include "kvrank/report/result_files.hpp"

namespace kvrank::cli {
namespace {

constexpr int kMaxTop = 100000;

std::string format_diff(const DiffResult& diff, const std::string& format, std::size_t top) {
  if (format == "json") return to_json_text(diff_to_json(diff, top));
  if (format == "csv" || format == "tsv") return diff_to_csv(diff, format == "csv" ? ',' : '\t');
  return diff_to_table(diff, top);
}

DiffOptions diff_options(const DiffArgs& args) {
  DiffOptions options;
  for (const std::string& name : split_list(args.repr)) options.reprs.push_back(parse_repr(name));
  options.attention = parse_attention_choice(args.attention);
  if (!args.layers.empty()) options.layers = parse_layer_list(args.layers);
  options.layout = args.layout.overrides();
  options.open = args.layout.open_options();
  options.note = [](const std::string& message) { spdlog::info("{}", message); };
  return options;
}

void write_figure(const DiffResult& diff, const std::string& path, OutputFile& file) {
  const std::string svg = plot_head_similarity_svg(diff, "");
  const FigureFormat format = figure_format(path);
  if (format == FigureFormat::svg) {
    file.write(svg);
    file.commit();
    return;
  }
  render_figure(svg, format, kDefaultPngDpi, file);
  file.commit();
}

}  // namespace

DiffCommand::DiffCommand(CLI::App& app) {
  DiffArgs& args = args_;
  command_ = app.add_subcommand(
      "diff",
      "What changed between two checkpoints of one shape: per-layer metrics, and how far "
      "each head moved (docs/diff.md)");
  command_->add_option("a", args.a, "The first model: a checkpoint, or a result JSON")->required();
  command_->add_option("b", args.b, "The second model: a checkpoint, or a result JSON")->required();
  command_->add_option("--label", args.labels,
                       "Labels of A and B, in order (default: their names)");
  command_->add_option("--repr", args.repr,
                       "Head representation(s), a comma list of qk, ov, k, v (default: qk,ov; "
                       "k,v for K/V-only inputs; a result file's own)");
  command_->add_option("--attention", args.attention, "Attention series: self, cross or all")
      ->capture_default_str();
  command_->add_option("--layers", args.layers, "Layers to compare, e.g. 0-11,20 (default: all)");
  command_
      ->add_option("--format", args.format,
                   "Output format (default: from -o's extension .json/.csv/.tsv/.txt, else table)")
      ->check(CLI::IsMember({"table", "json", "csv", "tsv"}));
  command_->add_option("-o,--output", args.output, "Write to FILE (atomically; default: stdout)");
  command_
      ->add_option("--top", args.top,
                   "How many of the heads that moved most the table and the JSON list")
      ->type_name("N")
      ->check(decimal_digits())
      ->check(CLI::Range(0, kMaxTop))
      ->capture_default_str();
  command_->add_option(
      "--figure", args.figure,
      "Also draw head similarity as a layers x heads heatmap: .svg, .png or .pdf (default: none)");
  args.layout.add_to(*command_);
}

bool DiffCommand::parsed() const { return command_->parsed(); }

int DiffCommand::run() const {
  const DiffArgs& args = args_;
  const std::string format = output_format(args.format, args.output, "table");
  const auto top = static_cast<std::size_t>(args.top);
  const DiffOptions options = diff_options(args);
  const std::vector<ModelInput> inputs = resolve_models({args.a, args.b}, args.labels, {});
  if (!args.figure.empty()) {
    figure_format(args.figure);  // a wrong extension is refused before anything is read
    if (is_result_file(inputs[0].path) || is_result_file(inputs[1].path))
      throw Error("",
                  "--figure: a result file holds no weights, so the heads cannot be compared "
                  "(give two checkpoints)");
  }
  const std::vector<std::filesystem::path> read = {inputs[0].path, inputs[1].path};
  std::optional<OutputFile> output;
  if (!args.output.empty() && args.output != "-") output.emplace(args.output, read);
  std::optional<OutputFile> figure;
  if (!args.figure.empty()) figure.emplace(args.figure, read);

  const DiffResult diff = diff_models(inputs[0], inputs[1], options);
  if (!diff.heads_compared)
    spdlog::info("per-layer metric changes only: a result file holds no weights");
  const std::string text = format_diff(diff, format, top);
  if (figure) write_figure(diff, args.figure, *figure);
  if (!output) {
    write_stdout(text);
    return 0;
  }
  output->write(text);
  output->commit();
  return 0;
}

}  // namespace kvrank::cli

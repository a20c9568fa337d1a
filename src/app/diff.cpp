// `diff A B` as the application layer runs it (commands.hpp): the request validated, both models
// resolved, diff_models called (analysis/diff.hpp), the comparison written as a table, JSON, CSV
// or TSV, and with --figure its head-similarity heatmap.
#include "kvrank/analysis/diff.hpp"

#include <chrono>
#include <optional>

#include "app/output.hpp"
#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/app/commands.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/plot/diff_heatmap.hpp"
#include "kvrank/plot/figure_options.hpp"
#include "kvrank/report/result_files.hpp"

namespace kvrank::app {
namespace {

std::string format_diff(const DiffResult& diff, ResultFormat format, std::size_t top) {
  switch (format) {
    case ResultFormat::json:
      return to_json_text(diff_to_json(diff, top));
    case ResultFormat::csv:
      return diff_to_csv(diff, ',');
    case ResultFormat::tsv:
      return diff_to_csv(diff, '\t');
    case ResultFormat::table:
      break;
  }
  return diff_to_table(diff, top);
}

DiffOptions diff_options(const DiffRequest& request, const Hooks& hooks) {
  DiffOptions options;
  options.reprs = request.reprs;
  options.attention = request.attention;
  options.layers = request.layers;
  options.layout = request.layout.overrides();
  options.open = request.layout.open_options();
  options.note = [&hooks](const std::string& message) { detail::tell(hooks.info, message); };
  return options;
}

/// The figure options of `plot` that --figure takes: the colour map.
PlotOptions diff_figure_options(const DiffRequest& request) {
  FigureSettings settings;
  settings.colour_map = request.colour_map;
  return plot_options(settings);
}

void write_figure(const DiffResult& diff, const DiffRequest& request, OutputFile& file) {
  detail::write_figure(plot_head_similarity_svg(diff, diff_figure_options(request)),
                       figure_format(request.figure), kDefaultPngDpi, file);
}

/// A and B resolved (model_inputs.hpp), labelled by --label or their names, told apart.
std::vector<ModelInput> resolve_pair(const DiffRequest& request, const Hooks& hooks) {
  std::vector<ModelInput> inputs = {resolve_model_argument(request.a),
                                    resolve_model_argument(request.b)};
  std::vector<LabelChoice> choices;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const bool given = i < request.labels.size();
    choices.push_back(
        {given ? request.labels[i] : inputs[i].label, given, inputs[i].path.string()});
  }
  const std::vector<std::string> labels = unique_labels(choices, hooks.info);
  for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i].label = labels[i];
  return inputs;
}

}  // namespace

DiffResult diff(const DiffRequest& request, const Hooks& hooks) {
  request.validate();
  const std::vector<ModelInput> inputs = resolve_pair(request, hooks);
  if (!request.figure.empty() && (is_result_file(inputs[0].path) || is_result_file(inputs[1].path)))
    throw Error("",
                "--figure: a result file holds no weights, so the heads cannot be compared (give "
                "two checkpoints)");
  return diff_models(inputs[0], inputs[1], diff_options(request, hooks));
}

std::string diff_text(const DiffRequest& request, const Hooks& hooks) {
  request.validate();
  // The figure is claimed before anything is read: a wrong --figure fails at once.
  std::optional<OutputFile> figure;
  if (!request.figure.empty())
    figure.emplace(request.figure, std::vector<std::filesystem::path>{request.a, request.b});
  const DiffResult result = diff(request, hooks);
  if (!result.heads_compared)
    detail::tell(hooks.info, "per-layer metric changes only: a result file holds no weights");
  std::string text =
      format_diff(result, request.output_format(), static_cast<std::size_t>(request.top));
  if (figure) write_figure(result, request, *figure);
  return text;
}

int run_diff(const DiffRequest& request, const Hooks& hooks) {
  const auto started = std::chrono::steady_clock::now();
  request.validate();
  // -o is claimed before anything is read: a wrong -o fails at once.
  detail::Destination destination(request.output, {request.a, request.b});
  destination.emit(diff_text(request, hooks));
  detail::report_written(hooks, request.output, "the comparison of two models", started);
  return kExitOk;
}

}  // namespace kvrank::app

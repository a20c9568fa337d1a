// `plot` in the application layer (commands.hpp): result files in, one figure out.
#include <chrono>
#include <utility>

#include "app/output.hpp"
#include "app/plan_plot.hpp"
#include "kvrank/app/commands.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/plot/png.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/result_files.hpp"

namespace fs = std::filesystem;

namespace kvrank::app {
namespace {

std::vector<ModelReport> read_result_file(const std::string& path) {
  return reports_from_json(read_json_object(path), path);
}

/// The output's format: SVG on stdout ("-"), else by the extension (any other is a usage error,
/// raised before anything is read or written).
FigureFormat figure_format_of(const std::string& output) {
  return output == "-" ? FigureFormat::svg : figure_format(output);
}

/// SVG as it is, or PNG/PDF through rsvg-convert.
void write_figure(const std::string& svg, FigureFormat format, const PlotRequest& request,
                  detail::Destination& destination) {
  if (format == FigureFormat::svg || destination.file() == nullptr) {
    destination.emit(svg);
    return;
  }
  render_figure(svg, format, png_dpi(request.figure), *destination.file());
  destination.file()->commit();
}

/// An input FILE=Title: the file and its panel title. A whole argument naming an existing file
/// is that file, '=' and all.
std::pair<std::string, std::optional<std::string>> titled_input(const std::string& argument) {
  std::error_code error;
  const std::size_t equals = argument.find('=');
  if (equals == std::string::npos || fs::exists(argument, error)) return {argument, std::nullopt};
  return {argument.substr(0, equals), argument.substr(equals + 1)};
}

std::vector<Panel> plot_panels(const PlotRequest& request) {
  std::vector<Panel> panels;
  for (const std::string& input : request.inputs) {
    const auto [file, title] = titled_input(input);
    panels.push_back(
        {title.value_or(fs::path(file).stem().string()), read_result_file(file), file});
  }
  apply_panel_titles(panels, request.panel_titles);
  return panels;
}

std::vector<fs::path> plot_input_paths(const PlotRequest& request) {
  std::vector<fs::path> paths;
  for (const auto& input : request.inputs) paths.emplace_back(titled_input(input).first);
  if (!request.figure.style_file.empty()) paths.emplace_back(request.figure.style_file);
  return paths;
}

std::string similarity_figure(const PlotRequest& request, const PlotOptions& options) {
  const std::string file = titled_input(request.inputs.front()).first;
  const auto models = read_result_file(file);
  const auto& model = heatmap_model(models, request.heatmap_model, file);
  try {
    return plot_heatmap_svg(model, *request.heatmap_layer, options);
  } catch (const Error& e) {  // the plotter knows the model, not the file it came from
    throw Error(file, e.what());
  }
}

}  // namespace

int run_plot(const PlotRequest& request, const Hooks& hooks) {
  const auto started = std::chrono::steady_clock::now();
  const FigureFormat format = figure_format_of(request.output);
  const PlotOptions options = plot_options(request.figure);
  request.validate();
  detail::Destination destination(request.output, plot_input_paths(request));
  std::string svg;
  std::string drawn;
  if (request.heatmap_layer) {
    svg = similarity_figure(request, options);
    drawn = "the similarity of layer " + std::to_string(*request.heatmap_layer);
  } else if (!request.over_steps.empty()) {
    svg =
        plot_steps_svg(plot_panels(request).front(), parse_step_plot(request.over_steps), options);
    drawn = request.over_steps + " over training steps";
  } else if (auto plan = detail::plan_figure(request.inputs, options)) {  // by its content
    svg = std::move(plan->svg);
    drawn = std::move(plan->drawn);
  } else {
    const auto panels = plot_panels(request);
    svg = plot_curves_svg(panels, options);
    drawn = std::to_string(panels.size()) + (panels.size() == 1 ? " result file" : " result files");
  }
  write_figure(svg, format, request, destination);
  detail::report_written(hooks, request.output, drawn, started);
  return kExitOk;
}

}  // namespace kvrank::app

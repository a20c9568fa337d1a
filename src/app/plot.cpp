// `plot` in the application layer (commands.hpp): result files (or results in memory) in, one
// figure out.
#include <chrono>
#include <optional>
#include <utility>

#include "app/output.hpp"
#include "app/plan_plot.hpp"
#include "kvrank/analysis/plan.hpp"
#include "kvrank/app/commands.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/result_files.hpp"

namespace fs = std::filesystem;

namespace kvrank::app {
namespace {

/// The output's format: SVG on stdout ("-"), else by the extension (any other is a usage error,
/// raised before anything is read or written).
FigureFormat figure_format_of(const std::string& output) {
  return output == "-" ? FigureFormat::svg : figure_format(output);
}

/// SVG as it is (or on stdout), or PNG/PDF through rsvg-convert.
void write_figure(const std::string& svg, FigureFormat format, const PlotRequest& request,
                  detail::Destination& destination) {
  if (format == FigureFormat::svg || destination.file() == nullptr) {
    destination.emit(svg);
    return;
  }
  detail::write_figure(svg, format, png_dpi(request.figure), *destination.file());
}

/// An input FILE=Title: the file and its panel title. A whole argument naming an existing file
/// is that file, '=' and all.
detail::PlotInput titled_input(const std::string& argument) {
  std::error_code error;
  const std::size_t equals = argument.find('=');
  if (equals == std::string::npos || fs::exists(argument, error)) return {argument, std::nullopt};
  return {argument.substr(0, equals), argument.substr(equals + 1)};
}

std::vector<detail::PlotInput> titled_inputs(const PlotRequest& request) {
  std::vector<detail::PlotInput> inputs;
  for (const std::string& input : request.inputs) inputs.push_back(titled_input(input));
  return inputs;
}

/// The panels given in memory, or one per result file (titled FILE=Title, else by its stem); the
/// first file's JSON is `first` when the caller has read it.
std::vector<Panel> plot_panels(const PlotRequest& request,
                               const std::optional<nlohmann::json>& first = std::nullopt) {
  std::vector<Panel> panels = request.panels;
  for (const auto& [file, title] : titled_inputs(request)) {
    const bool read = first && panels.size() == request.panels.size();
    panels.push_back({title.value_or(fs::path(file).stem().string()),
                      read ? reports_from_json(*first, file) : read_results(file), file});
  }
  apply_panel_titles(panels, request.panel_titles);
  return panels;
}

std::vector<fs::path> plot_input_paths(const PlotRequest& request) {
  std::vector<fs::path> paths;
  for (const auto& input : titled_inputs(request)) paths.emplace_back(input.file);
  if (!request.figure.style_file.empty()) paths.emplace_back(request.figure.style_file);
  return paths;
}

/// The first input: given in memory, or its result file read.
Panel first_panel(const PlotRequest& request) {
  if (!request.panels.empty()) return request.panels.front();
  const std::string file = titled_input(request.inputs.front()).file;
  return {"", read_results(file), file};
}

std::string similarity_figure(const PlotRequest& request, const PlotOptions& options) {
  const Panel first = first_panel(request);
  const auto& model = heatmap_model(first.models, request.heatmap_model, first.source);
  try {
    return plot_heatmap_svg(model, *request.heatmap_layer, options);
  } catch (const Error& e) {  // the plotter knows the model, not the file it came from
    throw Error(first.source, e.what());
  }
}

/// A figure's SVG, and what it draws (for the closing line).
struct Drawn {
  std::string svg;
  std::string what;
};

Drawn draw(const PlotRequest& request, const PlotOptions& options) {
  if (request.heatmap_layer)
    return {similarity_figure(request, options),
            "the similarity of layer " + std::to_string(*request.heatmap_layer)};
  if (!request.over_steps.empty())
    return {
        plot_steps_svg(plot_panels(request).front(), parse_step_plot(request.over_steps), options),
        request.over_steps + " over training steps"};
  std::optional<nlohmann::json> first;  // the first file, read once: a plan or a result file
  if (!request.inputs.empty()) {
    const std::vector<detail::PlotInput> inputs = titled_inputs(request);
    first = read_json_object(inputs.front().file);
    if (is_plan_document(*first)) {
      detail::PlanFigure plan = detail::plan_figure(*first, inputs, options);
      return {std::move(plan.svg), std::move(plan.drawn)};
    }
  }
  const auto panels = plot_panels(request, first);
  return {plot_curves_svg(panels, options),
          std::to_string(panels.size()) + (panels.size() == 1 ? " result file" : " result files")};
}

}  // namespace

std::string plot_svg(const PlotRequest& request) {
  const PlotOptions options = plot_options(request.figure);
  request.validate();
  return draw(request, options).svg;
}

int run_plot(const PlotRequest& request, const Hooks& hooks) {
  const auto started = std::chrono::steady_clock::now();
  const FigureFormat format = figure_format_of(request.output);
  const PlotOptions options = plot_options(request.figure);
  request.validate();
  detail::Destination destination(request.output, plot_input_paths(request));
  const Drawn drawn = draw(request, options);
  write_figure(drawn.svg, format, request, destination);
  detail::report_written(hooks, request.output, drawn.what, started);
  return kExitOk;
}

}  // namespace kvrank::app

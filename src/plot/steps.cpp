// Training trajectories (svg.hpp): a metric against the training step, from one result holding
// checkpoints of one or more runs (report/training_run.hpp says which run and step each is).
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "kvrank/base/error.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/training_run.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank {
namespace {

using namespace plot_detail;

constexpr std::array<Named<StepPlot>, 3> kStepPlots{
    {{StepPlot::layers, "layers"}, {StepPlot::mean, "mean"}, {StepPlot::heatmap, "heatmap"}}};
static_assert(in_enum_order(kStepPlots));

struct Checkpoint {
  std::int64_t step = 0;
  const ModelReport* model = nullptr;
};

/// One run's checkpoints of one representation, ordered by step.
struct Run {
  std::string name;
  std::string repr;
  std::string title;  ///< the name, with the representation when the result holds several
  std::vector<Checkpoint> checkpoints;
};

std::vector<Run> runs_of(const Panel& panel) {
  std::vector<Run> runs;
  std::set<std::string> reprs;
  for (const ModelReport& model : panel.models) {
    if (is_baseline(model)) continue;
    if (!model.step) {
      throw Error(panel.source, "model \"" + model.label +
                                    "\" has no training step: analyze checkpoint-N folders, or "
                                    "give --step N to analyze");
    }
    reprs.insert(model.repr);
    const std::string name = training_run(model);
    auto run = std::find_if(runs.begin(), runs.end(),
                            [&](const Run& r) { return r.name == name && r.repr == model.repr; });
    if (run == runs.end()) run = runs.insert(runs.end(), Run{name, model.repr, name, {}});
    for (const Checkpoint& held : run->checkpoints) {
      if (held.step != *model.step) continue;
      throw Error(panel.source, "run \"" + name + "\" (" + model.repr +
                                    ") holds two checkpoints of step " +
                                    std::to_string(*model.step) + ": \"" + held.model->label +
                                    "\" and \"" + model.label + "\"");
    }
    run->checkpoints.push_back({*model.step, &model});
  }
  if (runs.empty()) throw Error(panel.source, "holds no model to plot against training step");
  for (Run& run : runs) {
    std::sort(run.checkpoints.begin(), run.checkpoints.end(),
              [](const Checkpoint& a, const Checkpoint& b) { return a.step < b.step; });
    if (reprs.size() > 1) run.title = run.name + " (" + run.repr + ")";
  }
  return runs;
}

std::optional<double> value_at(const ModelReport& model, int layer, Curve metric) {
  for (const LayerMetrics& entry : model.layers) {
    if (entry.layer == layer) return curve_value(entry, metric);
  }
  return std::nullopt;
}

std::vector<int> layers_of(const Run& run) {
  std::set<int> layers;
  for (const Checkpoint& checkpoint : run.checkpoints) {
    for (const LayerMetrics& layer : checkpoint.model->layers) layers.insert(layer.layer);
  }
  return {layers.begin(), layers.end()};
}

std::string layer_label(int layer) { return "Layer " + std::to_string(layer); }

/// The mean of the metric over a checkpoint's finite layer values (NaN when it has none).
double layer_mean(const ModelReport& model, Curve metric) {
  double sum = 0;
  int count = 0;
  for (const LayerMetrics& layer : model.layers) {
    const double value = curve_value(layer, metric);
    if (!std::isfinite(value)) continue;
    sum += value;
    ++count;
  }
  return count > 0 ? sum / count : std::numeric_limits<double>::quiet_NaN();
}

LinePanel step_panel(const std::string& title, const Panel& panel, const PlotOptions& options,
                     const std::string& y_suffix) {
  LinePanel out;
  out.title = title;
  out.source = panel.source;
  out.x_label = "Training step";
  out.y_label = std::string(curve_axis_label(options.metric)) + y_suffix;
  out.y_name = std::string(curve_name(options.metric));
  return out;
}

/// One panel per run, one line per layer.
std::string per_layer_svg(const Panel& panel, const std::vector<Run>& runs,
                          const PlotOptions& options) {
  std::set<int> all_layers;
  for (const Run& run : runs) {
    for (int layer : layers_of(run)) all_layers.insert(layer);
  }
  std::vector<std::string> labels;
  for (int layer : all_layers) labels.push_back(layer_label(layer));
  const auto styles = sequential_styles(labels, options);
  std::vector<LinePanel> panels;
  for (const Run& run : runs) {
    LinePanel out = step_panel(run.title, panel, options, "");
    for (int layer : layers_of(run)) {
      Series series{layer_label(layer), {}, styles.at(layer_label(layer)), false};
      for (const Checkpoint& checkpoint : run.checkpoints) {
        const auto value = value_at(*checkpoint.model, layer, options.metric);
        series.points.emplace_back(static_cast<double>(checkpoint.step),
                                   value.value_or(std::numeric_limits<double>::quiet_NaN()));
      }
      out.series.push_back(std::move(series));
    }
    panels.push_back(std::move(out));
  }
  return line_figure_svg(panels, options);
}

/// One panel per representation, one line per run: the mean over layers.
std::string mean_svg(const Panel& panel, const std::vector<Run>& runs, const PlotOptions& options) {
  std::vector<std::string> reprs;
  std::vector<SeriesKey> keys;
  for (const Run& run : runs) {
    if (std::find(reprs.begin(), reprs.end(), run.repr) == reprs.end()) reprs.push_back(run.repr);
    const bool seen = std::any_of(keys.begin(), keys.end(),
                                  [&](const SeriesKey& k) { return k.label == run.name; });
    const ModelReport& first = *run.checkpoints.front().model;
    if (!seen) keys.push_back({run.name, first.variant, first.geometry.lrkv_rank});
  }
  const auto styles = model_styles(keys, options);
  std::vector<LinePanel> panels;
  for (const std::string& repr : reprs) {
    const std::string name = file_title(panel, options);
    const std::string title = reprs.size() > 1 ? with_repr(name, repr) : name;
    LinePanel out = step_panel(title, panel, options, " (mean over layers)");
    for (const Run& run : runs) {
      if (run.repr != repr) continue;
      Series series{run.name, {}, styles.at(run.name), false};
      for (const Checkpoint& checkpoint : run.checkpoints) {
        series.points.emplace_back(static_cast<double>(checkpoint.step),
                                   layer_mean(*checkpoint.model, options.metric));
      }
      out.series.push_back(std::move(series));
    }
    panels.push_back(std::move(out));
  }
  return line_figure_svg(panels, options);
}

// ---------------------------------------------------------------------------------------------
// Layers × steps heatmap
// ---------------------------------------------------------------------------------------------

/// The colour range of all maps: --ylim, or the finite values (a flat range widened by ±0.5).
std::pair<double, double> colour_range(const std::vector<Run>& runs, const PlotOptions& options,
                                       const std::string& source) {
  if (options.ylim) return *options.ylim;
  double low = std::numeric_limits<double>::infinity();
  double high = -low;
  for (const Run& run : runs) {
    for (const Checkpoint& checkpoint : run.checkpoints) {
      for (const LayerMetrics& layer : checkpoint.model->layers) {
        const double value = curve_value(layer, options.metric);
        if (!std::isfinite(value)) continue;
        low = std::min(low, value);
        high = std::max(high, value);
      }
    }
  }
  if (!std::isfinite(low)) return {0, 1};
  if (!std::isfinite(high - low)) {
    throw Error(source,
                std::string(curve_name(options.metric)) + " values are too far apart to plot");
  }
  if (high - low < 1e-12 * std::max(1.0, std::fabs(high))) return {low - 0.5, high + 0.5};
  return {low, high};
}

/// Every `every`-th index of `count` so that at most `most` are labelled.
std::size_t label_every(std::size_t count, std::size_t most) {
  return std::max<std::size_t>(1, (count + most - 1) / most);
}

/// The run's layers × steps cells in `frame`, layer 0 at the bottom.
std::string step_cells(const Run& run, const std::vector<int>& layers, const Frame& frame,
                       const ColourScale& scale, Curve metric) {
  const double cell_width = frame.width / static_cast<double>(run.checkpoints.size());
  const double cell_height =
      frame.height / static_cast<double>(std::max<std::size_t>(layers.size(), 1));
  std::string out = "<g class=\"cells\" shape-rendering=\"crispEdges\">\n";
  for (std::size_t column = 0; column < run.checkpoints.size(); ++column) {
    const Checkpoint& checkpoint = run.checkpoints[column];
    for (std::size_t row = 0; row < layers.size(); ++row) {
      const auto value = value_at(*checkpoint.model, layers[row], metric);
      const bool finite = value && std::isfinite(*value);
      const double x = frame.left + static_cast<double>(column) * cell_width;
      const double y = frame.top + frame.height - static_cast<double>(row + 1) * cell_height;
      out += "<rect class=\"cell\"" + attr("x", x) + attr("y", y) + attr("width", cell_width) +
             attr("height", cell_height) + attr("fill", finite ? scale.colour(*value) : "#d9d9d9") +
             attr("data-layer", std::to_string(layers[row])) +
             attr("data-step", std::to_string(checkpoint.step)) +
             attr("data-value", finite ? tick_label(*value, 6) : "nan") + "><title>" +
             layer_label(layers[row]) + ", step " + std::to_string(checkpoint.step) + ": " +
             (finite ? tick_label(*value, 4) : "none") + "</title></rect>\n";
    }
  }
  return out + "</g>\n";
}

std::string heatmap_panel(const Run& run, const Frame& frame, const ColourScale& scale,
                          const TitleLayout& title, const PlotOptions& options,
                          const Fonts& fonts) {
  const std::vector<int> layers = layers_of(run);
  const double left = frame.left, top = frame.top, width = frame.width, height = frame.height;
  const double cell_width = width / static_cast<double>(run.checkpoints.size());
  const double cell_height = height / static_cast<double>(std::max<std::size_t>(layers.size(), 1));
  std::string out = "<g class=\"panel\"" + attr("data-title", xml_escape(run.title)) + ">\n";
  out += step_cells(run, layers, frame, scale, options.metric);
  out += "<rect class=\"frame\"" + attr("x", left) + attr("y", top) + attr("width", width) +
         attr("height", height) + " fill=\"none\" stroke=\"#262626\" stroke-width=\"0.8\"/>\n";
  // At most 8 step labels, and no more than fit side by side in the map's width.
  double widest = 0;
  for (const Checkpoint& checkpoint : run.checkpoints) {
    widest = std::max(widest, text_width(std::to_string(checkpoint.step), fonts.tick));
  }
  const auto fit = static_cast<std::size_t>(std::max(1.0, width / (widest + fonts.tick)));
  const std::size_t every_step = label_every(run.checkpoints.size(), std::min<std::size_t>(8, fit));
  for (std::size_t column = 0; column < run.checkpoints.size(); column += every_step) {
    const double x = left + (static_cast<double>(column) + 0.5) * cell_width;
    out +=
        text(x, top + height + 4 + 1.15 * fonts.tick, std::to_string(run.checkpoints[column].step),
             fonts.tick, Anchor::kMiddle, attr("class", "x-tick"));
  }
  const std::size_t every_layer = label_every(layers.size(), 16);
  for (std::size_t row = 0; row < layers.size(); row += every_layer) {
    const double y = top + height - (static_cast<double>(row) + 0.5) * cell_height;
    out += text(left - 6, y + 0.35 * fonts.tick, std::to_string(layers[row]), fonts.tick,
                Anchor::kEnd, attr("class", "y-tick"));
  }
  out += text(left + width / 2, top + height + 4 + 1.15 * fonts.tick + 1.45 * fonts.label,
              "Training step", fonts.label, Anchor::kMiddle, attr("class", "x-label"));
  const double label_x = left - 6 - text_width("00", fonts.tick) - 0.9 * fonts.label;
  const double label_y = top + height / 2;
  out += text(label_x, label_y, "Layer", fonts.label, Anchor::kMiddle,
              attr("class", "y-label") +
                  attr("transform", "rotate(-90 " + num(label_x) + " " + num(label_y) + ")"));
  out += title_svg(title, left + width / 2, top, fonts);
  return out + "</g>\n";
}

std::string step_colour_bar(const Axis& colours, const ColourScale& scale, double left, double top,
                            double height, const std::string& label, const Fonts& fonts) {
  std::string out = "<defs>" + scale.gradient("kvrank-step-bar") + "</defs>\n";
  out += "<g class=\"colour-bar\"" + attr("data-colour-map", colour_map_name(scale.map)) +
         ">\n<rect" + attr("x", left) + attr("y", top) + attr("width", 14.0) +
         attr("height", height) +
         " fill=\"url(#kvrank-step-bar)\" stroke=\"#262626\" stroke-width=\"0.8\"/>\n";
  double widest = 0;
  for (std::size_t i = 0; i < colours.ticks.size(); ++i) {
    const double y = top + height * (1 - colours.fraction(colours.ticks[i]));
    const std::string value = colours.label(i);
    widest = std::max(widest, text_width(value, fonts.tick));
    out += line(left + 14, y, left + 18, y, " stroke=\"#262626\" stroke-width=\"0.8\"");
    out += text(left + 21, y + 0.35 * fonts.tick, value, fonts.tick, Anchor::kStart);
  }
  // Rotated, the title's glyphs reach about one ascent (0.75 em) left of label_x: keep half an em
  // clear of the widest tick label.
  const double label_x = left + 21 + widest + 1.25 * fonts.label;
  const double label_y = top + height / 2;
  out += text(label_x, label_y, label, fonts.label, Anchor::kMiddle,
              attr("transform", "rotate(-90 " + num(label_x) + " " + num(label_y) + ")"));
  return out + "</g>\n";
}

PanelGrid step_map_grid(const std::vector<Run>& runs, const Axis& colours,
                        const PlotOptions& options, const Fonts& fonts,
                        std::vector<TitleLayout>& titles) {
  double widest_tick = 0;
  for (std::size_t i = 0; i < colours.ticks.size(); ++i) {
    widest_tick = std::max(widest_tick, text_width(colours.label(i), fonts.tick));
  }
  std::size_t most_steps = 1;
  for (const Run& run : runs) most_steps = std::max(most_steps, run.checkpoints.size());
  PanelGrid grid;
  grid.title_band = options.title.empty() ? 0 : 2.2 * fonts.figure_title;
  grid.margin_left = 6 + text_width("00", fonts.tick) + 1.5 * fonts.label + 4;
  grid.margin_right = 0.8 * fonts.tick + 4;
  grid.margin_top = 1.9 * fonts.title;
  grid.margin_bottom = 4 + 1.15 * fonts.tick + 2.0 * fonts.label;
  grid.right_band = 14 + 21 + widest_tick + 1.6 * fonts.label + grid.pad;
  const double default_width = std::clamp(48.0 * static_cast<double>(most_steps), 240.0, 520.0);
  size_grid(grid, runs.size(), options, default_width, [](double) { return 0.0; });
  std::vector<std::string> names;
  for (const Run& run : runs) names.push_back(run.title);
  titles = fit_titles(names, fonts, grid.plot_width);
  grid.margin_top = title_room(titles, fonts);
  size_grid(grid, runs.size(), options, default_width, [](double) { return 0.0; });
  return grid;
}

std::string heatmap_svg(const Panel& panel, const std::vector<Run>& runs,
                        const PlotOptions& options) {
  const Fonts fonts = fonts_for(options);
  const auto [low, high] = colour_range(runs, options, panel.source);
  const Axis colours = exact_axis(low, high, 5);
  const ColourScale scale{options.colour_map.value_or(ColourMap::viridis), low, high};
  std::vector<TitleLayout> titles;
  const PanelGrid grid = step_map_grid(runs, colours, options, fonts, titles);
  std::string body;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Frame frame{
        grid.panel_left(i), grid.panel_top(i), grid.plot_width, grid.plot_height, {}, {}};
    body += heatmap_panel(runs[i], frame, scale, titles[i], options, fonts);
  }
  const double bar_height = grid.panel_top(runs.size() - 1) + grid.plot_height - grid.panel_top(0);
  body += step_colour_bar(colours, scale, grid.width - grid.right_band, grid.panel_top(0),
                          bar_height, std::string(curve_axis_label(options.metric)), fonts);
  return figure_document(grid, options, fonts, body);
}

}  // namespace

std::vector<std::string> step_plot_names() { return names_of(kStepPlots); }

StepPlot parse_step_plot(std::string_view text) {
  if (const auto kind = value_named(kStepPlots, text)) return *kind;
  throw Error("", "--over-steps: " + expected_name(kStepPlots, text));
}

void check_step_plot_inputs(std::size_t inputs) {
  if (inputs != 1)
    throw Error("",
                "--over-steps draws one result file (merge the checkpoints' results "
                "first: kvrank merge, or one analyze over all checkpoints)");
}

std::string plot_steps_svg(const Panel& panel, StepPlot kind, const PlotOptions& options) {
  const std::vector<Run> runs = runs_of(panel);
  switch (kind) {
    case StepPlot::layers:
      return per_layer_svg(panel, runs, options);
    case StepPlot::mean:
      return mean_svg(panel, runs, options);
    case StepPlot::heatmap:
      return heatmap_svg(panel, runs, options);
  }
  return {};
}

}  // namespace kvrank

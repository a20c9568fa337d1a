// Rank curves (svg.hpp): one panel per input file and representation, one series per model.
#include <algorithm>

#include "kvrank/base/error.hpp"
#include "kvrank/base/usage.hpp"
#include "kvrank/plot/svg.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank {
namespace {

using namespace plot_detail;

/// The representations of a panel's models, in order of first appearance.
std::vector<std::string> reprs_of(const Panel& panel) {
  std::vector<std::string> reprs;
  for (const ModelReport& model : panel.models) {
    if (is_baseline(model)) continue;
    if (std::find(reprs.begin(), reprs.end(), model.repr) == reprs.end()) {
      reprs.push_back(model.repr);
    }
  }
  return reprs;
}

/// Every model series of all panels once, in order of appearance: what the styles go by.
std::vector<SeriesKey> series_keys(const std::vector<Panel>& panels) {
  std::vector<SeriesKey> keys;
  for (const Panel& panel : panels) {
    for (const ModelReport& model : panel.models) {
      if (is_baseline(model)) continue;
      const bool seen = std::any_of(keys.begin(), keys.end(),
                                    [&](const SeriesKey& k) { return k.label == model.label; });
      if (!seen) keys.push_back({model.label, model.variant, model.geometry.lrkv_rank});
    }
  }
  return keys;
}

Series layer_series(const ModelReport& model, Curve metric, const SeriesStyle& style) {
  Series series{model.label, {}, style, is_baseline(model)};
  for (const LayerMetrics& layer : model.layers) {
    series.points.emplace_back(layer.layer, curve_value(layer, metric));
  }
  return series;
}

/// The panel of one file's models of `repr` (all of them when repr is empty); baselines always.
LinePanel line_panel(const Panel& panel, const std::string& repr, const std::string& title,
                     const PlotOptions& options, const std::map<std::string, SeriesStyle>& styles) {
  LinePanel out;
  out.title = title;
  out.source = panel.source;
  out.x_label = "Layer";
  out.y_label = std::string(curve_axis_label(options.metric));
  out.y_name = std::string(curve_name(options.metric));
  out.line_at_one = fully_redundant_at_one(options.metric);
  for (const ModelReport& model : panel.models) {
    if (!is_baseline(model) && !repr.empty() && model.repr != repr) continue;
    const auto style = styles.find(model.label);
    out.series.push_back(
        layer_series(model, options.metric, style == styles.end() ? SeriesStyle{} : style->second));
  }
  return out;
}

}  // namespace

void apply_panel_titles(std::vector<Panel>& panels, const std::vector<std::string>& titles) {
  check_given_per_input("--panel-title", titles.size(), panels.size());
  for (std::size_t i = 0; i < titles.size(); ++i) panels[i].title = titles[i];
}

std::string plot_curves_svg(const std::vector<Panel>& panels, const PlotOptions& options) {
  const auto styles = model_styles(series_keys(panels), options);
  std::vector<LinePanel> line_panels;
  for (const Panel& panel : panels) {
    const std::vector<std::string> reprs = reprs_of(panel);
    if (reprs.size() <= 1) {
      line_panels.push_back(line_panel(panel, "", panel.title, options, styles));
      continue;
    }
    // Never two series that look like one: each representation gets its own panel.
    for (const std::string& repr : reprs) {
      const std::string title = panel.title.empty() ? repr : panel.title + " (" + repr + ")";
      line_panels.push_back(line_panel(panel, repr, title, options, styles));
    }
  }
  return line_figure_svg(line_panels, options);
}

}  // namespace kvrank

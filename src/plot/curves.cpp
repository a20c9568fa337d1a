// Rank curves (svg.hpp): one panel per input file and representation, one series per model.
#include <algorithm>
#include <map>
#include <set>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"
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

/// The label of each model's series: its label, with its step when the file holds the same label
/// and representation at other steps (checkpoints of one run, drawn apart). Throws the usage
/// error check and merge give for two models of one label, representation and step (or an
/// unknown step, which cannot tell them apart).
std::map<const ModelReport*, std::string> series_labels(const Panel& panel) {
  std::map<const ModelReport*, std::string> labels;
  std::map<std::pair<std::string, std::string>, std::vector<const ModelReport*>> by_key;
  for (const ModelReport& model : panel.models) {
    labels[&model] = model.label;
    if (!is_baseline(model)) by_key[{model.label, model.repr}].push_back(&model);
  }
  for (const auto& [key, models] : by_key) {
    if (models.size() < 2) continue;
    std::set<std::int64_t> steps;
    for (const ModelReport* model : models) {
      if (!model->step || !steps.insert(*model->step).second) {
        throw Error(panel.source, "two models labelled \"" + excerpt(key.first) + "\" with repr " +
                                      excerpt(key.second) +
                                      " (labels must be unique to be plotted: give each its own "
                                      "--label)");
      }
    }
    for (const ModelReport* model : models) {
      labels[model] += " (step " + std::to_string(*model->step) + ")";
    }
  }
  return labels;
}

/// Every model series of all panels once, in order of appearance: what the styles go by.
std::vector<SeriesKey> series_keys(const std::vector<Panel>& panels,
                                   const std::map<const ModelReport*, std::string>& labels) {
  std::vector<SeriesKey> keys;
  for (const Panel& panel : panels) {
    for (const ModelReport& model : panel.models) {
      if (is_baseline(model)) continue;
      const std::string& label = labels.at(&model);
      const bool seen = std::any_of(keys.begin(), keys.end(),
                                    [&](const SeriesKey& k) { return k.label == label; });
      if (!seen) keys.push_back({label, model.variant, model.geometry.lrkv_rank});
    }
  }
  return keys;
}

Series layer_series(const ModelReport& model, const std::string& label, Curve metric,
                    const SeriesStyle& style) {
  Series series{label, {}, style, is_baseline(model)};
  for (const LayerMetrics& layer : model.layers) {
    series.points.emplace_back(layer.layer, curve_value(layer, metric));
  }
  return series;
}

/// The panel of one file's models of `repr` (all of them when repr is empty); baselines always.
LinePanel line_panel(const Panel& panel, const std::string& repr, const std::string& title,
                     const PlotOptions& options, const std::map<std::string, SeriesStyle>& styles,
                     const std::map<const ModelReport*, std::string>& labels) {
  LinePanel out;
  out.title = title;
  out.source = panel.source;
  out.x_label = "Layer";
  out.y_label = std::string(curve_axis_label(options.metric));
  out.y_name = std::string(curve_name(options.metric));
  out.line_at_one = fully_redundant_at_one(options.metric);
  for (const ModelReport& model : panel.models) {
    if (!is_baseline(model) && !repr.empty() && model.repr != repr) continue;
    const std::string& label = labels.at(&model);
    const auto style = styles.find(label);
    out.series.push_back(layer_series(model, label, options.metric,
                                      style == styles.end() ? SeriesStyle{} : style->second));
  }
  return out;
}

}  // namespace

void apply_panel_titles(std::vector<Panel>& panels, const std::vector<std::string>& titles) {
  if (titles.empty()) return;
  if (titles.size() != panels.size()) {
    throw Error("", "--panel-title given " + std::to_string(titles.size()) + " times for " +
                        std::to_string(panels.size()) +
                        " input(s): give it once per input, in order, or not at all");
  }
  for (std::size_t i = 0; i < titles.size(); ++i) panels[i].title = titles[i];
}

std::string plot_curves_svg(const std::vector<Panel>& panels, const PlotOptions& options) {
  std::map<const ModelReport*, std::string> labels;
  for (const Panel& panel : panels) labels.merge(series_labels(panel));
  const auto styles = model_styles(series_keys(panels, labels), options);
  std::vector<LinePanel> line_panels;
  for (const Panel& panel : panels) {
    const std::string name = panels.size() == 1 ? file_title(panel, options) : panel.title;
    const std::vector<std::string> reprs = reprs_of(panel);
    if (reprs.size() <= 1) {
      line_panels.push_back(line_panel(panel, "", name, options, styles, labels));
      continue;
    }
    // Never two series that look like one: each representation gets its own panel.
    for (const std::string& repr : reprs) {
      const std::string title = with_repr(name, repr);
      line_panels.push_back(line_panel(panel, repr, title, options, styles, labels));
    }
  }
  return line_figure_svg(line_panels, options);
}

}  // namespace kvrank

// Rank curves (svg.hpp): one panel per input file and representation, one series per model.
#include <algorithm>
#include <map>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/training_run.hpp"
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

std::string step_text(const ModelReport& model) {
  return model.step ? "step " + std::to_string(*model.step) : "no step";
}

/// A model's name in the legend: its label, or — when the panel holds that label more than once
/// for one representation, as a trajectory of one label does — the label with what tells those
/// models apart: their run, their step. Never two series drawn as one: models that nothing tells
/// apart are refused with `check`'s words.
std::string series_name(const Panel& panel, const ModelReport& model) {
  if (is_baseline(model)) return model.label;
  std::vector<const ModelReport*> namesakes;
  for (const ModelReport& other : panel.models) {
    if (!is_baseline(other) && other.label == model.label && other.repr == model.repr)
      namesakes.push_back(&other);
  }
  if (namesakes.size() == 1) return model.label;
  const auto differ = [&](auto&& property) {
    return std::any_of(namesakes.begin(), namesakes.end(), [&](const ModelReport* other) {
      return property(*other) != property(model);
    });
  };
  std::vector<std::string> parts;
  if (differ([](const ModelReport& m) { return training_run(m); }))
    parts.push_back(training_run(model));
  if (differ([](const ModelReport& m) { return m.step; })) parts.push_back(step_text(model));
  const auto same = [&](const ModelReport* other) {
    return other != &model && training_run(*other) == training_run(model) &&
           other->step == model.step;
  };
  if (parts.empty() || std::any_of(namesakes.begin(), namesakes.end(), same))
    throw Error(panel.source, "two models labelled \"" + excerpt(model.label) + "\" with repr " +
                                  excerpt(model.repr) +
                                  " (labels must be unique to be compared)");  // check's words
  std::string name = model.label + " (" + parts.front();
  if (parts.size() > 1) name += ", " + parts.back();
  return name + ")";
}

/// Every model series of all panels once, in order of appearance: what the styles go by.
std::vector<SeriesKey> series_keys(const std::vector<Panel>& panels) {
  std::vector<SeriesKey> keys;
  for (const Panel& panel : panels) {
    for (const ModelReport& model : panel.models) {
      if (is_baseline(model)) continue;
      const std::string name = series_name(panel, model);
      const bool seen = std::any_of(keys.begin(), keys.end(),
                                    [&](const SeriesKey& k) { return k.label == name; });
      if (!seen) keys.push_back({name, model.variant, model.geometry.lrkv_rank});
    }
  }
  return keys;
}

Series layer_series(const std::string& name, const ModelReport& model, Curve metric,
                    const SeriesStyle& style) {
  Series series{name, {}, style, is_baseline(model)};
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
    const std::string name = series_name(panel, model);
    const auto style = styles.find(name);
    out.series.push_back(layer_series(name, model, options.metric,
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
  const auto styles = model_styles(series_keys(panels), options);
  std::vector<LinePanel> line_panels;
  for (const Panel& panel : panels) {
    const std::string name = panels.size() == 1 ? file_title(panel, options) : panel.title;
    const std::vector<std::string> reprs = reprs_of(panel);
    if (reprs.size() <= 1) {
      line_panels.push_back(line_panel(panel, "", name, options, styles));
      continue;
    }
    // Never two series that look like one: each representation gets its own panel.
    for (const std::string& repr : reprs) {
      const std::string title = with_repr(name, repr);
      line_panels.push_back(line_panel(panel, repr, title, options, styles));
    }
  }
  return line_figure_svg(line_panels, options);
}

}  // namespace kvrank

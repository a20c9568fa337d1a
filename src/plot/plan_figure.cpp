// The figure of a plan (plan_figure.hpp), drawn as a line figure of figure.cpp: the same axes,
// legend, styles and figure options as the rank curves.
#include "kvrank/plot/plan_figure.hpp"

#include "kvrank/base/error.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank {
namespace {

using namespace plot_detail;

constexpr const char* kPlan = "plan";
constexpr const char* kContiguous = "contiguous";
constexpr const char* kRandom = "random median";
constexpr const char* kBefore = "before (original)";

Series plan_series(const std::string& label, const PlanFigureModel& model,
                   double PlanFigureLayer::*field,
                   const std::map<std::string, SeriesStyle>& styles) {
  Series series{label, {}, styles.at(label), false};
  for (const PlanFigureLayer& layer : model.layers)
    series.points.emplace_back(layer.layer, layer.*field);
  return series;
}

std::string heads_text(const PlanFigureModel& model) {
  return std::to_string(model.kv_heads) + " → " + std::to_string(model.kv_heads_after) +
         " KV heads";
}

LinePanel error_panel(const PlanFigureModel& model, const std::string& title,
                      const std::map<std::string, SeriesStyle>& styles) {
  LinePanel panel;
  panel.title = title + model.error_name + ", " + heads_text(model);  // the objective's error
  panel.source = model.label;
  panel.x_label = "Layer";
  panel.y_label = model.error_name;
  panel.y_name = model.error_name;
  panel.series = {plan_series(kPlan, model, &PlanFigureLayer::plan, styles),
                  plan_series(kContiguous, model, &PlanFigureLayer::contiguous, styles),
                  plan_series(kRandom, model, &PlanFigureLayer::random_median, styles)};
  return panel;
}

LinePanel erank_panel(const PlanFigureModel& model, const std::string& title,
                      const std::map<std::string, SeriesStyle>& styles) {
  LinePanel panel;
  panel.title = title + "erank_qk before and after";
  panel.source = model.label;
  panel.x_label = "Layer";
  panel.y_label = "erank (qk)";
  panel.y_name = "erank_qk";
  panel.series = {plan_series(kBefore, model, &PlanFigureLayer::erank_before, styles),
                  plan_series(kPlan, model, &PlanFigureLayer::erank_plan, styles),
                  plan_series(kContiguous, model, &PlanFigureLayer::erank_contiguous, styles),
                  plan_series(kRandom, model, &PlanFigureLayer::erank_random_median, styles)};
  return panel;
}

}  // namespace

std::string plot_plan_svg(const std::vector<PlanFigureModel>& models, const PlotOptions& options) {
  // The plan first in the palette (blue), then contiguous (the GQA default), random, before.
  std::vector<SeriesKey> keys;
  for (const char* label : {kPlan, kContiguous, kRandom, kBefore}) keys.push_back({label, "", {}});
  auto styles = model_styles(keys, options);
  if (options.styles.find(kBefore) == options.styles.end())  // the original: not a conversion
    styles[kBefore].dash = "dashed";
  std::vector<LinePanel> panels;
  for (const PlanFigureModel& model : models) {
    if (model.layers.empty()) throw Error(model.label, "the plan has no layers to draw");
    const std::string title = !model.title.empty() ? model.title + ": "
                              : models.size() > 1  ? model.label + ": "
                                                   : "";
    panels.push_back(error_panel(model, title, styles));
    panels.push_back(erank_panel(model, title, styles));
  }
  return line_figure_svg(panels, options);
}

}  // namespace kvrank

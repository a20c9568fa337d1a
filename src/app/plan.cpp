// `plan` as the application layer runs it (commands.hpp): the request validated, each checkpoint
// planned (analysis/plan.hpp), with --write-checkpoint the converted model written, and the plans
// written as a table, JSON or CSV.
#include "kvrank/analysis/plan.hpp"

#include <chrono>
#include <filesystem>

#include "app/output.hpp"
#include "app/plan_plot.hpp"
#include "kvrank/analysis/plan_checkpoint.hpp"
#include "kvrank/app/commands.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/plot/plan_figure.hpp"

namespace kvrank::app {
namespace {

/// A plan as its figure draws it: the objective's error and erank_qk per layer.
PlanFigureModel figure_model(const PlanModel& plan) {
  const bool qk = plan.objective == PlanObjective::qk;
  const auto error = [qk](const GroupingScore& score) {
    return qk ? score.qk_error : score.key_error + score.value_error;
  };
  PlanFigureModel model;
  model.label = plan.label;
  model.error_name = qk ? "qk_error" : "key_error + value_error";
  model.kv_heads = plan.kv_heads;
  model.kv_heads_after = plan.kv_heads_after;
  for (const PlanLayer& layer : plan.layers)
    model.layers.push_back({layer.layer, error(layer.plan), error(layer.contiguous),
                            error(layer.random_median), layer.erank_qk_before,
                            layer.plan.erank_qk_after, layer.contiguous.erank_qk_after,
                            layer.random_median.erank_qk_after});
  return model;
}

}  // namespace

namespace detail {

PlanFigure plan_figure(const nlohmann::json& first, const std::vector<PlotInput>& inputs,
                       const PlotOptions& options) {
  std::vector<PlanFigureModel> models;
  const auto add_models = [&models](const nlohmann::json& document, const PlotInput& input) {
    if (!is_plan_document(document))
      throw Error(input.file,
                  "not a plan file: a plan figure draws plan files only (plot the others "
                  "apart)");
    const std::vector<PlanModel> plans = plans_from_json(document, input.file);
    for (const PlanModel& plan : plans) {
      models.push_back(figure_model(plan));
      // A file of several models: each is told apart by its label after the title.
      if (input.title)
        models.back().title = plans.size() == 1 ? *input.title : *input.title + ", " + plan.label;
    }
  };
  add_models(first, inputs.front());
  for (std::size_t i = 1; i < inputs.size(); ++i)
    add_models(read_json_object(inputs[i].file), inputs[i]);
  const std::string what = models.size() == 1 ? "the plan of " + models.front().label
                                              : std::to_string(models.size()) + " plans";
  return PlanFigure{plot_plan_svg(models, options), what};
}

}  // namespace detail

std::vector<PlanModel> plan(const PlanRequest& request, const Hooks& hooks) {
  request.validate();
  LayoutOverrides overrides;
  overrides.family = request.family;
  std::vector<PlanModel> models;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    if (hooks.check_cancelled) hooks.check_cancelled();
    const Checkpoint checkpoint = Checkpoint::open(request.inputs[i]);
    const std::string label = i < request.labels.size() ? request.labels[i] : "";
    models.push_back(plan_checkpoint(checkpoint, overrides, request.options, label));
    if (!request.write_checkpoint.empty())
      write_planned_checkpoint(checkpoint, overrides, models.back(), request.write_checkpoint);
  }
  return models;
}

namespace {

std::string format_plans(const std::vector<PlanModel>& models, ResultFormat format) {
  switch (format) {
    case ResultFormat::json:
      return plan_json(models);
    case ResultFormat::csv:
      return plan_csv(models);
    default:
      return plan_table(models);
  }
}

}  // namespace

std::string plan_text(const PlanRequest& request, const Hooks& hooks) {
  return format_plans(plan(request, hooks), request.output_format());
}

int run_plan(const PlanRequest& request, const Hooks& hooks) {
  const auto started = std::chrono::steady_clock::now();
  request.validate();
  const std::vector<std::filesystem::path> inputs(request.inputs.begin(), request.inputs.end());
  detail::Destination destination(request.output, inputs);  // a wrong -o fails before the work
  const std::vector<PlanModel> models = plan(request, hooks);
  destination.emit(format_plans(models, request.output_format()));
  const std::string what =
      std::to_string(models.size()) + (models.size() == 1 ? " plan" : " plans");
  detail::report_written(hooks, request.output, what, started);
  return kExitOk;
}

}  // namespace kvrank::app

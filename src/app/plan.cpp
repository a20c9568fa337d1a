// `plan` as the application layer runs it (commands.hpp): the request validated, each checkpoint
// planned (analysis/plan.hpp), with --write-checkpoint the converted model written, and the plans
// written as a table, JSON or CSV.
#include "kvrank/analysis/plan.hpp"

#include <chrono>
#include <filesystem>

#include "app/output.hpp"
#include "kvrank/analysis/plan_checkpoint.hpp"
#include "kvrank/app/commands.hpp"
#include "kvrank/io/checkpoint.hpp"

namespace kvrank::app {

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

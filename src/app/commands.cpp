// The commands other than analyze and plot (commands.hpp): each one library call and one writer.
#include "kvrank/app/commands.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "app/output.hpp"
#include "kvrank/analysis/analysis.hpp"
#include "kvrank/analysis/inspect.hpp"
#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/report/check.hpp"
#include "kvrank/report/merge.hpp"
#include "kvrank/report/result_files.hpp"

namespace fs = std::filesystem;

namespace kvrank::app {

std::vector<InspectReport> inspect(const InspectRequest& request) {
  request.validate();
  std::vector<InspectReport> reports;
  for (const auto& path : request.inputs) {
    const auto checkpoint =
        Checkpoint::open(resolve_model_argument(path).path, request.layout.open_options());
    reports.push_back(inspect_checkpoint(checkpoint, request.layout.overrides()));
  }
  return reports;
}

std::string inspect_text(const InspectRequest& request) {
  const std::vector<InspectReport> reports = inspect(request);
  return request.json ? to_json_text(to_json(reports)) : to_text(reports);
}

int run_inspect(const InspectRequest& request, const Hooks&) {
  write_stdout(inspect_text(request));
  return kExitOk;
}

CheckOutcome check(const CheckRequest& request, const std::vector<ModelReport>& current,
                   const std::vector<ModelReport>& golden) {
  request.validate();
  CheckOutcome outcome;
  outcome.violations =
      check_reports(current, golden, request.options, request.current, request.golden);
  outcome.table = format_violations(outcome.violations);
  return outcome;
}

namespace {

bool annotate_for_github(Annotate choice) {
  if (choice != Annotate::automatic) return choice == Annotate::github;
  const char* actions = std::getenv("GITHUB_ACTIONS");
  return actions != nullptr && std::string(actions) == "true";
}

/// Under GitHub Actions: the annotations (check.hpp) — on stdout, or on stderr when stdout holds
/// the JSON comparison (the runner reads workflow commands from both) — and the whole job summary
/// appended to $GITHUB_STEP_SUMMARY when the runner names one.
void annotate_github(const std::vector<Violation>& violations, const CheckRequest& request,
                     const Hooks& hooks) {
  const std::string annotations = github_annotations(violations, request.current);
  if (request.json)
    std::fputs(annotations.c_str(), stderr);
  else
    write_stdout(annotations);
  const char* summary = std::getenv("GITHUB_STEP_SUMMARY");
  if (summary == nullptr || *summary == '\0') return;
  std::ofstream out(summary, std::ios::app);
  out << markdown_summary(violations, request.options, request.current, request.golden);
  if (!out)
    detail::tell(hooks.warning, std::string("could not append the job summary to ") + summary);
}

}  // namespace

int run_check(const CheckRequest& request, const Hooks& hooks) {
  request.validate();  // before either file is read
  const CheckOutcome outcome =
      check(request, read_results(request.current), read_results(request.golden));
  const std::vector<Violation>& violations = outcome.violations;
  if (annotate_for_github(request.annotate)) annotate_github(violations, request, hooks);
  const int code = violations.empty() ? kExitOk : kExitRegression;
  if (request.json) {
    write_stdout(
        to_json_text(check_to_json(violations, request.options, request.current, request.golden)));
    return code;
  }
  const std::string current = printable(request.current);
  const std::string golden = printable(request.golden);
  if (violations.empty()) {
    write_stdout("kvrank check: " + current + " matches " + golden + " within tolerance\n");
    return code;
  }
  write_stdout(outcome.table + "kvrank check: " + std::to_string(violations.size()) +
               " value(s) changed beyond tolerance against " + golden + "\n");
  return code;
}

int run_merge(const MergeRequest& request, const Hooks& hooks) {
  const auto started = std::chrono::steady_clock::now();
  request.validate();
  std::vector<ResultPart> parts;
  for (const auto& path : request.parts) parts.push_back({path, read_json_object(path)});
  MergeOptions options;
  options.layers = request.layers;
  detail::Destination destination(request.output, {request.parts.begin(), request.parts.end()});
  // Written as analyze writes results (to_json_text), so a merge matches a whole run byte for byte.
  const nlohmann::json merged = merge_results(parts, options);
  destination.emit(to_json_text(merged));
  detail::report_written(hooks, request.output,
                         detail::count_text(reports_from_json(merged, request.output)) + " from " +
                             std::to_string(request.parts.size()) +
                             (request.parts.size() == 1 ? " part" : " parts"),
                         started);
  return kExitOk;
}

int run_baseline(const BaselineRequest& request, const Hooks& hooks) {
  const auto started = std::chrono::steady_clock::now();
  request.validate();
  const ResultFormat format = written_format(request.format, request.output);
  detail::Destination destination(request.output, {});
  const std::vector<ModelReport> models{
      fully_redundant_baseline(request.layers, request.head_count())};
  destination.emit(format_results(models, format, false, false));
  detail::report_written(hooks, request.output, detail::count_text(models), started);
  return kExitOk;
}

int run_synth(const SynthRequest& request, const Hooks& hooks) {
  request.validate();
  const auto started = std::chrono::steady_clock::now();
  write_synthetic_checkpoint(request.options, request.output);
  detail::report_written(hooks, request.output,
                         "a " + request.options.family + " checkpoint of " +
                             detail::layers_text(static_cast<std::size_t>(request.options.layers)),
                         started);
  return kExitOk;
}

}  // namespace kvrank::app

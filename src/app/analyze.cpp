// `analyze` in the application layer (commands.hpp): every input resolved and labelled first,
// then analysed one after the other, each failure under --keep-going named and left out.
#include <algorithm>
#include <chrono>
#include <functional>
#include <new>
#include <optional>

#include "app/output.hpp"
#include "kvrank/analysis/analysis.hpp"
#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/app/commands.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/memory_limit.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/io/tensor.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/head_pairs.hpp"

namespace fs = std::filesystem;

namespace kvrank::app {
namespace {

/// With --keep-going, an input that fails is named through hooks.error and left out; otherwise
/// its error ends the run. Running out of memory on one input is such a failure too: the memory
/// it took is freed when its analysis unwinds, and the next input starts afresh.
class InputFailures {
 public:
  InputFailures(bool keep_going, const Hooks& hooks) : keep_going_(keep_going), hooks_(hooks) {}

  /// Runs `step`; true when it succeeded.
  template <typename Step>
  bool attempt(const std::string& input, Step&& step) {
    try {
      step();
      return true;
    } catch (const Error& error) {
      if (!keep_going_) throw;
      failed(error.what());
    } catch (const std::bad_alloc&) {
      if (!keep_going_) throw;
      failed(Error(input, out_of_memory_message()).what());
    }
    return false;
  }

  std::size_t count() const { return failed_; }

 private:
  void failed(const std::string& message) {
    detail::tell(hooks_.error, message);
    ++failed_;
  }

  bool keep_going_;
  const Hooks& hooks_;
  std::size_t failed_ = 0;
};

/// An input that resolved: what it names, and its place among the arguments — so that the
/// --label and --step given for that place stay its own when an earlier input failed.
struct Resolved {
  ModelInput input;
  std::size_t position = 0;
};

std::vector<Resolved> resolve_inputs(const AnalyzeRequest& request, InputFailures& failures) {
  std::vector<Resolved> resolved;
  for (std::size_t i = 0; i < request.inputs.size(); ++i) {
    failures.attempt(request.inputs[i], [&] {
      resolved.push_back({resolve_model_argument(request.inputs[i]), i});
    });
  }
  return resolved;
}

/// The labels of the resolved inputs, in order, all different (model_inputs.hpp).
std::vector<std::string> labels_of(const std::vector<Resolved>& resolved,
                                   const AnalyzeRequest& request, const Hooks& hooks) {
  std::vector<LabelChoice> choices;
  for (const Resolved& each : resolved) {
    const bool given = each.position < request.labels.size();
    choices.push_back({given ? request.labels[each.position] : each.input.label, given,
                       request.inputs[each.position]});
  }
  return unique_labels(choices, hooks.info);
}

}  // namespace

AnalyzeOptions analysis_options(const AnalyzeRequest& request, const Hooks& hooks) {
  AnalyzeOptions options;
  options.note = hooks.info;
  options.warning = hooks.warning;
  options.detail = hooks.debug;
  // Only the JSON result holds each head's own rank: a table or CSV spares its eigenproblems.
  options.head_ranks =
      request.output_format() == ResultFormat::json ? HeadRanks::computed : HeadRanks::skipped;
  options.reprs = request.reprs;
  options.attention = request.attention;
  options.layers = request.layers;
  options.shard = request.shard;
  options.layout = request.layout.overrides();
  options.open = request.layout.open_options();
  options.progress = hooks.layers_done;
  options.check_cancelled = hooks.check_cancelled;
  return options;
}

namespace {

void warn_about_zero_heads(const ModelReport& model, const Hooks& hooks) {
  for (const auto& layer : model.layers) {
    if (layer.zero_heads.empty()) continue;
    std::string heads;
    for (int head : layer.zero_heads) heads += (heads.empty() ? "" : ", ") + std::to_string(head);
    detail::tell(hooks.warning, model.label + ": layer " + std::to_string(layer.layer) +
                                    ": head(s) " + heads + " are all zero and were left out");
  }
}

void apply_threads(int threads, const Hooks& hooks) {
  const ThreadFit fit = apply_compute_threads(threads);
  if (!fit.reason.empty()) detail::tell(hooks.info, fit.reason);
  detail::tell(hooks.debug, "threads: " + std::to_string(fit.threads));
  detail::tell(hooks.debug, "products: " + compute_backend_description());
}

/// `kvrank analyze data/tiny/*` stops at the first file of the folder that is no checkpoint
/// (losses.json): the error says how to name only the folders, or to skip such files.
Error with_glob_hint(const Error& error, const fs::path& path, const AnalyzeRequest& request) {
  std::error_code failed;
  if (request.keep_going || request.inputs.size() < 2 || !fs::is_regular_file(path, failed))
    return error;
  const bool beside_folders =
      std::any_of(request.inputs.begin(), request.inputs.end(), [&](const std::string& input) {
        std::error_code ignored;
        return fs::is_directory(input, ignored);
      });
  if (!beside_folders) return error;
  const std::string folder = path.parent_path().empty() ? "." : path.parent_path().string();
  return Error("", std::string(error.what()) + " (to analyse only the folders of a glob, end it " +
                       "with a slash: " + excerpt(folder) + "/*/, or add --keep-going)");
}

/// Analyses the resolved inputs in order; the others' reports are kept when one fails.
std::vector<ModelReport> analyze_resolved(const std::vector<Resolved>& resolved,
                                          const std::vector<std::string>& labels,
                                          const AnalyzeRequest& request, const Hooks& hooks,
                                          InputFailures& failures) {
  AnalyzeOptions options = analysis_options(request, hooks);
  std::vector<ModelReport> models;
  for (std::size_t i = 0; i < resolved.size(); ++i) {
    if (hooks.model_started) hooks.model_started(i, resolved.size(), labels[i]);
    const std::size_t position = resolved[i].position;
    options.step =
        position < request.steps.size() ? std::optional(request.steps[position]) : std::nullopt;
    failures.attempt(resolved[i].input.argument, [&] {
      try {
        for (auto& model : analyze_checkpoint(resolved[i].input, labels[i], options)) {
          warn_about_zero_heads(model, hooks);
          if (position < request.runs.size()) model.run = request.runs[position];
          models.push_back(std::move(model));
        }
      } catch (const Error& error) {
        throw with_glob_hint(error, resolved[i].input.path, request);
      }
    });
  }
  return models;
}

/// --pairs: each layer's `pairs` most similar head pairs, and each head's nearest one, named.
void name_redundant_heads(std::vector<ModelReport>& models, int pairs) {
  for (auto& model : models)
    for (auto& layer : model.layers)
      kvrank::name_redundant_heads(layer, static_cast<std::size_t>(pairs));
}

/// analyze(), with `resolved_hook` called once every input is resolved, before any is read.
AnalyzeOutcome analyze_inputs(
    const AnalyzeRequest& request, const Hooks& hooks,
    const std::function<void(const std::vector<Resolved>&)>& resolved_hook) {
  request.validate();
  InputFailures failures(request.keep_going, hooks);
  // Every argument is resolved (and every label fixed) before any model is read.
  const std::vector<Resolved> resolved = resolve_inputs(request, failures);
  const std::vector<std::string> labels = labels_of(resolved, request, hooks);
  if (resolved_hook) resolved_hook(resolved);
  apply_threads(request.threads, hooks);
  AnalyzeOutcome outcome;
  outcome.models = analyze_resolved(resolved, labels, request, hooks, failures);
  if (request.pairs) name_redundant_heads(outcome.models, *request.pairs);
  outcome.failed_inputs = failures.count();
  if (outcome.failed_inputs == request.inputs.size())
    throw Error("", "no input could be analysed (each is named above)");
  if (request.with_baseline && !outcome.models.empty()) {
    const auto& first = outcome.models.front().geometry;
    outcome.models.push_back(fully_redundant_baseline(first.num_layers, first.heads));
  }
  return outcome;
}

}  // namespace

AnalyzeOutcome analyze(const AnalyzeRequest& request, const Hooks& hooks) {
  return analyze_inputs(request, hooks, nullptr);
}

TensorView memory_tensor(const std::string& name, const std::string& dtype,
                         const std::vector<std::int64_t>& shape) {
  TensorView view;
  view.name = name;
  view.file = kInMemory;
  view.shape = shape;
  const std::optional<DType> known = any_dtype_from_name(dtype);
  if (!known) throw Error(kInMemory, name, "unsupported dtype " + dtype);
  view.dtype = *known;
  if (!checked_byte_count(shape, view.dtype))
    throw Error(kInMemory, name, "shape " + view.shape_string() + " is too large");
  return view;
}

std::vector<ModelReport> analyze_in_memory(const AnalyzeRequest& request,
                                           std::vector<TensorView> tensors,
                                           const std::optional<std::string>& config_json,
                                           const Hooks& hooks) {
  request.validate();
  const std::string& name = request.inputs.front();
  const std::string label = request.labels.empty() ? name : request.labels.front();
  AnalyzeOptions options = analysis_options(request, hooks);
  if (!request.steps.empty()) options.step = request.steps.front();
  std::optional<nlohmann::json> config;
  if (config_json) config = nlohmann::json::parse(*config_json);  // the caller wrote it as JSON
  set_compute_threads(request.threads);
  const Checkpoint checkpoint =
      Checkpoint::from_memory(name, std::move(tensors), std::move(config));
  if (hooks.model_started) hooks.model_started(0, 1, label);
  std::vector<ModelReport> models = analyze_checkpoint(checkpoint, label, options);
  for (ModelReport& model : models) {
    warn_about_zero_heads(model, hooks);
    if (!request.runs.empty()) model.run = request.runs.front();
  }
  if (request.pairs) name_redundant_heads(models, *request.pairs);
  return models;
}

int run_analyze(const AnalyzeRequest& request, const Hooks& hooks) {
  const auto started = std::chrono::steady_clock::now();
  // -o is claimed once the inputs are known (a wrong -o fails before the analysis); it must not
  // be one of them.
  std::optional<detail::Destination> destination;
  const AnalyzeOutcome outcome =
      analyze_inputs(request, hooks, [&](const std::vector<Resolved>& resolved) {
        std::vector<fs::path> inputs;
        for (const Resolved& each : resolved) inputs.push_back(each.input.path);
        if (request.layout.map_file) inputs.emplace_back(*request.layout.map_file);
        destination.emplace(request.output, inputs);
      });
  destination->emit(
      format_results(outcome.models, request.output_format(), request.similarity, request.summary));
  if (std::chrono::steady_clock::now() - started >= std::chrono::seconds(1))
    if (const auto advice = generic_blas_kernels_advice()) detail::tell(hooks.info, *advice);
  detail::report_written(hooks, request.output, detail::count_text(outcome.models), started);
  if (outcome.failed_inputs == 0) return kExitOk;
  detail::tell(hooks.error, std::to_string(outcome.failed_inputs) + " of " +
                                std::to_string(request.inputs.size()) +
                                " inputs failed (named above); the results of the others were "
                                "written");
  return kExitSomeInputsFailed;
}

}  // namespace kvrank::app

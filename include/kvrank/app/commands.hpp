// The commands of kvrank as the application layer runs them: a validated request (requests.hpp)
// in, the result written (stdout or -o FILE, whole or not at all) and an exit code out. Every
// front end calls these; what it shows on its side (log lines, a progress bar) comes through
// Hooks. Usage errors and unreadable inputs are thrown as kvrank::Error (exit kExitInvalidInput).
//
// A front end that keeps results in memory (the Python module) calls the entries without the
// writing — analyze(), analyze_in_memory(), diff_text(), plot_svg(), check() … — which the run_*()
// functions call too, so both front ends draw and write the same bytes.
//
//   kvrank::app::Hooks hooks;
//   hooks.info = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
//   int code = kvrank::app::run_analyze(request, hooks);  // 0, or kExitSomeInputsFailed
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/analysis/analysis.hpp"
#include "kvrank/analysis/diff.hpp"
#include "kvrank/analysis/inspect.hpp"
#include "kvrank/app/requests.hpp"
#include "kvrank/io/tensor.hpp"
#include "kvrank/report/result_model.hpp"

namespace kvrank::app {

/// What a command tells its front end while it runs. Every member may be empty.
struct Hooks {
  std::function<void(const std::string& line)> info;     ///< notes, "wrote FILE: …"
  std::function<void(const std::string& line)> warning;  ///< e.g. all-zero heads left out
  std::function<void(const std::string& line)> debug;    ///< threads, products
  /// A one-line error that does not end the run: an input that failed under --keep-going, and
  /// the closing count of the failures.
  std::function<void(const std::string& line)> error;
  /// Model `index` (0-based) of `count`, labelled `label`, starts.
  std::function<void(std::size_t index, std::size_t count, const std::string& label)> model_started;
  /// `done` of the current model's `total` layers are analysed.
  std::function<void(int done, int total)> layers_done;
  /// Called before each layer; throws to stop (the Python module's Ctrl-C).
  std::function<void()> check_cancelled;
};

/// What analyze() measured: the reports of every model that could be read, in input order (the
/// baseline last), and how many inputs failed under --keep-going.
struct AnalyzeOutcome {
  std::vector<ModelReport> models;
  std::size_t failed_inputs = 0;
};

/// `analyze` without writing: validates, resolves every input and fixes every label first, then
/// analyses one input after the other. With keep_going an input that fails — to resolve, to read,
/// or for lack of memory — is reported through hooks.error and left out; the others keep their
/// own --label and --step. Throws kvrank::Error when an input fails without keep_going, or when
/// none could be analysed.
AnalyzeOutcome analyze(const AnalyzeRequest& request, const Hooks& hooks);

/// The library's analysis options for `request` (its selection, layout, and the hooks' notes,
/// progress and cancellation), for a front end that analyses a checkpoint of its own (a model in
/// memory) with analysis.hpp.
AnalyzeOptions analysis_options(const AnalyzeRequest& request, const Hooks& hooks);

/// `inspect` without writing: the report of each input, in order.
std::vector<InspectReport> inspect(const InspectRequest& request);

/// `diff` without writing: both models resolved and compared (analysis/diff.hpp).
DiffResult diff(const DiffRequest& request, const Hooks& hooks);

/// `plan` without writing: each input's conversion plan, in order (and with --write-checkpoint the
/// converted checkpoint written).
std::vector<PlanModel> plan(const PlanRequest& request, const Hooks& hooks);

/// "<in memory>": what stands for a model in memory in results and messages.
inline constexpr const char* kInMemory = "<in memory>";

/// The view of one tensor of a model in memory (file kInMemory), without its data: the caller
/// sets `bytes`, or `deferred` for data produced on first use. `dtype` is named as safetensors
/// names it ("F32", "BF16" …). Throws kvrank::Error naming the tensor for a dtype kvrank does not
/// read or a shape whose byte count overflows.
TensorView memory_tensor(const std::string& name, const std::string& dtype,
                         const std::vector<std::int64_t>& shape);

/// `analyze` of one model in memory (the Python module's state dicts): `tensors` viewed where
/// they lie (Checkpoint::from_memory), `config_json` (a JSON object's text, or none) playing
/// config.json. request.inputs holds the one name that stands for it in results and messages;
/// its --label (else that name), --step and run name the model. Throws kvrank::Error as analyze().
std::vector<ModelReport> analyze_in_memory(const AnalyzeRequest& request,
                                           std::vector<TensorView> tensors,
                                           const std::optional<std::string>& config_json,
                                           const Hooks& hooks);

/// The models of a result file, as check, plot and the Python module read them.
std::vector<ModelReport> read_results(const std::string& path);

/// `models` as analyze writes them in `format` (similarity: the JSON holds each layer's H×H
/// matrix; summary: the CSV/TSV holds one row per model and representation).
std::string format_results(const std::vector<ModelReport>& models, ResultFormat format,
                           bool similarity, bool summary);

/// Writes `content` to `path` whole or not at all (atomic_file.hpp).
void write_text(const std::string& path, const std::string& content);

/// `inspect`'s output as text: the JSON document with request.json, else the listing.
std::string inspect_text(const InspectRequest& request);

/// diff(), as text in request.output_format(), and with request.figure the head-similarity
/// heatmap written there (claimed before anything is read).
std::string diff_text(const DiffRequest& request, const Hooks& hooks);

/// plan(), as text in request.output_format().
std::string plan_text(const PlanRequest& request, const Hooks& hooks);

/// What `check` finds: the values changed beyond tolerance, and their table as the command line
/// prints it.
struct CheckOutcome {
  std::vector<Violation> violations;
  std::string table;
};

/// `check` of results in memory: `current` against `golden`, named in messages by
/// request.current and request.golden.
CheckOutcome check(const CheckRequest& request, const std::vector<ModelReport>& current,
                   const std::vector<ModelReport>& golden);

/// `plot`'s figure as SVG text: from request.panels when given (results in memory), else from
/// the result files request.inputs names.
std::string plot_svg(const PlotRequest& request);

/// Writes a figure's `svg` to `output` in the format its extension names (.svg, .png or .pdf, any
/// case; PNG and PDF through rsvg-convert, PNG at figure's dpi), whole or not at all.
void save_figure(const std::string& svg, const std::string& output, const FigureSettings& figure);

/// analyze(), then the result written to request.output in its format. Returns kExitOk, or
/// kExitSomeInputsFailed (after a line through hooks.error) when some inputs failed.
int run_analyze(const AnalyzeRequest& request, const Hooks& hooks);
/// The tensors and the detected layout of each input, as text or JSON on stdout.
int run_inspect(const InspectRequest& request, const Hooks& hooks);
/// kExitOk when the curves match the golden file, kExitRegression otherwise.
int run_check(const CheckRequest& request, const Hooks& hooks);
int run_plot(const PlotRequest& request, const Hooks& hooks);
int run_merge(const MergeRequest& request, const Hooks& hooks);
int run_baseline(const BaselineRequest& request, const Hooks& hooks);
int run_synth(const SynthRequest& request, const Hooks& hooks);
/// plan(), then the plans written to request.output in its format.
int run_plan(const PlanRequest& request, const Hooks& hooks);
/// diff(), then the comparison written to request.output (and --figure drawn).
int run_diff(const DiffRequest& request, const Hooks& hooks);

}  // namespace kvrank::app

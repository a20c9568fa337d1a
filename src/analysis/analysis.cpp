// `kvrank analyze` as a library call: open → detect layout → per layer, per representation:
// factors → metrics → release the layer's pages. Prints nothing; notes and progress go to
// callbacks.
#include "kvrank/analysis/analysis.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "kvrank/report/merge.hpp"

namespace kvrank {
namespace {

// The fully-redundant baseline holds per-head values for every layer, and its H×H eigenproblem
// costs H³: bounded so that `baseline` answers in about a second and a few hundred MB at most.
constexpr int kMaxBaselineHeads = 1024;
constexpr std::int64_t kMaxBaselineValues = std::int64_t{1} << 22;  // layers × heads

/// Each representation once: `--repr qk,qk` would emit the same series twice under one label.
void check_distinct(const std::vector<Repr>& reprs) {
  for (std::size_t i = 0; i < reprs.size(); ++i) {
    if (std::find(reprs.begin(), reprs.begin() + static_cast<std::ptrdiff_t>(i), reprs[i]) !=
        reprs.begin() + static_cast<std::ptrdiff_t>(i))
      throw Error("", "--repr lists " + std::string(repr_name(reprs[i])) +
                          " more than once (give each representation once)");
  }
}

/// The representations to analyse: the requested ones, or qk (k,v for K/V-only inputs).
std::vector<Repr> choose_reprs(const ModelLayout& layout, const std::filesystem::path& path,
                               const AnalyzeOptions& options) {
  if (!options.reprs.empty()) return options.reprs;
  if (layout.has_queries) return {Repr::qk};
  if (options.note)
    options.note(path.string() + " holds only key/value projections: analysing k and v");
  return {Repr::k, Repr::v};
}

std::vector<int> select_layers(const ModelLayout& layout, const std::filesystem::path& path,
                               const AnalyzeOptions& options) {
  if (!options.layers) return attention_layer_list(layout);  // a hybrid's attention layers
  std::vector<int> layers;
  for (int layer : *options.layers) {
    if (layer < 0 || layer >= layout.num_layers)
      throw Error(path.string(), "--layers: layer " + std::to_string(layer) +
                                     " out of range (the model has " +
                                     std::to_string(layout.num_layers) + " layers, 0-" +
                                     std::to_string(layout.num_layers - 1) + ")");
    if (!has_attention(layout, layer))
      throw Error(path.string(), "--layers: layer " + std::to_string(layer) +
                                     " has no attention heads (the model's attention layers: " +
                                     format_layer_list(layout.attention_layers) + ")");
    layers.push_back(layer);
  }
  return layers;
}

std::vector<int> choose_layers(const ModelLayout& layout, const std::filesystem::path& path,
                               const AnalyzeOptions& options) {
  std::vector<int> layers = select_layers(layout, path, options);
  return options.shard ? shard_layers(layers, *options.shard) : layers;
}

std::optional<std::string> text_or_none(const std::string& text) {
  return text.empty() ? std::nullopt : std::optional<std::string>(text);
}

/// The attention tensors of `layer` that `checkpoint` holds (layer_tensor_names, layout.hpp).
std::vector<const TensorView*> layer_tensors(const Checkpoint& checkpoint,
                                             const ModelLayout& layout, int layer) {
  std::vector<const TensorView*> tensors;
  for (const std::string& name : layer_tensor_names(layout, layer))
    if (const TensorView* tensor = checkpoint.find(name)) tensors.push_back(tensor);
  return tensors;
}

/// The element types of the attention weights of `layer`, sorted: "BF16", or "F16,F32" when mixed.
/// Read from the first attention layer whatever was selected, so that every part of a sharded run
/// agrees.
std::optional<std::string> weight_dtypes(const Checkpoint& checkpoint, const ModelLayout& layout) {
  if (layout.num_layers < 1) return std::nullopt;
  const int layer = attention_layer_list(layout).front();
  std::set<std::string_view> names;
  for (const TensorView* tensor : layer_tensors(checkpoint, layout, layer))
    names.insert(dtype_name(tensor->dtype));
  std::string text;
  for (std::string_view name : names) text += (text.empty() ? "" : ",") + std::string(name);
  return text_or_none(text);
}

/// How the gains of a dense layout are read ("weight", or Gemma's "1+weight"), when
/// `folded(tensors)` says it folds some; empty otherwise.
template <typename Folded>
std::optional<std::string> gain_rule(const ModelLayout& layout, Folded folded) {
  const auto* dense = std::get_if<DenseTensors>(&layout.tensors);
  if (!dense || !folded(*dense)) return std::nullopt;
  return dense->norm_gain == NormGain::one_plus_weight ? "1+weight" : "weight";
}

Provenance provenance(const ModelInput& input, const Checkpoint& checkpoint,
                      const ModelLayout& layout, const AnalyzeOptions& options) {
  Provenance source;
  source.input = input.argument.empty() ? input.path.string() : input.argument;
  source.hf_repo = text_or_none(input.hf_repo);
  source.hf_revision = text_or_none(input.hf_revision);
  source.dtype = weight_dtypes(checkpoint, layout);
  if (options.layers) source.layers = format_layer_list(*options.layers);
  if (options.layout.map_file) source.map = options.layout.map_file->string();
  source.qk_norm_gain =
      gain_rule(layout, [](const DenseTensors& dense) { return dense.q_norm || dense.k_norm; });
  source.input_norm_gain =
      gain_rule(layout, [](const DenseTensors& dense) { return dense.input_norm.has_value(); });
  return source;
}

/// Whether the checkpoint's tensors are named like captured activations ("….{i}.k": a layer
/// index, then the role), which the weight readers do not look for.
bool named_like_activations(const Checkpoint& checkpoint) {
  for (const TensorView& tensor : checkpoint.tensors()) {
    const std::string& name = tensor.name;
    if (!name.ends_with(".k") && !name.ends_with(".q") && !name.ends_with(".v")) continue;
    const std::size_t end = name.size() - 2;
    std::size_t begin = end;
    while (begin > 0 && name[begin - 1] >= '0' && name[begin - 1] <= '9') --begin;
    if (begin < end && (begin == 0 || name[begin - 1] == '.')) return true;
  }
  return false;
}

/// detect_series, with the hint a capture of activations read as weights needs.
std::vector<ModelLayout> detect_series_or_advise(const Checkpoint& checkpoint,
                                                 const LayoutOverrides& overrides) {
  try {
    return detect_series(checkpoint, overrides);
  } catch (const Error& error) {
    if (overrides.activations || !named_like_activations(checkpoint)) throw;
    throw Error(error.file(), error.tensor(),
                error.detail() +
                    " (its tensors are named like captured activations, layers.{i}.k: if they "
                    "are, add --activations)");
  }
}

ModelReport empty_report(const std::filesystem::path& path, const std::string& label,
                         std::optional<std::int64_t> step, const ModelLayout& layout, Repr repr) {
  ModelReport report;
  report.label = label;
  report.path = path.string();
  report.step = step;
  report.family = family_name(layout.family);
  report.model_type = layout.model_type;
  report.variant = variant_name(layout.variant);
  report.geometry = layout;  // the layout's ModelGeometry part
  report.repr = std::string(repr_name(repr));
  report.attention = layout.attention;
  report.attention_layers = layout.attention_layers;
  return report;
}

/// How many weights `tensors` hold: what decides a layer's threads (LayerThreads).
std::int64_t weight_elements(const std::vector<const TensorView*>& tensors) {
  std::int64_t elements = 0;
  for (const TensorView* tensor : tensors) elements += tensor->numel();
  return elements;
}

/// The series `options.attention` chooses: an error when there is none (cross on a decoder-only
/// model, or on an encoder-only one).
std::vector<ModelLayout> choose_series(std::vector<ModelLayout> series,
                                       const std::filesystem::path& path,
                                       const AnalyzeOptions& options) {
  std::vector<ModelLayout> chosen;
  std::string present;
  for (ModelLayout& layout : series) {
    present += (present.empty() ? "" : ", ") +
               (layout.attention ? series_text(*layout.attention) : std::string("self"));
    if (attention_chosen(options.attention, layout.attention)) chosen.push_back(std::move(layout));
  }
  if (chosen.empty())
    throw Error(path.string(), "--attention " +
                                   std::string(attention_choice_name(options.attention)) +
                                   ": the model has no such attention (it has " + present + ")");
  return chosen;
}

/// The label of one series: a model of several series names each (whatever --attention chose,
/// so that a series keeps its label from run to run).
std::string series_label(const std::string& label, const ModelLayout& layout, bool several) {
  if (!several || !layout.attention) return label;
  return label + " [" + series_text(*layout.attention) + "]";
}

/// The query Gram of `layout` (heads · head_dim rows over d_model; MLA's q_lora_rank rows of q_a),
/// and whether its values are bfloat16s: a dense family's BF16 weights (read without scaling), and
/// MLA's BF16 q_a where its gain stays beside the rows (Bases::stored_bf16: kvrank's own kernel).
/// LRKV's bases are products, float32.
struct QueryGram {
  Index rows = 0, cols = 0;
  bool bf16_values = false;
};
QueryGram query_gram(const Checkpoint& checkpoint, const ModelLayout& layout) {
  const bool bf16 = weight_dtypes(checkpoint, layout) == std::optional<std::string>("BF16");
  const auto* mla = std::get_if<MlaTensors>(&layout.tensors);
  if (mla && mla->q_lora_rank > 0)
    return {mla->q_lora_rank, layout.d_model, bf16 && bf16_grams_on_own_kernel()};
  return {Index{layout.heads} * layout.head_dim, layout.d_model,
          bf16 && std::holds_alternative<DenseTensors>(layout.tensors)};
}

/// compile_gram_kernels_aside for `layout`'s query Gram; -v says which kernel forms its Grams.
std::jthread compile_gram_kernels_for(const Checkpoint& checkpoint, const ModelLayout& layout,
                                      const AnalyzeOptions& options) {
  if (layout.num_layers < 1) return {};
  const QueryGram gram = query_gram(checkpoint, layout);
  if (options.detail)
    options.detail(checkpoint.path().string() + ": " +
                   weight_dtypes(checkpoint, layout).value_or("no") +
                   " weights: " + gram_kernel_description(gram.rows, gram.cols, gram.bf16_values));
  // The latent families' contraction runs float32 products whatever forms their Grams (its M_h
  // products on oneDNN even where the rest stays on the BLAS): oneDNN's are compiled aside for
  // them.
  const bool dense = std::holds_alternative<DenseTensors>(layout.tensors);
  return compile_gram_kernels_aside(gram.rows, gram.cols, gram.bf16_values && dense, !dense);
}

/// analyze_checkpoint on an open checkpoint; `input` names it in the reports' provenance, and
/// `step` is the training step they record.
std::vector<ModelReport> analyze_opened(const Checkpoint& checkpoint, const ModelInput& input,
                                        std::optional<std::int64_t> step, const std::string& label,
                                        const AnalyzeOptions& options) {
  const std::filesystem::path& path = input.path;
  std::vector<ModelLayout> all_series = detect_series_or_advise(checkpoint, options.layout);
  if (const std::string warning = unknown_model_type_warning(all_series.front(), options.layout);
      !warning.empty()) {
    const auto& warn = options.warning ? options.warning : options.note;
    if (warn) warn(path.string() + ": " + warning);
    if (options.detail) options.detail(layout_reading_detail(all_series.front()));
  }
  const bool several = all_series.size() > 1;
  const std::vector<ModelLayout> series = choose_series(std::move(all_series), path, options);
  // oneDNN compiles its kernels in the first Gram of a process: a spare thread does that while the
  // first layer is read. Joined when this returns.
  const std::jthread kernels = series.empty()
                                   ? std::jthread()
                                   : compile_gram_kernels_for(checkpoint, series.front(), options);

  struct Run {
    const ModelLayout* layout;
    std::vector<Repr> reprs;
    std::vector<int> layers;
    std::size_t first_report;
  };
  std::vector<Run> runs;
  std::vector<ModelReport> reports;
  int total = 0;
  for (const ModelLayout& layout : series) {
    Run run{&layout, choose_reprs(layout, path, options), choose_layers(layout, path, options),
            reports.size()};
    const Provenance source = provenance(input, checkpoint, layout, options);
    for (Repr repr : run.reprs) {
      reports.push_back(
          empty_report(path, series_label(label, layout, several), step, layout, repr));
      reports.back().source = source;
    }
    total += static_cast<int>(run.layers.size());
    runs.push_back(std::move(run));
  }
  int done = 0;
  // One workspace per representation: its shapes repeat from layer to layer, so its buffers do.
  std::vector<ComputeWorkspace> workspaces;
  // bf16 weights stay in the checkpoint where kvrank's own bf16 kernel reads them (no float32
  // copy); elsewhere every path wants the copy, so the reader makes it.
  const Bases bases = bf16_grams_on_own_kernel() ? Bases::stored_bf16 : Bases::float32;
  for (const Run& run : runs) {
    workspaces.resize(std::max(workspaces.size(), run.reprs.size()));
    for (int layer : run.layers) {
      if (options.check_cancelled) options.check_cancelled();
      const std::vector<const TensorView*> tensors = layer_tensors(checkpoint, *run.layout, layer);
      const LayerThreads threads(weight_elements(tensors));
      // Layer-major: each layer's tensors are read once for all representations, then released.
      for (std::size_t r = 0; r < run.reprs.size(); ++r) {
        LayerMetrics metrics =
            analyze_layer(layer_factors(checkpoint, *run.layout, layer, run.reprs[r], bases),
                          workspaces[r], Contraction::automatic, options.head_ranks);
        metrics.layer = layer;
        reports[run.first_report + r].layers.push_back(std::move(metrics));
      }
      release_layer(checkpoint, *run.layout, layer);
      if (options.progress) options.progress(++done, total);
    }
  }
  for (ModelReport& report : reports) report.summary = summarize(report.layers);
  // Said once the numbers exist, so that an error in a later layer stays the run's one line.
  if (const std::string gains = folded_gains(series.front()); !gains.empty() && options.note)
    options.note(path.string() + ": folded " + gains + " into the projections (docs/metric.md)");
  return reports;
}

}  // namespace

std::vector<ModelReport> analyze_checkpoint(const ModelInput& input, const std::string& label,
                                            const AnalyzeOptions& options) {
  check_distinct(options.reprs);  // before the checkpoint is opened: a usage error comes first
  const std::optional<std::int64_t> step =
      options.step ? options.step : checkpoint_step(input.path);
  return analyze_opened(Checkpoint::open(input.path, options.open), input, step, label, options);
}

std::vector<ModelReport> analyze_checkpoint(const std::filesystem::path& path,
                                            const std::string& label,
                                            const AnalyzeOptions& options) {
  return analyze_checkpoint(ModelInput{path, label, path.string(), {}, {}}, label, options);
}

std::vector<ModelReport> analyze_checkpoint(const Checkpoint& checkpoint, const std::string& label,
                                            const AnalyzeOptions& options) {
  check_distinct(options.reprs);
  // A model in memory has no folder to find its step in: only options.step names it.
  const ModelInput input{checkpoint.path(), label, checkpoint.path().string(), {}, {}};
  return analyze_opened(checkpoint, input, options.step, label, options);
}

ModelReport fully_redundant_baseline(int num_layers, int heads) {
  if (heads < 1 || num_layers < 0)
    throw Error("",
                "the fully-redundant baseline needs at least 1 head and 0 or more layers, "
                "found " +
                    std::to_string(heads) + " heads and " + std::to_string(num_layers) + " layers");
  if (heads > kMaxBaselineHeads || num_layers > kMaxLayers ||
      std::int64_t{heads} * num_layers > kMaxBaselineValues)
    throw Error("",
                "the fully-redundant baseline is limited to " + std::to_string(kMaxBaselineHeads) +
                    " heads, " + std::to_string(kMaxLayers) + " layers and " +
                    std::to_string(kMaxBaselineValues) + " layers × heads, found " +
                    std::to_string(heads) + " heads and " + std::to_string(num_layers) + " layers");
  ModelReport report;
  report.label = "Fully redundant";
  report.family = kBaseline;
  report.variant = kBaseline;
  report.geometry.heads = heads;
  report.geometry.kv_heads = heads;
  report.geometry.num_layers = num_layers;
  // All heads identical: S = 11ᵀ. The metrics come from the same code as any measured layer, so
  // the baseline cannot drift from what a truly redundant model would give.
  const LayerMetrics redundant = similarity_metrics(MatrixD::Ones(heads, heads));
  for (int layer = 0; layer < num_layers; ++layer) {
    report.layers.push_back(redundant);
    report.layers.back().layer = layer;
  }
  report.summary = summarize(report.layers);
  return report;
}

}  // namespace kvrank

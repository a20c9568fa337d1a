// `kvrank analyze` as a library call: open → detect layout → per layer, per representation:
// factors → metrics → release the layer's pages. Prints nothing; notes and progress go to
// callbacks.
#include "kvrank/analysis/analysis.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <set>

#include "kvrank/base/error.hpp"
#include "kvrank/io/checkpoint.hpp"

namespace kvrank {
namespace {

// The fully-redundant baseline holds per-head values for every layer, and its H×H eigenproblem
// costs H³: bounded so that `baseline` answers in about a second and a few hundred MB at most.
constexpr int kMaxBaselineHeads = 1024;
constexpr std::int64_t kMaxBaselineValues = std::int64_t{1} << 22;  // layers × heads

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

int parse_layer_index(std::string_view text, std::string_view part) {
  text = trim(text);
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
    throw Error("", "--layers: expected a layer index or a range like 0-11, found \"" +
                        std::string(part) + "\"");
  if (value >= kMaxLayers)
    throw Error("", "--layers: layer index " + std::string(trim(text)) +
                        " is too large (kvrank reads at most " + std::to_string(kMaxLayers) +
                        " layers)");
  return value;
}

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
  std::vector<int> layers;
  if (!options.layers) {
    for (int layer = 0; layer < layout.num_layers; ++layer) layers.push_back(layer);
    return layers;
  }
  for (int layer : *options.layers) {
    if (layer < 0 || layer >= layout.num_layers)
      throw Error(path.string(), "--layers: layer " + std::to_string(layer) +
                                     " out of range (the model has " +
                                     std::to_string(layout.num_layers) + " layers, 0-" +
                                     std::to_string(layout.num_layers - 1) + ")");
    layers.push_back(layer);
  }
  return layers;
}

std::vector<int> choose_layers(const ModelLayout& layout, const std::filesystem::path& path,
                               const AnalyzeOptions& options) {
  std::vector<int> layers = select_layers(layout, path, options);
  return options.shard ? shard_layers(layers, *options.shard) : layers;
}

[[noreturn]] void bad_layer_shard(std::string_view text) {
  throw Error("", "--layer-shard: expected I/N with 0 <= I < N (e.g. 0/4), found \"" +
                      std::string(text) + "\"");
}

int parse_shard_number(std::string_view text, std::string_view whole) {
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 0)
    bad_layer_shard(whole);
  return value;
}

ModelReport empty_report(const std::filesystem::path& path, const std::string& label,
                         const ModelLayout& layout, Repr repr) {
  ModelReport report;
  report.label = label;
  report.path = path.string();
  report.family = family_name(layout.family);
  report.variant = variant_name(layout.variant);
  report.heads = layout.heads;
  report.kv_heads = layout.kv_heads;
  report.head_dim = layout.head_dim;
  report.d_model = layout.d_model;
  report.num_layers = layout.num_layers;
  report.lrkv_rank = layout.lrkv_rank;
  report.mla_kv_lora_rank = layout.mla_kv_lora_rank;
  report.repr = std::string(repr_name(repr));
  return report;
}

void release_layer(const Checkpoint& checkpoint, const ModelLayout& layout, int layer) {
  for (const std::string& name : layer_tensor_names(layout, layer))
    if (const TensorView* tensor = checkpoint.find(name)) checkpoint.release(*tensor);
}

}  // namespace

Summary summarize(const std::vector<LayerMetrics>& layers) {
  Summary summary;
  if (layers.empty()) return summary;
  for (const LayerMetrics& layer : layers) {
    summary.erank_mean += layer.erank;
    summary.erank_centered_mean += layer.erank_centered;
    summary.erank_pct_mean += layer.erank_pct;
    summary.erank_centered_pct_mean += layer.erank_centered_pct;
  }
  const double count = static_cast<double>(layers.size());
  summary.erank_mean /= count;
  summary.erank_centered_mean /= count;
  summary.erank_pct_mean /= count;
  summary.erank_centered_pct_mean /= count;
  return summary;
}

std::vector<int> parse_layer_list(std::string_view text) {
  std::set<int> layers;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view part = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (trim(part).empty())
      throw Error("",
                  "--layers: empty entry in \"" + std::string(text) + "\" (expected e.g. 0-11,20)");
    const std::size_t dash = part.find('-');
    if (dash == std::string_view::npos) {
      layers.insert(parse_layer_index(part, part));
    } else {
      const int first = parse_layer_index(part.substr(0, dash), part);
      const int last = parse_layer_index(part.substr(dash + 1), part);
      if (first > last)
        throw Error("", "--layers: range \"" + std::string(trim(part)) +
                            "\" runs backwards (expected first ≤ last)");
      for (int layer = first; layer <= last; ++layer) layers.insert(layer);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return {layers.begin(), layers.end()};
}

LayerShard parse_layer_shard(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) bad_layer_shard(text);
  const LayerShard shard{parse_shard_number(text.substr(0, slash), text),
                         parse_shard_number(text.substr(slash + 1), text)};
  if (shard.index >= shard.count) bad_layer_shard(text);
  return shard;
}

std::vector<int> shard_layers(const std::vector<int>& layers, LayerShard shard) {
  if (shard.index < 0 || shard.index >= shard.count)
    bad_layer_shard(std::to_string(shard.index) + "/" + std::to_string(shard.count));
  const std::size_t count = static_cast<std::size_t>(shard.count);
  const std::size_t index = static_cast<std::size_t>(shard.index);
  const std::size_t base = layers.size() / count;
  const std::size_t larger = layers.size() % count;  // the first `larger` shards get one more
  const std::size_t begin = index * base + std::min(index, larger);
  const std::size_t size = base + (index < larger ? 1 : 0);
  return {layers.begin() + static_cast<std::ptrdiff_t>(begin),
          layers.begin() + static_cast<std::ptrdiff_t>(begin + size)};
}

std::vector<ModelReport> analyze_checkpoint(const std::filesystem::path& path,
                                            const std::string& label,
                                            const AnalyzeOptions& options) {
  check_distinct(options.reprs);
  return analyze_checkpoint(Checkpoint::open(path, options.open), label, options);
}

std::vector<ModelReport> analyze_checkpoint(const Checkpoint& checkpoint, const std::string& label,
                                            const AnalyzeOptions& options) {
  check_distinct(options.reprs);
  const std::filesystem::path& path = checkpoint.path();
  const ModelLayout layout = detect_layout(checkpoint, options.layout);
  const std::vector<Repr> reprs = choose_reprs(layout, path, options);
  const std::vector<int> layers = choose_layers(layout, path, options);

  std::vector<ModelReport> reports;
  for (Repr repr : reprs) reports.push_back(empty_report(path, label, layout, repr));
  const int total = static_cast<int>(layers.size());
  for (int done = 0; done < total; ++done) {
    if (options.check_cancelled) options.check_cancelled();
    const int layer = layers[static_cast<std::size_t>(done)];
    // Layer-major: each layer's tensors are read once for all representations, then released.
    for (std::size_t r = 0; r < reprs.size(); ++r) {
      LayerMetrics metrics = analyze_layer(layer_factors(checkpoint, layout, layer, reprs[r]));
      metrics.layer = layer;
      reports[r].layers.push_back(std::move(metrics));
    }
    release_layer(checkpoint, layout, layer);
    if (options.progress) options.progress(done + 1, total);
  }
  for (ModelReport& report : reports) report.summary = summarize(report.layers);
  return reports;
}

std::vector<ModelReport> analyze_models(
    const std::vector<ModelInput>& inputs, AnalyzeOptions options, bool with_baseline,
    const std::function<void(const std::string& label, int done, int total)>& progress) {
  std::vector<ModelReport> models;
  for (const ModelInput& input : inputs) {
    if (progress)
      options.progress = [&](int done, int total) { progress(input.label, done, total); };
    for (ModelReport& model : analyze_checkpoint(input.path, input.label, options))
      models.push_back(std::move(model));
  }
  if (with_baseline && !models.empty())
    models.push_back(fully_redundant_baseline(models.front().num_layers, models.front().heads));
  return models;
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
  report.heads = heads;
  report.kv_heads = heads;
  report.num_layers = num_layers;
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

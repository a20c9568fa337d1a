// `kvrank analyze` as a library call: checkpoints in, per-layer metrics out (one ModelReport per
// model and representation). Streams one layer at a time; prints nothing.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/layout/families.hpp"
#include "kvrank/metric/diversity.hpp"
#include "kvrank/report/results.hpp"

namespace kvrank {

/// Means over the layers of a report.
Summary summarize(const std::vector<LayerMetrics>& layers);

/// Parses "0-11,20" into sorted unique layer indices; throws kvrank::Error on bad syntax.
std::vector<int> parse_layer_list(std::string_view text);

/// `--layer-shard I/N`: the I-th (0-based) of N contiguous, near-equal slices of the selected
/// layers, so that N jobs together analyse each layer once. Slices may be empty (N > layers).
struct LayerShard {
  int index = 0;
  int count = 1;
};

/// Parses "I/N" (0 ≤ I < N); throws kvrank::Error on bad syntax.
LayerShard parse_layer_shard(std::string_view text);

/// The layers of `shard`: the first (size % N) slices hold one layer more than the others.
std::vector<int> shard_layers(const std::vector<int>& layers, LayerShard shard);

struct AnalyzeOptions {
  std::vector<Repr> reprs;                 ///< empty: qk (or k,v for K/V-only inputs)
  std::optional<std::vector<int>> layers;  ///< empty: all; an index ≥ num_layers is an error
  std::optional<LayerShard> shard;         ///< applied to the selected layers
  LayoutOverrides layout;
  OpenOptions open;
  /// Called after each layer: (layer position, layer count). May be empty.
  std::function<void(int done, int total)> progress;
  /// Called with human-readable notes for stderr (e.g. "K/V only: analysing k and v"). May be
  /// empty.
  std::function<void(const std::string& message)> note;
  /// Called before each layer; it throws to stop the analysis there (the Python module raises
  /// KeyboardInterrupt from it after Ctrl-C). Nothing is left half-done: results are returned
  /// whole or not at all. May be empty.
  std::function<void()> check_cancelled;
};

/// Analyses one checkpoint; returns one report per representation. `label` is the model's label
/// (model_inputs.hpp makes the default ones).
std::vector<ModelReport> analyze_checkpoint(const std::filesystem::path& path,
                                            const std::string& label,
                                            const AnalyzeOptions& options);

/// The same on a checkpoint already open (Checkpoint::from_memory: a model in memory).
std::vector<ModelReport> analyze_checkpoint(const Checkpoint& checkpoint, const std::string& label,
                                            const AnalyzeOptions& options);

/// `kvrank analyze` on several models (model_inputs.hpp resolves them): analyze_checkpoint on each
/// in order, then, `with_baseline`, the fully-redundant series of the first model's geometry.
/// `progress` (may be empty) is told each model's label with its layers done and total.
std::vector<ModelReport> analyze_models(
    const std::vector<ModelInput>& inputs, AnalyzeOptions options, bool with_baseline,
    const std::function<void(const std::string& label, int done, int total)>& progress);

/// The fully-redundant series (1.0 at every layer), label "Fully redundant", variant "baseline".
ModelReport fully_redundant_baseline(int num_layers, int heads);

}  // namespace kvrank

// `kvrank analyze` as a library call: checkpoints in, per-layer metrics out (one ModelReport per
// model and representation). Streams one layer at a time; prints nothing.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/metric/diversity.hpp"
#include "kvrank/report/result_model.hpp"

namespace kvrank {

struct AnalyzeOptions {
  std::vector<Repr> reprs;                 ///< empty: qk (or k,v for K/V-only inputs)
  std::optional<std::vector<int>> layers;  ///< empty: all; an index ≥ num_layers is an error
  std::optional<LayerShard> shard;         ///< applied to the selected layers
  LayoutOverrides layout;
  /// `--attention`: which series of an encoder or encoder-decoder (layout.hpp); all by default. A
  /// model with no series of the kind chosen is an error (cross on a decoder-only model).
  AttentionChoice attention = AttentionChoice::all;
  OpenOptions open;
  /// Whether each head's own effective rank is computed (diversity.hpp): the JSON result holds
  /// it; a caller that writes only tables or CSV skips it, and LayerMetrics::head_erank is empty.
  HeadRanks head_ranks = HeadRanks::computed;
  /// The training step recorded in every report (`--step`); empty: checkpoint_step(path).
  std::optional<std::int64_t> step;
  /// Called after each layer: (layer position, layer count). May be empty.
  std::function<void(int done, int total)> progress;
  /// Called with human-readable notes for stderr (e.g. "K/V only: analysing k and v"). May be
  /// empty.
  std::function<void(const std::string& message)> note;
  /// Called with warnings for stderr that -q keeps (a model type read by another type's reader);
  /// empty: they go to `note`.
  std::function<void(const std::string& message)> warning;
  /// Called with the detail behind a warning (for -v). May be empty.
  std::function<void(const std::string& message)> detail;
  /// Called before each layer; it throws to stop the analysis there (the Python module raises
  /// KeyboardInterrupt from it after Ctrl-C). Nothing is left half-done: results are returned
  /// whole or not at all. May be empty.
  std::function<void()> check_cancelled;
};

/// The training step of the checkpoint at `path`: the number in its folder's name
/// (checkpoint-N, step-N, global_step_N, global_stepN; report/training_run.hpp), else the
/// `global_step` of a trainer_state.json (Hugging Face Trainer) in that folder, else nullopt.
/// Throws kvrank::Error naming a trainer_state.json that is not JSON or whose global_step is not
/// a non-negative integer.
std::optional<std::int64_t> checkpoint_step(const std::filesystem::path& path);

/// Analyses one checkpoint; returns one report per attention series chosen and representation
/// (series-major). A model with several series (t5, whisper, clip …) labels each "LABEL [decoder
/// cross]", whichever are chosen; a model with one keeps `label`. `label` is the model's label
/// (model_inputs.hpp makes the default ones). The reports' provenance names `input` as the user
/// gave it (and the hub cache's repo and revision when it came from there).
std::vector<ModelReport> analyze_checkpoint(const ModelInput& input, const std::string& label,
                                            const AnalyzeOptions& options);
/// The same for a path given as it is.
std::vector<ModelReport> analyze_checkpoint(const std::filesystem::path& path,
                                            const std::string& label,
                                            const AnalyzeOptions& options);

/// The same on a checkpoint already open (Checkpoint::from_memory: a model in memory).
std::vector<ModelReport> analyze_checkpoint(const Checkpoint& checkpoint, const std::string& label,
                                            const AnalyzeOptions& options);

/// The fully-redundant series (1.0 at every layer), label "Fully redundant", variant "baseline".
ModelReport fully_redundant_baseline(int num_layers, int heads);

}  // namespace kvrank

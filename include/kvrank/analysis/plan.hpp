// `kvrank plan`: a conversion plan from a checkpoint alone — which KV heads to merge into each of
// G groups (MHA/GQA → GQA with G KV heads), how well the conversion (by default the refit, else an
// aligned mean-pool of each group) keeps the keys, values and attention forms, and the latent rank
// an MLA conversion would need (docs/plan.md has the definitions).
//
// Everything is computed from d_h × d_h cross-Grams of the heads' projections (K_i K_jᵀ, V_i V_jᵀ,
// Q_h Q_h'ᵀ, O_hᵀ O_h), the blocks of the basis Grams of diversity.hpp: never a d × d matrix.
//
//   PlanOptions options;
//   options.kv_heads_after = 4;
//   PlanModel plan = plan_checkpoint(Checkpoint::open("data/tiny/mha"), {}, options);
//   plan.layers[0].groups;  // e.g. {{0, 5}, {1, 2}, {3, 7}, {4, 6}}
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrank/base/eigen.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"

namespace kvrank {

/// How a model applies RoPE to a head's d_h entries (its rotary planes):
///   rotate_half: planes (f, f + r/2) for f < r/2 (Hugging Face llama and most others);
///   interleaved: planes (2f, 2f + 1) (Llama 4, Cohere, GLM, the original RoFormer);
///   none: no rotary embedding (learned or no positions, ALiBi, relative biases).
/// r, the rotary dimensions, is d_h or a part of it (partial rotary); the other entries are free.
enum class RopeConvention { none, rotate_half, interleaved };
std::string_view rope_convention_name(RopeConvention convention) noexcept;
/// Parses "none", "rotate_half", "interleaved"; throws kvrank::Error (usage) otherwise.
RopeConvention parse_rope_convention(std::string_view name);
/// The conventions' names, in the enum's order (--rope's choices).
std::vector<std::string> rope_convention_names();

/// The convention plan assumes for a model type (config.json's model_type), from its table in
/// plan_rope.cpp; nullopt when it assumes none.
std::optional<RopeConvention> model_type_rope(std::string_view model_type);
/// Why plan assumes no convention for a model type kvrank reads ("ALiBi or RoPE, by its config"):
/// such a model needs --rope (or --gauge none). Empty for the others. Every model type of
/// model_types() has a convention or a reason (a test holds the two tables together).
std::string_view unplanned_reason(std::string_view model_type);

struct RopeLayout {
  RopeConvention convention = RopeConvention::none;
  int rotary_dims = 0;  ///< entries of a head that RoPE rotates (the first ones), even
};

/// The RoPE of a model: `given` (--rope) or its model type's convention (a table in
/// plan_rope.cpp), and config.json's partial_rotary_factor / rotary_pct. Throws kvrank::Error
/// naming the model type when kvrank does not know its convention.
RopeLayout model_rope(const Checkpoint& checkpoint, const ModelLayout& layout,
                      std::optional<RopeConvention> given);

/// The transformations applied to a head before merging (the gauge: those leaving the model
/// unchanged). Values: any orthogonal R. Keys: one rotation per RoPE plane (and any orthogonal map
/// on the entries RoPE leaves alone), or any orthogonal R without RoPE. `none`: no alignment.
struct KeyGauge {
  enum class Kind { none, orthogonal, rope_planes } kind = Kind::orthogonal;
  std::vector<std::pair<int, int>> planes;  ///< rope_planes: the rotated entry pairs
  std::vector<int> free_entries;            ///< rope_planes: entries with any orthogonal map
};
KeyGauge key_gauge(const RopeLayout& rope, int head_dim, bool align);
/// "orthogonal", "none", "rope_planes(rotate_half)", "rope_planes(interleaved, 32 of 64)".
std::string key_gauge_name(const KeyGauge& gauge, const RopeLayout& rope, int head_dim);

enum class PlanObjective { merge, qk };
std::string_view plan_objective_name(PlanObjective objective) noexcept;
PlanObjective parse_plan_objective(std::string_view name);
/// "merge", "qk": the names parse_plan_objective accepts, from its table (for help texts).
std::vector<std::string> plan_objective_names();

/// One layer's d_h × d_h cross-Grams (row blocks: head i's d_h rows against head j's).
struct PlanLayerGrams {
  int layer = 0;
  int head_dim = 0;
  std::vector<int> kv_of_head;  ///< query head h reads KV head kv_of_head[h]
  MatrixD keys;                 ///< K Kᵀ, kv_heads·d_h square
  MatrixD values;               ///< V Vᵀ
  MatrixD queries;              ///< Q Qᵀ, heads·d_h square (empty: no queries)
  MatrixD outputs;  ///< O_hᵀ O_h per query head, stacked: heads·d_h × d_h (empty: not needed)
  MatrixD keys_values;  ///< [K; V] [K; V]ᵀ, for latent ranks (empty: not asked for)
  int kv_heads() const { return head_dim ? static_cast<int>(keys.rows()) / head_dim : 0; }
};

struct PlanOptions {
  int kv_heads_after = 0;
  bool align = true;                            ///< --gauge auto (false: none)
  PlanObjective objective = PlanObjective::qk;  // the default: docs/plan.md, "Validation"
  std::optional<RopeConvention> rope;           ///< --rope: wins over the model type's table
  std::string layers;                           ///< --layers, "" for all
  std::optional<double> latent_energy;
  int random_partitions = 8;
  std::uint64_t seed = 0;
  long long exact_limit = 3'000'000;  ///< enumerate when the equal partitions number at most this
  int restarts = 8;                   ///< local search restarts beyond exact_limit
  /// Refit: pool each group into the head that best keeps its members' forms and refit the
  /// queries and output columns to it (docs/plan.md, "Refit"); the groups are chosen as without.
  /// Unset: the default, plan_refits(); false: the (aligned) mean-pool; true with align false is
  /// refused (the refit fits queries within the RoPE layout).
  std::optional<bool> refit;
};

/// Whether a plan with these options refits: options.refit, by default true unless align is
/// false (--gauge none: the plain mean-pool). The validation favours the refit (docs/plan.md).
inline bool plan_refits(const PlanOptions& options) noexcept {
  return options.refit.value_or(options.align);
}

/// Why --refit is refused with --gauge none (align false): the request, the model and the layer
/// each refuse it (for callers that skip the request), in these words after "--refit ".
inline constexpr std::string_view kRefitNeedsAlignment =
    "fits queries within the RoPE layout, which --gauge none turns off";

/// The scores of one grouping of one layer.
struct GroupingScore {
  std::vector<std::vector<int>> groups;  ///< original KV-head indices, each sorted
  double key_error = 0;
  double value_error = 0;
  double qk_error = 0;  ///< NaN without queries
  double erank_qk_after = 0;
  double erank_k_after = 0;
};

struct PlanLayer {
  int layer = 0;
  bool exact = false;
  GroupingScore plan;
  double erank_qk_before = 0;
  GroupingScore contiguous;
  GroupingScore random_median;  ///< medians of each field over the random partitions (no groups)
  std::optional<int> latent_rank;
  std::optional<int> latent_rank_forms;
  /// Per group and member, the rotations applied (R_i for keys, R'_i for values), row-major
  /// d_h × d_h each: what --write-checkpoint applies. A query head reading KV head k gets
  /// key_rotations[k] Q_h, its output columns O_h value_rotations[k]ᵀ (with the refit: the
  /// refitted maps, not rotations).
  std::vector<MatrixD> key_rotations, value_rotations;  ///< indexed by original KV head
  /// The refit only (else empty): K̄_g = Σ_{k∈g} key_pool[k] K_k, V̄_g likewise; without it
  /// K̄_g is the mean of the rotated R_k K_k.
  std::vector<MatrixD> key_pool, value_pool;
};

struct PlanModel {
  std::string label, path, family, model_type;
  int heads = 0, kv_heads = 0, kv_heads_after = 0, head_dim = 0;
  std::string key_gauge, value_gauge;
  PlanObjective objective = PlanObjective::qk;
  int random_partitions = 0;
  std::optional<double> latent_energy;
  bool refit = false;
  std::vector<PlanLayer> layers;
};

/// Number of ways to split n items into n/size unordered groups of `size` (saturates at 2^62).
long long equal_partition_count(int n, int size);

/// The plan of one layer from its Grams.
PlanLayer plan_layer(const PlanLayerGrams& grams, const KeyGauge& keys, bool align_values,
                     const PlanOptions& options);

/// The Grams of one layer of a dense checkpoint (every head a slice of its projection).
PlanLayerGrams plan_layer_grams(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                                bool need_outputs, bool need_stacked);

/// Checks the model can be planned with `options` (dense per-head K/V, G dividing the KV heads,
/// a known RoPE convention when aligning): throws kvrank::Error with one line otherwise.
void check_plannable(const Checkpoint& checkpoint, const ModelLayout& layout,
                     const PlanOptions& options);

/// The whole plan of one checkpoint.
PlanModel plan_checkpoint(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                          const PlanOptions& options, const std::string& label = "");

/// The plans as the JSON document of docs/plan.md (schema docs/schema/kvrank-plan.schema.json);
/// NaN (no queries) is written as null.
std::string plan_json(const std::vector<PlanModel>& models);
/// One row per model and layer: plan, contiguous and random-median errors, erank before/after.
std::string plan_table(const std::vector<PlanModel>& models);
std::string plan_csv(const std::vector<PlanModel>& models);

/// Whether a JSON document is a plan (its "kind" is "plan").
bool is_plan_document(const nlohmann::json& document);
/// The plans of a plan JSON file (plan_json's document) as its figure needs them: every model's
/// geometry, objective and per-layer scores (no rotations, latent ranks or gauge names). Throws
/// kvrank::Error naming `path` and the first field that is missing or of the wrong type.
std::vector<PlanModel> plans_from_json(const nlohmann::json& document, const std::string& path);

}  // namespace kvrank

// Private: `kvrank plan --refit` (docs/plan.md, "Refit"). A group's keys and values are pooled
// into the shared head that best keeps the members' attention and output forms, and each query
// head's q_proj rows and o_proj columns are refitted to it by least squares — all from the
// d_h × d_h cross-Grams.
#pragma once
#include <vector>

#include "analysis/plan_detail.hpp"

namespace kvrank::detail {

/// The refit conversion of one partition, per original KV head k (member of group g):
///   K̄_g = Σ_{k∈g} key_pool[k] K_k, V̄_g = Σ_{k∈g} value_pool[k] V_k;
///   a query head h reading k gets query_maps[k] Q_h and output columns O_h output_maps[k].
struct Refit {
  std::vector<MatrixD> key_pool, value_pool, query_maps, output_maps;
  double qk_residual = 0;  ///< Σ_h ‖A_h − Â_h‖²_F of this conversion (θ = 0 forms, as qk_error)
};

/// `query_sum[k]` = Σ_{h→k} Q_h Q_hᵀ (the layer's P_k); needs grams.outputs (O_hᵀ O_h).
/// Throws kvrank::Error when the layer has no query or output Grams, or `keys` is the none gauge.
Refit refit_partition(const PlanLayerGrams& grams, const std::vector<MatrixD>& query_sum,
                      const Partition& partition, const KeyGauge& keys);

/// Σ_{h→k, k∈group} ‖A_h − Â_h‖² of one group's refit (keys only): the qk objective's group cost
/// under --refit.
double refit_qk_residual(const PlanLayerGrams& grams, const std::vector<MatrixD>& query_sum,
                         const std::vector<int>& group, const KeyGauge& keys);

/// K̄_g K̄_g'ᵀ for every pair of groups (blocks d_h × d_h) of a refit's pooled keys.
MatrixD refit_pooled_keys(const PlanLayerGrams& grams, const Partition& partition,
                          const std::vector<MatrixD>& key_pool);

}  // namespace kvrank::detail

// Private: ⟨A_i, A_j⟩_F by contraction in per-head coordinates, the path for heads that are not
// plain slices of their basis (MLA, LRKV). See contraction.cpp for the algebra and the cost model.
#pragma once

#include <optional>
#include <vector>

#include "kvrank/base/factors.hpp"
#include "kvrank/metric/diversity.hpp"

namespace kvrank::detail {

/// How one side's heads are written as k × p coordinate matrices X_hᵀ with X_hᵀX_h = L_hᵀL_h:
/// `latent` (p = basis rows: X_hᵀ = C_hᵀ F, F Fᵀ = basis·basisᵀ) or `raw` (p = basis columns:
/// X_hᵀ = C_hᵀ basis, the head's own columns).
enum class Coordinates { latent, raw };

struct ContractionPlan {
  Coordinates left = Coordinates::latent;
  Coordinates right = Coordinates::latent;  ///< unused when the factors are symmetric
  double cost = 0;                          ///< estimated multiply-adds
};

/// The cheapest contraction for `factors` when `how` allows it: with Contraction::automatic only
/// if some side has heads that are not one identity block and the contraction is estimated cheaper
/// than the pairwise path; with Contraction::latent always; never with Contraction::pairwise.
std::optional<ContractionPlan> choose_contraction(const HeadFactors& factors, Contraction how);

/// What analyze_layer needs from a contraction: all ⟨A_i, A_j⟩_F and, per head, L_hᵀL_h and (when
/// not symmetric) R_hᵀR_h — those only for the heads' own ranks (empty with HeadRanks::skipped).
struct ContractedHeads {
  MatrixD inner;
  std::vector<MatrixD> left_self;
  std::vector<MatrixD> right_self;
};

/// The contraction of `plan`, in the buffers of `workspace` (see compute.hpp).
ContractedHeads contract_heads(const HeadFactors& factors, const ContractionPlan& plan,
                               ComputeWorkspace& workspace, HeadRanks head_ranks);

/// The float32 Gram of diversity.cpp (rows · rowsᵀ, both triangles), shared with the contraction.
void float_gram(const RowMatrixF& basis, MatrixF& gram);

}  // namespace kvrank::detail

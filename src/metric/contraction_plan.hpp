// Private: the contraction's plan (contraction.hpp): in which coordinates each side's heads are
// written, whether that beats the pairwise path (an estimate of multiply-adds), and the memory it
// allocates. contraction_plan.cpp holds the cost model.
#pragma once

#include <cstdint>
#include <optional>

#include "kvrank/base/factors.hpp"
#include "kvrank/metric/compute.hpp"
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

/// Floats of M_h rows the contraction forms at once, over all heads (64 MB).
constexpr Index kContractionChunkFloats = Index(1) << 24;

/// p of a side's coordinates X_hᵀ (k × p): the basis's rows when latent, its columns when raw.
Index coordinate_dimension(const FactorSide& side, Coordinates how);

/// The pairwise path's estimated multiply-adds (double ones weighted as float32 BLAS ones), which
/// choose_contraction() sets against a contraction's ContractionPlan::cost.
double pairwise_cost(const HeadFactors& factors);

/// The cheapest contraction for `factors` when `how` allows it: with Contraction::automatic only
/// if some side has heads that are not one identity block and the contraction is estimated cheaper
/// than the pairwise path; with Contraction::latent always; never with Contraction::pairwise.
std::optional<ContractionPlan> choose_contraction(const HeadFactors& factors, Contraction how);

/// Bytes contract_heads() allocates for `plan` beyond what `workspace` already holds, rounded up:
/// for sizing the layer before it starts (memory_limit.hpp).
std::uint64_t contraction_bytes(const HeadFactors& factors, const ContractionPlan& plan,
                                const ComputeWorkspace& workspace);

}  // namespace kvrank::detail

// Private: ⟨A_i, A_j⟩_F by contraction in per-head coordinates, the path for heads that are not
// plain slices of their basis (MLA, LRKV). See contraction.cpp for the algebra and the cost model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kvrank/base/factors.hpp"
#include "kvrank/metric/diversity.hpp"
#include "metric/blas.hpp"
#include "metric/centred_products.hpp"

namespace kvrank::detail {

/// What runs one layer's float32 products, chosen by analyze_layer from the backend in force
/// (gram_backend.hpp) and the memory left under a limit (memory_limit.hpp): oneDNN only when the
/// room it may take is there.
struct LayerKernels {
  bool onednn_grams = false;                   ///< the Grams may run on oneDNN (bf16, onednn-f32)
  FloatKernels products = FloatKernels::blas;  ///< blas.hpp's GEMM, TRMM and SYRK
};

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

/// One side's heads as coordinates X_hᵀ (contraction.cpp).
class SideCoordinates;

/// L_hᵀL_h = X_hᵀX_h of head h (k × k, in double), on the calling thread.
MatrixD self_product(const SideCoordinates& side, Index h);

/// What analyze_layer needs from a contraction: all ⟨A_i, A_j⟩_F and, for the heads' own ranks,
/// each side's coordinates, from which self_product() forms a head's L_hᵀL_h and R_hᵀR_h when its
/// eigenproblem asks: a few heads a thread at a time, not every head's at once (76 MB for V3).
struct ContractedHeads {
  MatrixD inner;
  CentredProducts centred;  ///< the sums `inner` came from, for J S J (centred_products.hpp)
  std::shared_ptr<const SideCoordinates> left;   ///< null with HeadRanks::skipped
  std::shared_ptr<const SideCoordinates> right;  ///< null also when the factors are symmetric
};

/// The contraction of `plan`, in the buffers of `workspace` (see compute.hpp), on `kernels`. The
/// coordinates it returns live in `workspace` and `factors`: they serve while both do.
ContractedHeads contract_heads(const HeadFactors& factors, const ContractionPlan& plan,
                               ComputeWorkspace& workspace, HeadRanks head_ranks,
                               const LayerKernels& kernels);

/// Bytes contract_heads() allocates for `plan` beyond what `workspace` already holds, rounded up:
/// for sizing the layer before it starts (memory_limit.hpp).
std::uint64_t contraction_bytes(const HeadFactors& factors, const ContractionPlan& plan,
                                const ComputeWorkspace& workspace);

/// The float32 Gram of diversity.cpp (rows · rowsᵀ, both triangles), shared with the contraction.
void float_gram(const RowMatrixF& basis, MatrixF& gram, const LayerKernels& kernels);

}  // namespace kvrank::detail

// Private: ⟨A_i, A_j⟩_F by contraction in per-head coordinates, the path for heads that are not
// plain slices of their basis (MLA, LRKV). See contraction.cpp for the algebra; its plan and cost
// model are contraction_plan.hpp's.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kvrank/base/factors.hpp"
#include "kvrank/metric/diversity.hpp"
#include "metric/blas.hpp"
#include "metric/centred_products.hpp"
#include "metric/contraction_plan.hpp"
#include "metric/latent_order.hpp"

namespace kvrank::detail {

/// What runs one layer's float32 products, chosen by analyze_layer from the backend in force
/// (gram_backend.hpp) and the memory left under a limit (memory_limit.hpp): oneDNN only when the
/// room it may take is there.
struct LayerKernels {
  bool onednn_grams = false;                   ///< the Grams may run on oneDNN (bf16, onednn-f32)
  FloatKernels products = FloatKernels::blas;  ///< blas.hpp's GEMM, TRMM and SYRK
  FloatKernels latent_products = FloatKernels::blas;  ///< the M_h products (contraction.cpp)
};

/// One side's heads as coordinates X_hᵀ (contraction.cpp).
class SideCoordinates;

/// L_hᵀL_h = X_hᵀX_h of head h (k × k, in double), on the calling thread (self_product_by_runs).
MatrixD self_product(const SideCoordinates& side, Index h);

/// rows · rowsᵀ in double (syrk_in_double) of k rows, `dim` wide and `ld` apart, whose `runs`
/// (latent_order.hpp) say where each row's zeros begin. Where the runs are the rows [0, k) in
/// order (MLA's keys: 128 rows 576 wide, then the 64 rope rows 64 wide), a product a run: its rows
/// against themselves and the rows before them, only as deep as the run reaches (a V3 head's keys
/// 10.6 → 5.9 M multiply-adds). The chain of an entry past the narrower row adds exact zeros, so
/// on syrk_in_double's kernel these are the bits of the whole depth; else the BLAS's to round-off.
MatrixD self_product_by_runs(Index k, Index dim, const float* rows, Index ld,
                             const std::vector<ColumnRun>& runs);

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

}  // namespace kvrank::detail

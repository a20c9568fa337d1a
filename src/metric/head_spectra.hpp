// Private: each head's singular values σ(A_h) for head_erank (diversity.cpp), from its two
// d_h × d_h products, eight heads at a time in the SIMD lanes of kvrank's own solver where the CPU
// has it (eigen_lanes.hpp), else — and for what the lanes give up on — by LAPACK (blas.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "kvrank/base/eigen.hpp"
#include "metric/eigen_lanes.hpp"

namespace kvrank::detail {

/// A head's L_hᵀL_h and, unless the layer is symmetric (A_h = L_h L_hᵀ), R_hᵀR_h.
using SelfProducts = std::pair<MatrixD, std::optional<MatrixD>>;

/// d_h × d_h double matrices a thread holds at once for the heads' eigenproblems, for sizing a
/// layer under a memory limit: a call of the lane solver holds its heads' two products (2 ×
/// kEigenLanes) and its own packed buffers (about kEigenLanes more), LAPACK's route for a head the
/// lanes give up on 8 more.
inline constexpr std::uint64_t kEigenMatrices = 3 * kEigenLanes + 8;

/// Sets to 0 the negative values and the eigensolver's round-off of an n × n problem whose entries
/// have magnitude `scale`: anything ≤ n·ε·scale.
void zero_round_off(std::vector<double>& values, double scale);

/// The heads' eigenproblems as tasks [first, last) of 0 … count, for the threads: kEigenLanes heads
/// a task (one call of the lane solver); a remainder too small for the lanes one head a task, for
/// LAPACK. Depends on `count` alone, never on the threads.
std::vector<std::pair<Index, Index>> eigen_tasks(Index count);

/// σ(A_h) of each head, descending, round-off set to 0: σ² = λ(P·Q) of A = L Rᵀ (P = LᵀL,
/// Q = RᵀR), or σ = λ(P) of A = L Lᵀ. All heads of one order; on the calling thread.
std::vector<std::vector<double>> head_singular_values(const std::vector<SelfProducts>& heads);

}  // namespace kvrank::detail

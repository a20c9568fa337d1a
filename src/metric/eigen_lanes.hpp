// Private: the eigenvalues of up to eight small symmetric(-definite) problems at once, one problem
// in each double lane of an AVX-512 register — the heads' σ² of a layer (diversity.cpp).
//
// LAPACK solves one head at a time (dsygv: dpotrf, dsygst, dsytrd, dsterf), and at the heads'
// orders (128, 192) its level-2 steps and the serial chain of divisions in dsterf leave most of a
// core idle: 0.55 ms for one order-128 head, where the multiply-adds would take 0.06 ms. Here the
// same steps run on eight heads side by side, each step one vector instruction for all eight:
//   1. scale each problem by powers of two (exact) so that its largest entries are near 1;
//   2. Cholesky P = L Lᵀ (lower);
//   3. C = Lᵀ Q L, whose eigenvalues are those of P·Q (column by column, in place);
//   4. Householder reduction of C to a tridiagonal matrix;
//   5. implicit QL with Wilkinson's shift on the tridiagonal, the lanes in lock step (a lane whose
//      eigenvalue has converged sits out the sweeps of the others).
// Symmetric problems (no Q) skip steps 2 and 3. Each step is the textbook backward-stable one, so
// the eigenvalues agree with LAPACK's to the same absolute accuracy, ~n·ε·‖C‖ (not to the bit).
//
// Compiled for AVX-512F per function (a target attribute), run only where the CPU has it.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "kvrank/base/eigen.hpp"

namespace kvrank::detail {

/// How many problems one call of lane_eigenvalues solves together.
inline constexpr int kEigenLanes = 8;

/// True when this build has the solver (x86-64, GCC or Clang) and the CPU runs AVX-512F.
bool eigen_lanes_supported() noexcept;

/// One problem: the eigenvalues of P·Q (P symmetric positive definite, Q symmetric) or, with q
/// null, of P (symmetric). Only the lower triangles are read.
struct EigenProblem {
  const MatrixD* p = nullptr;
  const MatrixD* q = nullptr;
};

/// The eigenvalues, ascending, of each of 1 … kEigenLanes problems of one order n ≥ 1, all with Q
/// or all without. A problem's result is empty (std::nullopt) where its P is not positive definite,
/// an entry is not finite, or the QL iteration did not converge: the caller then asks LAPACK.
/// Preconditions: eigen_lanes_supported(); on the calling thread (buffers kept per thread).
std::vector<std::optional<std::vector<double>>> lane_eigenvalues(
    std::span<const EigenProblem> problems);

}  // namespace kvrank::detail

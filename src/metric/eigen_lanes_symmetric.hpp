// Private: the products of a packed block and a vector in the lanes of the solver
// (eigen_lanes.cpp) — t = S v, S symmetric, which the congruence Lᵀ Q L and the Householder
// reduction take over a trailing block, and t = Lᵀ v, L lower triangular, the congruence's other
// half: most of the solver's multiply-adds.
//
// Each column of the lower triangle serves both of its uses in one pass: S(k+r, k)·v_k into
// t_{k+r}, and S(k+r, k)·v_{k+r} into t_k (Lᵀ v: the second alone). Four columns go together (a
// "pass"), so that the loads of t, v (and of a pending update's vectors) and the store of t serve
// four columns, not one, and each entry is loaded once. Each t_i adds its columns' terms in column
// order; column k's inner product runs in S running sums (4, or 2 where the pass also updates S),
// row i into sum i mod S, added up pairwise at the end.
#pragma once

#include "metric/eigen_lanes_simd.hpp"

namespace kvrank::detail::eigen_lanes {

#ifdef KVRANK_EIGEN_LANES

/// A Householder reflector H = I − τ v vᵀ (v₀ = 1) and the vector w of its two-sided update
/// H S H = S − v wᵀ − w vᵀ, both indexed from the first row of the block S it reduces.
struct Reflector {
  Entry* v;
  Entry* w;
};

/// Entry s = S(i, k) less the pending update (v wᵀ + w vᵀ), from the pending vectors at its row
/// (v_i, w_i) and at its column (v_k, w_k).
KVRANK_LANES_TARGET inline Vec less_pending(Vec s, Vec v_i, Vec w_i, Vec v_k, Vec w_k) {
  return fnma(w_i, v_k, fnma(v_i, w_k, s));
}

/// t = S v, S the symmetric trailing block of `a` (n × n, lower, by columns) from row and column
/// `first` on (order m = n − first), v and t of length m. Four running sums a column.
KVRANK_LANES_TARGET void symmetric_times(const Entry* a, Index n, Index first, const Entry* v,
                                         Entry* t);

/// The same after S ← S − p.v p.wᵀ − p.w p.vᵀ, the `pending` update of the step before (its
/// vectors indexed from row first − 1), applied to each column of S in place as the pass reads it:
/// one read and one write of S where the update and the product apart would read it twice. Two
/// running sums a column.
KVRANK_LANES_TARGET void update_and_multiply(Entry* a, Index n, Index first,
                                             const Reflector& pending, const Entry* v, Entry* t);

/// t = Lᵀ v, L the lower triangular trailing block of `l` from row and column `first` on.
KVRANK_LANES_TARGET void lower_transposed_times(const Entry* l, Index n, Index first,
                                                const Entry* v, Entry* t);

#endif  // KVRANK_EIGEN_LANES

}  // namespace kvrank::detail::eigen_lanes

// Private: the tridiagonal half of the lane solver (eigen_lanes.cpp): Householder reduction to a
// tridiagonal and its eigenvalues by implicit QL, eight problems at a time.
#pragma once

#include "metric/eigen_lanes_symmetric.hpp"

namespace kvrank::detail::eigen_lanes {

#ifdef KVRANK_EIGEN_LANES

/// Householder reduction of the symmetric `a` (lower, destroyed) to the tridiagonal d, e: e[j]
/// couples j and j + 1, e[n − 1] = 0 (LAPACK's dsytd2, lower). Each step's two-sided update is
/// applied lazily, column by column, in the next step's pass (update_and_multiply). `reflectors`:
/// two pairs of n entries.
KVRANK_LANES_TARGET void tridiagonalize(Entry* a, Index n, Entry* d, Entry* e,
                                        Reflector (&reflectors)[2]);

/// The eigenvalues of the tridiagonal d, e into d, in the lanes not in `skip`; the lanes that did
/// not converge.
KVRANK_LANES_TARGET Mask tridiagonal_eigenvalues(Entry* d, Entry* e, Index n, Mask skip);

#endif  // KVRANK_EIGEN_LANES

}  // namespace kvrank::detail::eigen_lanes

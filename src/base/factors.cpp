// Folding a side's row gains into its basis, and the float32 copy of a stored basis (factors.hpp).
#include "kvrank/base/factors.hpp"

#include <cassert>
#include <utility>

#include "base/tiled_copy.hpp"  // copy_worth_threads

namespace kvrank {

void scale_rows(RowMatrixF& rows, const std::vector<double>& factors) {
  assert(static_cast<Index>(factors.size()) == rows.rows());
  // One pass over tens of MB a layer (DeepSeek-V3's q_a_proj: 44 MB): worth both threads.
#pragma omp parallel for if (detail::copy_worth_threads(rows.size()))
  for (Index i = 0; i < rows.rows(); ++i)
    rows.row(i) = (rows.row(i).cast<double>() * factors[i]).cast<float>();
}

FactorSide with_float_basis(FactorSide side) {
  if (side.stored) {
    side.basis = side.stored->to_float();
    side.stored.reset();
  }
  if (!side.row_gains.empty()) {
    scale_rows(side.basis, side.row_gains);
    side.row_gains.clear();
  }
  return side;
}

}  // namespace kvrank

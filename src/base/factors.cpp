// Folding a side's row gains into its basis, and the float32 copy of a stored basis (factors.hpp).
#include "kvrank/base/factors.hpp"

#include <cassert>
#include <map>
#include <memory>
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

namespace {

/// The side's stored coefficient blocks pointed at float32 copies of their rows, one copy for each
/// stored matrix however many heads share it.
void copy_stored_coefficients(FactorSide& side) {
  std::map<const StoredBf16Rows*, std::shared_ptr<const RowMatrixF>> copies;
  for (std::vector<CoeffBlock>& blocks : side.heads) {
    for (CoeffBlock& block : blocks) {
      if (!block.is_stored()) continue;
      std::shared_ptr<const RowMatrixF>& copy = copies[block.stored.get()];
      if (!copy) copy = std::make_shared<const RowMatrixF>(block.stored->to_float());
      block.source = copy;
      block.stored.reset();
    }
  }
}

}  // namespace

FactorSide with_float_basis(FactorSide side) {
  copy_stored_coefficients(side);
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

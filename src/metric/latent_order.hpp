// Private: the order of a side's basis rows in the contraction's latent factor, and how wide each
// head's coordinate rows are in it (contraction.cpp).
//
// Any order of the basis rows gives the same metric: with G' = P G Pᵀ = F' F'ᵀ, F = Pᵀ F' is a
// factor of G, and the coordinates C_hᵀ F = (P C_h)ᵀ F' follow the rows. The order matters for the
// cost: with F' lower triangular, a coordinate row taken from basis rows [b, b + r) is zero from
// column b + r on, and M_h = X_h Y_hᵀ needs each of Y's rows only that wide. DeepSeek's keys are a
// 512-row latent every head mixes and 64 rope rows every head shares as they are: put first, the
// rope rows leave 64 of a head's 192 coordinate rows 64 wide instead of 576, and a V3 layer's M_h
// products go from 21.7 to 15.3 G multiply-adds.
#pragma once

#include <vector>

#include "kvrank/base/factors.hpp"

namespace kvrank::detail {

/// The basis rows of a side cut into segments at every block's first and last row, the segments
/// ordered to narrow the coordinates: by Smith's rule, the fewest rows per head column first
/// (the sum over head columns of where their rows end is then least). A side where some block
/// spans more than one segment keeps its order.
class LatentOrder {
 public:
  explicit LatentOrder(const FactorSide& side);

  /// Where basis row `basis_row` (0 ≤ row < the side's rows) goes; a block's rows stay together.
  Index position(Index basis_row) const;
  /// The old row of each new row (new row i holds old row order()[i]); empty when unchanged.
  const std::vector<Index>& order() const noexcept { return order_; }

 private:
  std::vector<Index> starts_;      ///< segments' old first rows, ascending, then the row count
  std::vector<Index> new_starts_;  ///< each segment's new first row
  std::vector<Index> order_;
};

/// Head columns [first, first + count) whose coordinate rows are zero from column `width` on.
struct ColumnRun {
  Index first = 0;
  Index count = 0;
  Index width = 0;
};

/// A head's coordinate rows grouped by their width, widest first (columns of no block, all zero,
/// left out). `triangular`: coordinates by a lower-triangular factor in `order`, where a block's
/// rows end at its last basis row; otherwise every row is `dim` wide.
std::vector<ColumnRun> column_runs(const std::vector<CoeffBlock>& blocks, Index head_cols,
                                   Index dim, const LatentOrder* triangular);

}  // namespace kvrank::detail

// Tests of the latent factor's row order and the coordinate rows' widths
// (src/metric/latent_order.cpp). That the contraction gives the same metric in the new order is
// tested in diversity_test.cpp (its MLA-like key side is reordered) and against the numpy
// reference in e2e's latent families.
#include "metric/latent_order.hpp"

#include <vector>

#include "support/catch.hpp"

using namespace kvrank;
using detail::column_runs;
using detail::ColumnRun;
using detail::LatentOrder;

namespace {

/// A side of `heads` heads over `rows` basis rows (its basis only sized: the order reads blocks).
FactorSide side_with(Index rows, Index head_cols, std::vector<std::vector<CoeffBlock>> heads) {
  FactorSide side;
  side.basis = RowMatrixF::Zero(rows, 4);
  side.head_cols = head_cols;
  side.heads = std::move(heads);
  return side;
}

/// A dense block of `rows` basis rows from `basis_row` on, into head columns [head_col, + cols).
CoeffBlock dense(Index basis_row, Index rows, Index head_col, Index cols) {
  return CoeffBlock::dense(basis_row, head_col, RowMatrixF::Ones(cols, rows));
}

bool same_runs(const std::vector<ColumnRun>& got, const std::vector<ColumnRun>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].first != want[i].first || got[i].count != want[i].count ||
        got[i].width != want[i].width)
      return false;
  }
  return true;
}

/// DeepSeek's key side in small: 8 latent rows every head mixes into its first 3 columns, then 2
/// rope rows every head takes as they are into its last 2.
FactorSide mla_keys(Index heads) {
  std::vector<std::vector<CoeffBlock>> blocks;
  for (Index h = 0; h < heads; ++h)
    blocks.push_back({dense(0, 8, 0, 3), CoeffBlock::identity(8, 2, 3)});
  return side_with(10, 5, blocks);
}

}  // namespace

TEST_CASE("the shared rope rows go first, and narrow the heads' rope columns", "[latent_order]") {
  const FactorSide keys = mla_keys(4);
  const LatentOrder order(keys);
  CHECK(order.order() == std::vector<Index>{8, 9, 0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(order.position(8) == 0);
  CHECK(order.position(9) == 1);
  CHECK(order.position(0) == 2);
  CHECK(order.position(5) == 7);
  // Latent columns end where the latent rows do (row 10), rope columns at row 2: widest first.
  CHECK(same_runs(column_runs(keys.heads[0], 5, 10, &order), {{0, 3, 10}, {3, 2, 2}}));
  // Without a triangular factor (raw coordinates, a pivoted LDLᵀ) every row is full width.
  CHECK(same_runs(column_runs(keys.heads[0], 5, 10, nullptr), {{0, 5, 10}}));
}

TEST_CASE("a side already in the best order keeps it", "[latent_order]") {
  // LRKV's keys: k shared rows first (all heads, all columns), then r rows of each head's own.
  std::vector<std::vector<CoeffBlock>> blocks;
  for (Index h = 0; h < 3; ++h)
    blocks.push_back({CoeffBlock::identity(0, 4), dense(4 + 2 * h, 2, 0, 4)});
  const FactorSide keys = side_with(10, 4, blocks);
  const LatentOrder order(keys);
  CHECK(order.order().empty());
  for (Index row = 0; row < 10; ++row) CHECK(order.position(row) == row);
  // Head h's rows end with its own block: 6, 8, 10 wide.
  for (Index h = 0; h < 3; ++h)
    CHECK(same_runs(column_runs(keys.heads[h], 4, 10, &order), {{0, 4, 6 + 2 * h}}));
}

TEST_CASE("a block over several segments keeps the order", "[latent_order]") {
  // Head 1's block starts inside head 0's (rows 0..5 and 3..9): any move of the segments [0, 3),
  // [3, 6), [6, 10) would tear a block apart.
  const FactorSide side = side_with(10, 2, {{dense(0, 6, 0, 2)}, {dense(3, 7, 0, 2)}});
  const LatentOrder order(side);
  CHECK(order.order().empty());
  CHECK(order.position(3) == 3);
}

TEST_CASE("rows no head uses go last, columns no block fills are left out", "[latent_order]") {
  // Rows 0..3 unused; rows 4..5 fill column 0 of every head; column 1 has no block.
  const FactorSide side = side_with(6, 2, {{dense(4, 2, 0, 1)}, {dense(4, 2, 0, 1)}});
  const LatentOrder order(side);
  CHECK(order.order() == std::vector<Index>{4, 5, 0, 1, 2, 3});
  CHECK(same_runs(column_runs(side.heads[0], 2, 6, &order), {{0, 1, 2}}));
  // A head of no blocks has no rows to multiply.
  CHECK(column_runs({}, 2, 6, &order).empty());
}

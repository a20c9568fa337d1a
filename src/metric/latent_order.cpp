// The order of a side's basis rows in the latent factor (latent_order.hpp).
#include "metric/latent_order.hpp"

#include <algorithm>
#include <numeric>

namespace kvrank::detail {
namespace {

bool empty_block(const CoeffBlock& block) { return block.rows() == 0 || block.cols() == 0; }

}  // namespace

LatentOrder::LatentOrder(const FactorSide& side) {
  starts_ = {0, side.rows()};
  for (const auto& blocks : side.heads) {
    for (const CoeffBlock& block : blocks) {
      if (empty_block(block)) continue;
      starts_.push_back(block.basis_row);
      starts_.push_back(block.basis_row + block.rows());
    }
  }
  std::sort(starts_.begin(), starts_.end());
  starts_.erase(std::unique(starts_.begin(), starts_.end()), starts_.end());
  const std::size_t segments = starts_.size() - 1;
  new_starts_.assign(starts_.begin(), starts_.end() - 1);

  // Each segment's weight: the head columns whose rows it holds. A block over several segments
  // would be torn apart by a new order: then the order stays.
  std::vector<double> weight(segments, 0.0);
  for (const auto& blocks : side.heads) {
    for (const CoeffBlock& block : blocks) {
      if (empty_block(block)) continue;
      const auto segment = static_cast<std::size_t>(
          std::lower_bound(starts_.begin(), starts_.end(), block.basis_row) - starts_.begin());
      if (starts_[segment + 1] != block.basis_row + block.rows()) return;
      weight[segment] += static_cast<double>(block.cols());
    }
  }
  auto length = [this](std::size_t s) { return static_cast<double>(starts_[s + 1] - starts_[s]); };
  std::vector<std::size_t> ranking(segments);
  std::iota(ranking.begin(), ranking.end(), std::size_t{0});
  // Smith's rule: fewest rows per head column first; rows no head uses (weight 0) last.
  std::stable_sort(ranking.begin(), ranking.end(), [&](std::size_t a, std::size_t b) {
    return length(a) * weight[b] < length(b) * weight[a];
  });
  if (std::is_sorted(ranking.begin(), ranking.end())) return;
  Index next = 0;
  for (const std::size_t segment : ranking) {
    new_starts_[segment] = next;
    for (Index row = starts_[segment]; row < starts_[segment + 1]; ++row) order_.push_back(row);
    next += starts_[segment + 1] - starts_[segment];
  }
}

Index LatentOrder::position(Index basis_row) const {
  if (order_.empty()) return basis_row;
  const auto segment = static_cast<std::size_t>(
      std::upper_bound(starts_.begin(), starts_.end(), basis_row) - starts_.begin() - 1);
  return new_starts_[segment] + (basis_row - starts_[segment]);
}

std::vector<ColumnRun> column_runs(const std::vector<CoeffBlock>& blocks, Index head_cols,
                                   Index dim, const LatentOrder* triangular) {
  std::vector<Index> width(static_cast<std::size_t>(head_cols), 0);
  for (const CoeffBlock& block : blocks) {
    if (empty_block(block)) continue;
    const Index end = triangular ? triangular->position(block.basis_row) + block.rows() : dim;
    for (Index c = block.head_col; c < block.head_col + block.cols(); ++c)
      width[static_cast<std::size_t>(c)] = std::max(width[static_cast<std::size_t>(c)], end);
  }
  std::vector<ColumnRun> runs;
  for (Index c = 0; c < head_cols; ++c) {
    const Index w = width[static_cast<std::size_t>(c)];
    if (w == 0) continue;
    if (!runs.empty() && runs.back().width == w && runs.back().first + runs.back().count == c) {
      ++runs.back().count;
    } else {
      runs.push_back({c, 1, w});
    }
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const ColumnRun& a, const ColumnRun& b) { return a.width > b.width; });
  return runs;
}

}  // namespace kvrank::detail

// The clustered head order of the similarity heatmap (src/plot/head_order.hpp), and the heatmap
// drawn in it (plot --heatmap L --head-order cluster).
#include "plot/head_order.hpp"

#include <algorithm>
#include <numeric>
#include <regex>

#include "kvrank/plot/svg.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

using namespace kvrank;

namespace {

/// S of `heads` heads in blocks: 0.9 within a block (block[h] names h's), 0.1 across.
MatrixD block_similarity(const std::vector<int>& block) {
  const auto n = static_cast<Index>(block.size());
  MatrixD s(n, n);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j) s(i, j) = i == j ? 1.0 : block[i] == block[j] ? 0.9 : 0.1;
  return s;
}

/// Whether each block's heads sit next to each other in `order`.
bool blocks_contiguous(const std::vector<int>& order, const std::vector<int>& block) {
  for (std::size_t i = 0; i + 1 < order.size(); ++i) {
    // Once a block ends, none of its heads may come again.
    const int current = block[order[i]];
    if (block[order[i + 1]] == current) continue;
    for (std::size_t k = i + 1; k < order.size(); ++k)
      if (block[order[k]] == current) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("cluster_order puts each block of similar heads side by side", "[plot]") {
  const std::vector<int> block = {0, 1, 2, 0, 1, 2, 0, 1};  // interleaved: index order splits them
  const std::vector<int> order = plot_detail::cluster_order(block_similarity(block));
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> all(8);
  std::iota(all.begin(), all.end(), 0);
  CHECK(sorted == all);  // a permutation of the heads
  CHECK(blocks_contiguous(order, block));
  CHECK_FALSE(blocks_contiguous(all, block));
  CHECK(order.front() == 0);  // the group holding head 0 comes first
}

TEST_CASE("cluster_order of orthogonal heads keeps the index order", "[plot]") {
  // Every distance ties: the lowest-numbered pair merges first, and the lower group stays first.
  const std::vector<int> order = plot_detail::cluster_order(MatrixD::Identity(5, 5));
  CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(plot_detail::cluster_order(MatrixD::Identity(1, 1)) == std::vector<int>{0});
}

TEST_CASE("cluster_order breaks a tie by the lowest head numbers", "[plot]") {
  // Head 3 is as close to head 0 as to head 1 (S 0.9), every other pair apart (S 0). Ties to the
  // lowest numbers merge 0 with 3 first; head 1 then joins at distance (1 + 0.1) / 2 = 0.55,
  // head 2 last: 0, 3, 1, 2. Merging 1 with 3 first (the last of the tied pairs) would give
  // 0, 1, 3, 2. (The orthogonal heads above tie everywhere but come out in index order either way.)
  MatrixD s = MatrixD::Identity(4, 4);
  s(0, 3) = s(3, 0) = s(1, 3) = s(3, 1) = 0.9;
  CHECK(plot_detail::cluster_order(s) == std::vector<int>{0, 3, 1, 2});
}

TEST_CASE("a heatmap in cluster order draws the permuted matrix with the heads' own numbers",
          "[plot]") {
  ModelReport model;
  model.label = "m";
  model.repr = "qk";
  LayerMetrics layer;
  layer.layer = 0;
  layer.heads = 4;
  layer.similarity = block_similarity({0, 1, 0, 1});
  model.layers.push_back(layer);
  PlotOptions options;
  options.cluster_heads = true;
  const std::string svg = plot_heatmap_svg(model, 0, options);
  // Cells in drawing order: row by row; the first row is head 0 against heads 0, 2, 1, 3.
  std::vector<std::string> titles;
  const std::regex title("<title>head (\\d+) · head (\\d+):");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), title);
       it != std::sregex_iterator() && titles.size() < 4; ++it)
    titles.push_back((*it)[1].str() + "-" + (*it)[2].str());
  CHECK(titles == std::vector<std::string>{"0-0", "0-2", "0-1", "0-3"});
  options.cluster_heads = false;
  const std::string plain = plot_heatmap_svg(model, 0, options);
  CHECK(plain.find("<title>head 0 · head 1:") < plain.find("<title>head 0 · head 2:"));
}

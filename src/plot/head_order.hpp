// Private to plot/: an order of a layer's heads that puts similar heads side by side, for the
// similarity heatmap (`plot --heatmap L --head-order cluster`).
#pragma once

#include <vector>

#include "kvrank/base/eigen.hpp"

namespace kvrank::plot_detail {

/// The leaf order of an average-linkage clustering of the heads on the distance 1 − S_ij
/// (S: a symmetric similarity matrix). Each merge joins the two closest clusters (ties: the
/// pair with the lowest head numbers) and keeps the one holding the lower head number first, so
/// the order depends only on S and clusters stay contiguous. Returns positions 0 … n−1.
std::vector<int> cluster_order(const MatrixD& similarity);

}  // namespace kvrank::plot_detail

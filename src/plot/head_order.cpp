// The clustered head order of the similarity heatmap (head_order.hpp).
#include "plot/head_order.hpp"

#include <algorithm>
#include <limits>

namespace kvrank::plot_detail {
namespace {

struct Cluster {
  std::vector<int> heads;  ///< in display order
  int lowest = 0;          ///< the lowest head number it holds: ties and order go by it
};

/// Average distance 1 − S between the heads of two clusters.
double average_distance(const MatrixD& similarity, const Cluster& a, const Cluster& b) {
  double sum = 0;
  for (int i : a.heads)
    for (int j : b.heads) sum += 1.0 - similarity(i, j);
  return sum / static_cast<double>(a.heads.size() * b.heads.size());
}

/// The two closest clusters (i < j in `clusters`, which stays ordered by lowest head).
std::pair<std::size_t, std::size_t> closest_pair(const MatrixD& similarity,
                                                 const std::vector<Cluster>& clusters) {
  std::pair<std::size_t, std::size_t> best{0, 1};
  double best_distance = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    for (std::size_t j = i + 1; j < clusters.size(); ++j) {
      const double distance = average_distance(similarity, clusters[i], clusters[j]);
      if (distance < best_distance) {  // strict: the first (lowest-numbered) pair wins ties
        best_distance = distance;
        best = {i, j};
      }
    }
  }
  return best;
}

}  // namespace

std::vector<int> cluster_order(const MatrixD& similarity) {
  std::vector<Cluster> clusters;
  for (int head = 0; head < static_cast<int>(similarity.rows()); ++head)
    clusters.push_back({{head}, head});
  while (clusters.size() > 1) {
    const auto [first, second] = closest_pair(similarity, clusters);
    Cluster& kept = clusters[first];  // the lower head number, so it comes first
    kept.heads.insert(kept.heads.end(), clusters[second].heads.begin(),
                      clusters[second].heads.end());
    clusters.erase(clusters.begin() + static_cast<std::ptrdiff_t>(second));
  }
  return clusters.empty() ? std::vector<int>{} : clusters.front().heads;
}

}  // namespace kvrank::plot_detail

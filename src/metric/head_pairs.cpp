// Redundant heads, named (head_pairs.hpp): read off the cosine Gram S of a layer.
#include "kvrank/metric/head_pairs.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>

#include "kvrank/metric/diversity.hpp"

namespace kvrank {
namespace {

/// The model's number of each row of S: every head but the zero heads, in order.
std::vector<int> heads_in_similarity(const LayerMetrics& layer) {
  std::vector<int> heads;
  const int total = static_cast<int>(layer.head_norm.size());
  for (int head = 0; head < total; ++head)
    if (std::find(layer.zero_heads.begin(), layer.zero_heads.end(), head) == layer.zero_heads.end())
      heads.push_back(head);
  return heads;
}

std::string cosine_text(double value, int decimals) {
  char buffer[64];
  if (decimals >= 0) {
    std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
    return buffer;
  }
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

}  // namespace

std::vector<HeadPair> most_similar_pairs(const LayerMetrics& layer, std::size_t count) {
  const std::vector<int> heads = heads_in_similarity(layer);
  const Index kept = std::min<Index>(layer.similarity.rows(), static_cast<Index>(heads.size()));
  std::vector<HeadPair> pairs;
  for (Index i = 0; i < kept; ++i)
    for (Index j = i + 1; j < kept; ++j)
      pairs.push_back({heads[static_cast<std::size_t>(i)], heads[static_cast<std::size_t>(j)],
                       layer.similarity(i, j)});
  const std::size_t keep = std::min(count, pairs.size());
  // Stable on the (first, second) order they were made in: equal cosines keep lower heads first.
  std::stable_sort(pairs.begin(), pairs.end(), [](const HeadPair& a, const HeadPair& b) {
    return a.similarity > b.similarity;
  });
  pairs.resize(keep);
  return pairs;
}

std::vector<NearestHead> nearest_heads(const LayerMetrics& layer) {
  const std::vector<int> heads = heads_in_similarity(layer);
  std::vector<NearestHead> nearest(layer.head_norm.size(),
                                   {-1, std::numeric_limits<double>::quiet_NaN()});
  const Index kept = std::min<Index>(layer.similarity.rows(), static_cast<Index>(heads.size()));
  for (Index i = 0; i < kept; ++i) {
    NearestHead& best = nearest[static_cast<std::size_t>(heads[static_cast<std::size_t>(i)])];
    for (Index j = 0; j < kept; ++j) {
      if (j == i || (best.head >= 0 && !(layer.similarity(i, j) > best.similarity))) continue;
      best = {heads[static_cast<std::size_t>(j)], layer.similarity(i, j)};
    }
  }
  return nearest;
}

void name_redundant_heads(LayerMetrics& layer, std::size_t count) {
  layer.similar_pairs = most_similar_pairs(layer, count);
  layer.nearest_heads = nearest_heads(layer);
}

std::string head_pairs_text(const std::vector<HeadPair>& pairs, int decimals) {
  std::string text;
  for (const HeadPair& pair : pairs)
    text += (text.empty() ? "" : " ") + std::to_string(pair.first) + "-" +
            std::to_string(pair.second) + ":" + cosine_text(pair.similarity, decimals);
  return text;
}

std::string nearest_heads_text(const std::vector<NearestHead>& nearest, int decimals) {
  std::string text;
  for (std::size_t head = 0; head < nearest.size(); ++head) {
    text += (text.empty() ? "" : " ") + std::to_string(head) + ">";
    text += nearest[head].head < 0 ? std::string("-")
                                   : std::to_string(nearest[head].head) + ":" +
                                         cosine_text(nearest[head].similarity, decimals);
  }
  return text;
}

}  // namespace kvrank

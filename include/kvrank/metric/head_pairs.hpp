// Redundant heads, named (`analyze --pairs K`): from a layer's cosine Gram S (diversity.hpp), the K
// most similar head pairs and each head's nearest neighbour, in the model's own head numbers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kvrank {

struct LayerMetrics;

/// The most pairs `--pairs` names per layer (a layer of H heads has H(H−1)/2).
inline constexpr int kMaxNamedPairs = 1000000;

/// Two heads (first < second, the model's numbers) and their cosine S_ij.
struct HeadPair {
  int first = 0;
  int second = 0;
  double similarity = 0;

  bool operator==(const HeadPair&) const = default;
};

/// A head's most similar other head; `head` −1 when it has none (a zero head, or the only head
/// kept), and then `similarity` is NaN.
struct NearestHead {
  int head = -1;
  double similarity = 0;
};

/// The `count` most similar pairs of the heads kept in `layer.similarity`, most similar first
/// (ties: the lower head numbers first); fewer when the layer has fewer pairs.
std::vector<HeadPair> most_similar_pairs(const LayerMetrics& layer, std::size_t count);

/// Each of the layer's heads (all of them, zero heads included: layer.head_norm's size), its
/// nearest other head by S (ties: the lower number).
std::vector<NearestHead> nearest_heads(const LayerMetrics& layer);

/// Fills layer.similar_pairs (`count` pairs) and layer.nearest_heads. Needs layer.similarity.
void name_redundant_heads(LayerMetrics& layer, std::size_t count);

/// "3-5:0.912 1-2:0.88": pairs as text (the CSV column and the table), each cosine with `decimals`
/// decimals, or −1: its shortest exact form.
std::string head_pairs_text(const std::vector<HeadPair>& pairs, int decimals);
/// "0>3:0.912 1>2:0.88 2>-": each head's nearest neighbour as text ("-": none), as above.
std::string nearest_heads_text(const std::vector<NearestHead>& nearest, int decimals);

}  // namespace kvrank

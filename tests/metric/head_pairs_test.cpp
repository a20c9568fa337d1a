// Tests of the named redundant heads (metric/head_pairs.hpp, `analyze --pairs K`): pairs in the
// model's head numbers around zero heads, their order and ties, nearest neighbours, the text forms.
#include "kvrank/metric/head_pairs.hpp"

#include <cmath>

#include "kvrank/metric/diversity.hpp"
#include "support/catch.hpp"

using namespace kvrank;

namespace {

/// A layer of 4 heads whose head 1 is zero: S covers heads 0, 2, 3.
LayerMetrics layer_with_a_zero_head() {
  LayerMetrics layer;
  layer.head_norm = {1.0, 0.0, 2.0, 3.0};
  layer.zero_heads = {1};
  layer.similarity.resize(3, 3);
  layer.similarity << 1.0, 0.2, 0.9,  //
      0.2, 1.0, 0.5,                  //
      0.9, 0.5, 1.0;
  return layer;
}

}  // namespace

TEST_CASE("head pairs: the most similar first, in the model's head numbers", "[pairs]") {
  const LayerMetrics layer = layer_with_a_zero_head();
  CHECK(most_similar_pairs(layer, 2) == std::vector<HeadPair>{{0, 3, 0.9}, {2, 3, 0.5}});
  CHECK(most_similar_pairs(layer, 10).size() == 3);  // only 3 pairs exist
  CHECK(most_similar_pairs(layer, 0).empty());
  CHECK(head_pairs_text(most_similar_pairs(layer, 2), 2) == "0-3:0.90 2-3:0.50");
}

TEST_CASE("head pairs: ties keep the lower heads first", "[pairs]") {
  LayerMetrics layer;
  layer.head_norm = {1, 1, 1};
  layer.similarity = MatrixD::Ones(3, 3);
  CHECK(most_similar_pairs(layer, 3) ==
        std::vector<HeadPair>{{0, 1, 1.0}, {0, 2, 1.0}, {1, 2, 1.0}});
  const std::vector<NearestHead> nearest = nearest_heads(layer);
  CHECK(nearest[0].head == 1);
  CHECK(nearest[1].head == 0);
  CHECK(nearest[2].head == 0);
}

TEST_CASE("head pairs: each head's nearest, none for a zero head or a lone head", "[pairs]") {
  LayerMetrics layer = layer_with_a_zero_head();
  name_redundant_heads(layer, 1);
  REQUIRE(layer.nearest_heads.size() == 4);
  CHECK(layer.nearest_heads[0].head == 3);
  CHECK(layer.nearest_heads[1].head == -1);
  CHECK(std::isnan(layer.nearest_heads[1].similarity));
  CHECK(layer.nearest_heads[2].head == 3);
  CHECK(layer.nearest_heads[3].head == 0);
  CHECK(layer.similar_pairs.size() == 1);
  CHECK(nearest_heads_text(layer.nearest_heads, 1) == "0>3:0.9 1>- 2>3:0.5 3>0:0.9");
  CHECK(nearest_heads_text(layer.nearest_heads, -1) == "0>3:0.9 1>- 2>3:0.5 3>0:0.9");

  LayerMetrics lone;
  lone.head_norm = {2.0};
  lone.similarity = MatrixD::Ones(1, 1);
  name_redundant_heads(lone, 3);
  CHECK(lone.similar_pairs.empty());
  CHECK(lone.nearest_heads.size() == 1);
  CHECK(lone.nearest_heads[0].head == -1);
}

// A check shared by the unit tests: two LayerMetrics equal field by field, exactly.
#pragma once

#include "kvrank/metric/diversity.hpp"
#include "support/catch.hpp"

namespace kvrank::test {

/// Every field of `a` and `b` equal, bit for bit (JSON round trips, the same products skipped or
/// not); the similarity matrices only `with_similarity` (else b's must be empty).
inline void require_same_layer(const LayerMetrics& a, const LayerMetrics& b, bool with_similarity) {
  CHECK(a.layer == b.layer);
  CHECK(a.heads == b.heads);
  CHECK(a.erank == b.erank);
  CHECK(a.erank_centered == b.erank_centered);
  CHECK(a.erank_pct == b.erank_pct);
  CHECK(a.erank_centered_pct == b.erank_centered_pct);
  CHECK(a.mean_similarity == b.mean_similarity);
  CHECK(a.pcs_90 == b.pcs_90);
  CHECK(a.eigenvalues == b.eigenvalues);
  CHECK(a.eigenvalues_centered == b.eigenvalues_centered);
  CHECK(a.head_erank == b.head_erank);
  CHECK(a.head_norm == b.head_norm);
  CHECK(a.zero_heads == b.zero_heads);
  if (with_similarity) {
    REQUIRE(a.similarity.rows() == b.similarity.rows());
    REQUIRE(a.similarity.cols() == b.similarity.cols());
    CHECK(a.similarity == b.similarity);
  } else {
    CHECK(b.similarity.size() == 0);
  }
}

}  // namespace kvrank::test

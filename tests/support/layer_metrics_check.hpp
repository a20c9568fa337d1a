// Checks shared by the unit tests: two LayerMetrics equal field by field, exactly or to a
// relative tolerance.
#pragma once

#include <algorithm>
#include <cmath>

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

/// |actual − expected| within `rel` of expected, or `abs`.
inline void check_close(double actual, double expected, double rel, double abs = 1e-9) {
  INFO("actual " << actual << " expected " << expected);
  CHECK(std::abs(actual - expected) <= std::max(abs, rel * std::abs(expected)));
}

/// Two layers' S-derived metrics equal to `rel` (their eigenvalues also to 1e-6 absolute).
inline void check_same_metrics(const LayerMetrics& a, const LayerMetrics& b, double rel) {
  CHECK(a.heads == b.heads);
  check_close(a.erank, b.erank, rel);
  check_close(a.erank_centered, b.erank_centered, rel);
  check_close(a.mean_similarity, b.mean_similarity, rel, 1e-6);
  CHECK(a.pcs_90 == b.pcs_90);
  REQUIRE(a.eigenvalues.size() == b.eigenvalues.size());
  for (size_t i = 0; i < a.eigenvalues.size(); ++i) {
    check_close(a.eigenvalues[i], b.eigenvalues[i], rel, 1e-6);
    check_close(a.eigenvalues_centered[i], b.eigenvalues_centered[i], rel, 1e-6);
  }
}

}  // namespace kvrank::test

// Rows of float32 values with a row stride past each row's end, for the tests of the SYRK kernels
// (double_syrk_kernel_test.cpp, float_syrk_kernel_test.cpp): the gap after each row holds NaN,
// which a read of it would spread into the result; and the exact sum of a pair of rows' products,
// against which a kernel's round-off is bounded.
#pragma once

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kvrank/base/eigen.hpp"

namespace kvrank::test {

/// A (rows × inner) row-major with row stride lda; the gap after each row holds NaN.
struct StridedRows {
  Index rows = 0;
  Index inner = 0;
  Index lda = 0;
  std::vector<float> values;
  float at(Index i, Index k) const { return values[static_cast<std::size_t>(i * lda + k)]; }
};

/// Normal values times `scale(row)`, with a few exact zeros.
template <typename Scale>
StridedRows random_rows(Index rows, Index inner, Index lda, std::mt19937& rng, Scale scale) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  StridedRows a{rows, inner, lda,
                std::vector<float>(static_cast<std::size_t>(std::max<Index>(rows * lda, 1)),
                                   std::numeric_limits<float>::quiet_NaN())};
  for (Index i = 0; i < rows; ++i) {
    for (Index k = 0; k < inner; ++k) {
      a.values[static_cast<std::size_t>(i * lda + k)] =
          (i + k) % 11 == 5 ? 0.0f : normal(rng) * scale(i);
    }
  }
  return a;
}

inline StridedRows random_rows(Index rows, Index inner, Index lda, std::mt19937& rng) {
  return random_rows(rows, inner, lda, rng, [](Index) { return 1.0f; });
}

/// Σ_k a_ik a_jk and Σ_k |a_ik a_jk| in long double (64 significant bits: a float32 product is
/// exact in it, each sum errs by at most 2⁻⁶⁴ a term).
struct ExactDot {
  long double sum = 0;
  long double magnitude = 0;
};

inline ExactDot exact_dot(const StridedRows& a, Index i, Index j) {
  ExactDot dot;
  for (Index k = 0; k < a.inner; ++k) {
    const long double product = static_cast<long double>(a.at(i, k)) * a.at(j, k);
    dot.sum += product;
    dot.magnitude += std::fabs(product);
  }
  return dot;
}

}  // namespace kvrank::test

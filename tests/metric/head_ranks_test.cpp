// head_erank through analyze_layer for head counts that take every route of the per-head
// eigenproblems (head_spectra.cpp: eight heads a call of the lane solver where the CPU has AVX-512,
// a remainder of 3 or more one more call, of 1 or 2 LAPACK head by head): 1, 2, 3, 8, 9, 11, 18
// heads, with zero heads among them. The reference forms each A_h = L_h R_hᵀ as a d × d matrix and
// takes its singular values by Eigen's Jacobi SVD: no Gram, no P·Q eigenproblem. The Grams are
// float32, so the two agree to about 1e-7; a head's value written to another head's slot, or a
// lane's result taken from its neighbour, is off by far more (random heads' eranks differ by 0.1).
#include <Eigen/SVD>
#include <cmath>
#include <random>
#include <vector>

#include "kvrank/metric/diversity.hpp"
#include "support/catch.hpp"
#include "support/random_factors.hpp"

using namespace kvrank;
using namespace kvrank::test;

namespace {

/// exp(entropy of σ/Σσ) of A = L Rᵀ, from its explicit singular values.
double explicit_erank(const MatrixD& l, const MatrixD& r) {
  const Eigen::VectorXd sigma = Eigen::JacobiSVD<MatrixD>(l * r.transpose()).singularValues();
  const double total = sigma.sum();
  double entropy = 0;
  for (const double s : sigma) {
    if (s > 0) entropy -= (s / total) * std::log(s / total);
  }
  return std::exp(entropy);
}

void check_head_eranks(Index heads, bool symmetric, const std::vector<Index>& zero_heads) {
  std::mt19937 rng(static_cast<unsigned>(100 + heads));
  Heads left = random_heads(heads, 48, 16, rng);
  for (const Index h : zero_heads) left[h].setZero();
  const Heads right = symmetric ? left : random_heads(heads, 48, 16, rng);
  HeadFactors factors = factors_of(left, right);
  factors.symmetric = symmetric;
  const LayerMetrics metrics = analyze_layer(factors);
  REQUIRE(metrics.head_erank.size() == static_cast<std::size_t>(heads));
  for (Index h = 0; h < heads; ++h) {
    INFO(heads << " heads, " << (symmetric ? "symmetric" : "L Rᵀ") << ", head " << h);
    const double expected = left[h].isZero() ? 0.0 : explicit_erank(left[h], right[h]);
    CHECK(std::abs(metrics.head_erank[h] - expected) <= 1e-6 * expected);
  }
}

}  // namespace

TEST_CASE("head_erank: every route of the per-head eigenproblems agrees with an explicit SVD",
          "[diversity]") {
  for (const Index heads : {1, 2, 3, 8, 9, 11, 18}) {
    check_head_eranks(heads, false, {});
    check_head_eranks(heads, true, {});
  }
}

TEST_CASE("head_erank: zero heads leave their slot 0 and the others in place", "[diversity]") {
  check_head_eranks(11, false, {0, 4});  // 9 heads left: 8 in the lanes, 1 by LAPACK
  check_head_eranks(18, false, {17});
  check_head_eranks(18, true, {3, 9, 10});
}

// Tests of lane_eigenvalues (src/metric/eigen_lanes.cpp): eight eigenproblems side by side, one in
// each double lane of a zmm (run as the ctest test unit.eigen_lanes where the CPU has AVX-512F, a
// visible skip elsewhere).
//
// The reference is a spectrum chosen in advance: with P = F Fᵀ (F random lower triangular with a
// positive diagonal) and Q = F⁻ᵀ V Λ Vᵀ F⁻¹ (V a random orthogonal matrix), P·Q is similar to
// V Λ Vᵀ, so its eigenvalues are Λ up to the rounding of forming Q. A backward-stable solver errs
// by a small multiple of n·ε·‖Fᵀ Q F‖ = n·ε·max|Λ|: the bound below is 4·n·ε·max|Λ|, where a
// dropped term of the reduction (a missed column of the congruence, a reflector applied to one
// triangle only) moves the eigenvalues by O(1)·max|Λ|. LAPACK's dsygv (congruent_eigenvalues) is
// held to the same bound, beside it.
#include "metric/eigen_lanes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "metric/blas.hpp"
#include "support/catch.hpp"

using namespace kvrank;
using detail::EigenProblem;
using detail::lane_eigenvalues;

namespace {

constexpr double kEps = std::numeric_limits<double>::epsilon();

/// A problem whose eigenvalues are `spectrum`, from `seed`; with `congruent` false, Q is absent
/// and P itself is V Λ Vᵀ.
struct KnownProblem {
  MatrixD p, q;
  std::vector<double> spectrum;  // ascending

  KnownProblem(std::vector<double> values, unsigned seed, bool congruent = true) {
    const auto n = static_cast<Index>(values.size());
    std::mt19937_64 random(seed);
    std::normal_distribution<double> normal;
    MatrixD g(n, n);
    for (Index j = 0; j < n; ++j)
      for (Index i = 0; i < n; ++i) g(i, j) = normal(random);
    const MatrixD v = Eigen::HouseholderQR<MatrixD>(g).householderQ();
    const MatrixD inner = v * VectorD::Map(values.data(), n).asDiagonal() * v.transpose();
    if (congruent) {
      MatrixD f = MatrixD::Zero(n, n);
      for (Index j = 0; j < n; ++j) {
        f(j, j) = 1.0 + std::abs(normal(random));
        for (Index i = j + 1; i < n; ++i) f(i, j) = 0.3 * normal(random);
      }
      p = f * f.transpose();
      const MatrixD f_inverse = f.triangularView<Eigen::Lower>().solve(MatrixD::Identity(n, n));
      q = f_inverse.transpose() * inner * f_inverse;
      q = (0.5 * (q + q.transpose())).eval();
    } else {
      p = inner;
    }
    std::sort(values.begin(), values.end());
    spectrum = std::move(values);
  }

  EigenProblem problem() const { return {&p, q.size() ? &q : nullptr}; }
};

/// n values from 1 down to 1e-6 geometrically, with `zeros` of them 0.
std::vector<double> graded_values(Index n, Index zeros = 0) {
  std::vector<double> values(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i)
    values[i] = i < zeros ? 0.0 : std::pow(1e-6, static_cast<double>(i) / static_cast<double>(n));
  return values;
}

double largest_error(const std::vector<double>& computed, const std::vector<double>& expected) {
  REQUIRE(computed.size() == expected.size());
  double error = 0;
  for (std::size_t i = 0; i < computed.size(); ++i)
    error = std::max(error, std::abs(computed[i] - expected[i]));
  return error;
}

double bound(const KnownProblem& known) {
  double largest = 0;
  for (double value : known.spectrum) largest = std::max(largest, std::abs(value));
  return 4.0 * static_cast<double>(known.spectrum.size()) * kEps * largest;
}

std::vector<std::optional<std::vector<double>>> solve(const std::vector<KnownProblem>& knowns) {
  std::vector<EigenProblem> problems;
  for (const KnownProblem& known : knowns) problems.push_back(known.problem());
  return lane_eigenvalues(problems);
}

}  // namespace

TEST_CASE("eigen lanes: this CPU runs the solver", "[.eigen_lanes_probe]") {
  REQUIRE(detail::eigen_lanes_supported());
}

TEST_CASE("eigen lanes: known spectra within 4nε of the largest, as LAPACK's dsygv",
          "[.eigen_lanes]") {
  for (const Index n : {1, 2, 3, 5, 6, 7, 9, 13, 30, 64, 67, 128, 130, 192}) {
    for (const int count : {1, 5, 8}) {
      std::vector<KnownProblem> knowns;
      for (int k = 0; k < count; ++k)
        knowns.emplace_back(graded_values(n, k % 3 == 2 ? n / 4 : 0), 100 * n + k);
      const auto results = solve(knowns);
      REQUIRE(results.size() == knowns.size());
      for (int k = 0; k < count; ++k) {
        INFO("order " << n << ", lane " << k << " of " << count);
        REQUIRE(results[k]);
        CHECK(largest_error(*results[k], knowns[k].spectrum) <= bound(knowns[k]));
        const auto lapack = detail::congruent_eigenvalues(knowns[k].p, knowns[k].q);
        REQUIRE(lapack);
        CHECK(largest_error(*lapack, knowns[k].spectrum) <= bound(knowns[k]));
      }
    }
  }
}

TEST_CASE("eigen lanes: symmetric problems (no Q), signed eigenvalues", "[.eigen_lanes]") {
  for (const Index n : {1, 4, 5, 6, 7, 9, 66, 128}) {
    std::vector<KnownProblem> knowns;
    for (int k = 0; k < 8; ++k) {
      std::vector<double> values = graded_values(n);
      for (Index i = 0; i < n; i += 3) values[i] = -values[i];
      knowns.emplace_back(values, 7 * n + k, false);
    }
    const auto results = solve(knowns);
    for (int k = 0; k < 8; ++k) {
      INFO("order " << n << ", lane " << k);
      REQUIRE(results[k]);
      CHECK(largest_error(*results[k], knowns[k].spectrum) <= bound(knowns[k]));
    }
  }
}

TEST_CASE("eigen lanes: a lane's result does not depend on its neighbours", "[.eigen_lanes]") {
  std::vector<KnownProblem> knowns;
  for (int k = 0; k < 8; ++k) knowns.emplace_back(graded_values(64, k), 900 + k);
  const auto together = solve(knowns);
  const auto alone = solve({knowns[5]});
  REQUIRE(together[5]);
  REQUIRE(alone[0]);
  CHECK(*together[5] == *alone[0]);
}

TEST_CASE("eigen lanes: powers of two scale the eigenvalues exactly, far past 1e±150",
          "[.eigen_lanes]") {
  const KnownProblem known(graded_values(32), 31);
  KnownProblem scaled = known;
  scaled.p *= std::ldexp(1.0, 600);
  scaled.q *= std::ldexp(1.0, -700);
  const auto results = solve({known, scaled});
  REQUIRE(results[0]);
  REQUIRE(results[1]);
  std::vector<double> expected = *results[0];
  for (double& value : expected) value = std::ldexp(value, -100);
  CHECK(*results[1] == expected);
}

TEST_CASE("eigen lanes: a diagonal problem gives its diagonal exactly", "[.eigen_lanes]") {
  const Index n = 9;
  MatrixD p = MatrixD::Identity(n, n);
  MatrixD q = MatrixD::Zero(n, n);
  std::vector<double> diagonal;
  for (Index i = 0; i < n; ++i)
    diagonal.push_back(q(i, i) = std::ldexp(1.0 + static_cast<double>(i), -static_cast<int>(i)));
  const auto results = lane_eigenvalues(std::vector<EigenProblem>{{&p, &q}});
  REQUIRE(results[0]);
  std::sort(diagonal.begin(), diagonal.end());
  CHECK(*results[0] == diagonal);
}

TEST_CASE("eigen lanes: a P not positive definite or an entry not finite fails its lane alone",
          "[.eigen_lanes]") {
  std::vector<KnownProblem> knowns;
  for (int k = 0; k < 6; ++k) knowns.emplace_back(graded_values(16), 40 + k);
  knowns[1].p(3, 3) = -1.0;                                      // not positive definite
  knowns[2].p = MatrixD::Zero(16, 16);                           // singular
  knowns[3].q(7, 2) = std::numeric_limits<double>::quiet_NaN();  // lower triangle: read
  knowns[4].p(15, 0) = std::numeric_limits<double>::infinity();
  const auto results = solve(knowns);
  CHECK_FALSE(results[1]);
  CHECK_FALSE(results[2]);
  CHECK_FALSE(results[3]);
  CHECK_FALSE(results[4]);
  for (const int k : {0, 5}) {
    REQUIRE(results[k]);
    CHECK(largest_error(*results[k], knowns[k].spectrum) <= bound(knowns[k]));
  }
}

TEST_CASE("eigen lanes: a rank-one Q gives one eigenvalue and round-off", "[.eigen_lanes]") {
  const Index n = 128;
  std::vector<double> values(n, 0.0);
  values[17] = 3.5;
  const KnownProblem known(values, 5);
  const auto results = solve({known});
  REQUIRE(results[0]);
  CHECK(largest_error(*results[0], known.spectrum) <= bound(known));
}

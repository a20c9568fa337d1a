// Tests of syrk_in_double (src/metric/blas.hpp) and kvrank's AVX-512 kernel behind it
// (src/metric/double_syrk_kernel.cpp) on awkward shapes: rows not a multiple of the 8-row panels or
// of the 24-row register blocks, a depth of 1 or 3, a row stride past the row's end (its gap full
// of NaN, which a read of it would spread), values of 1e±30.
//
// The bound: every product of two float32 values is exact in double (24 + 24 significant bits ≤
// 53), so an entry is a sum of n exact terms p_k, and a sum of n terms in double, in any order,
// errs by at most (n − 1)·u·Σ|p_k|, u = 2⁻⁵³ (Jeannerod & Rump, "Improved error bounds for inner
// products in floating-point arithmetic", 2013). The long double reference (64 significant bits)
// errs by (n − 1)·2⁻⁶⁴·Σ|p_k| at most: the two together bound |computed − reference|. A product
// left out (a depth step dropped) moves an entry by about Σ|p_k|/n, far past that bound.
//
// The kernel sums each entry as one FMA chain in depth order: the very bits of the naive loop,
// which the tests tagged [.double_syrk] require of it, and of syrk_in_double on the calling thread
// alone (run as the ctest test unit.double_syrk_kernel where the CPU has AVX-512F, a visible skip
// elsewhere). A kernel that drops a depth step, the mirror's last column, a panel's last row in
// the depth's tail or the diagonal's register block fails both the bound and the bit tests.
#include "metric/double_syrk_kernel.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kvrank/metric/compute.hpp"
#include "metric/blas.hpp"
#include "support/catch.hpp"
#include "support/strided_rows.hpp"

using namespace kvrank;
using detail::DoubleSyrkPath;
using test::random_rows;
using test::StridedRows;

namespace {

MatrixD run(DoubleSyrkPath path, const StridedRows& a) {
  return detail::syrk_in_double(path, a.rows, a.inner, a.values.data(), a.lda);
}

MatrixD run_kernel(const StridedRows& a) {
  MatrixD out = MatrixD::Constant(a.rows, a.rows, std::numeric_limits<double>::quiet_NaN());
  detail::double_syrk_kernel(a.rows, a.inner, a.values.data(), a.lda, out.data());
  return out;
}

/// The naive loop: each entry one chain over the depth in order, in double.
MatrixD in_order_sums(const StridedRows& a) {
  MatrixD out(a.rows, a.rows);
  for (Index i = 0; i < a.rows; ++i) {
    for (Index j = 0; j < a.rows; ++j) {
      double sum = 0;
      for (Index k = 0; k < a.inner; ++k)
        sum = std::fma(static_cast<double>(a.at(i, k)), static_cast<double>(a.at(j, k)), sum);
      out(i, j) = sum;
    }
  }
  return out;
}

bool same_bits(const MatrixD& x, const MatrixD& y) {
  if (x.rows() != y.rows() || x.cols() != y.cols()) return false;
  for (Index i = 0; i < x.size(); ++i) {
    if (std::bit_cast<std::uint64_t>(x.data()[i]) != std::bit_cast<std::uint64_t>(y.data()[i]))
      return false;
  }
  return true;
}

bool exactly_symmetric(const MatrixD& c) { return same_bits(c, c.transpose()); }

/// The largest |c_ij − exact_ij| / ((n − 1)(2⁻⁵³ + 2⁻⁶⁴) Σ_k |a_ik a_jk|) over the entries, exact
/// in long double (see the top): at most 1 for any order of summation in double.
double worst_bound_ratio(const MatrixD& c, const StridedRows& a) {
  const long double unit = std::ldexp(1.0L, -53) + std::ldexp(1.0L, -64);
  double worst = 0;
  for (Index i = 0; i < a.rows; ++i) {
    for (Index j = 0; j < a.rows; ++j) {
      const test::ExactDot exact = test::exact_dot(a, i, j);
      const long double error = std::fabs(static_cast<long double>(c(i, j)) - exact.sum);
      const long double bound = static_cast<long double>(a.inner - 1) * unit * exact.magnitude;
      if (error > 0)
        worst = std::max(worst, static_cast<double>(bound > 0 ? error / bound : 1e300));
    }
  }
  return worst;
}

const Index kRows[] = {1, 7, 8, 9, 23, 24, 25, 192};
const Index kInner[] = {1, 3, 576, 1536};

/// The row stride of a shape: contiguous for some, 5 past the row's end for others.
Index stride_for(Index rows, Index inner) { return (rows + inner) % 2 == 0 ? inner : inner + 5; }

}  // namespace

TEST_CASE("double syrk: this CPU runs kvrank's AVX-512 kernel", "[.double_syrk_probe]") {
  REQUIRE(detail::double_syrk_kernel_supported());
}

TEST_CASE("double syrk: within the bound of double sums of a long double reference, symmetric",
          "[syrk_in_double]") {
  std::mt19937 rng(40);
  for (const Index rows : kRows) {
    for (const Index inner : kInner) {
      INFO(rows << " × " << inner);
      const StridedRows a = random_rows(rows, inner, stride_for(rows, inner), rng);
      for (const DoubleSyrkPath path : {DoubleSyrkPath::kernel, DoubleSyrkPath::blas}) {
        const MatrixD c = run(path, a);
        CHECK(exactly_symmetric(c));
        CHECK(worst_bound_ratio(c, a) <= 1.0);
      }
    }
  }
}

TEST_CASE("double syrk: rows of 1e30 and 1e-30 overflow nothing", "[syrk_in_double]") {
  std::mt19937 rng(41);
  // Products of 1e60, 1e-60 and 1: beyond float32's range, well inside double's.
  const StridedRows a = random_rows(25, 576, 580, rng, [](Index i) {
    return i % 3 == 0 ? 1e30f : i % 3 == 1 ? 1e-30f : 1.0f;
  });
  for (const DoubleSyrkPath path : {DoubleSyrkPath::kernel, DoubleSyrkPath::blas}) {
    const MatrixD c = run(path, a);
    CHECK(c.allFinite());
    CHECK(c(0, 0) > 1e61);
    CHECK(c(1, 1) > 0);
    CHECK(c(1, 1) < 1e-57);
    CHECK(exactly_symmetric(c));
    CHECK(worst_bound_ratio(c, a) <= 1.0);
  }
}

TEST_CASE("double syrk: empty shapes give zeros", "[syrk_in_double]") {
  const float none[1] = {0.0f};
  CHECK(detail::syrk_in_double(0, 5, none, 5).size() == 0);
  CHECK(detail::syrk_in_double(3, 0, none, 1) == MatrixD::Zero(3, 3));
}

TEST_CASE("double syrk: the kernel's entries are the in-order double sums, bit for bit",
          "[.double_syrk]") {
  REQUIRE(detail::double_syrk_kernel_supported());
  std::mt19937 rng(42);
  for (const Index rows : kRows) {
    for (const Index inner : kInner) {
      INFO(rows << " × " << inner);
      const StridedRows a = random_rows(rows, inner, stride_for(rows, inner), rng);
      CHECK(same_bits(run_kernel(a), in_order_sums(a)));
    }
  }
  const StridedRows scaled =
      random_rows(25, 576, 576, rng, [](Index i) { return i % 2 == 0 ? 1e30f : 1e-30f; });
  CHECK(same_bits(run_kernel(scaled), in_order_sums(scaled)));
  // Panels of 70 MB, freed after the call (over the 32 MB a thread keeps), then a small product.
  const StridedRows large = random_rows(9, 550'000, 550'000, rng);
  CHECK(same_bits(run_kernel(large), in_order_sums(large)));
  const StridedRows small = random_rows(23, 31, 33, rng);
  CHECK(same_bits(run_kernel(small), in_order_sums(small)));
}

TEST_CASE("double syrk: syrk_in_double takes the kernel, which the BLAS's order tells apart",
          "[.double_syrk]") {
  REQUIRE(detail::double_syrk_kernel_supported());
  std::mt19937 rng(43);
  const StridedRows a = random_rows(192, 1536, 1536, rng);
  const MatrixD sums = in_order_sums(a);
  set_compute_threads(1);  // the calling thread alone: the kernel
  CHECK(detail::syrk_in_double_path() == DoubleSyrkPath::kernel);
  CHECK(same_bits(detail::syrk_in_double(a.rows, a.inner, a.values.data(), a.lda), sums));
  // The BLAS path sums in another order (its blocks of the depth): other bits, the same bound.
  // Were they the same bits, the check above could not tell which path ran.
  const MatrixD blas = run(DoubleSyrkPath::blas, a);
  CHECK_FALSE(same_bits(blas, sums));
  CHECK(worst_bound_ratio(blas, a) <= 1.0);
#ifdef _OPENMP
  // From serial code with two threads at hand the kernel runs over both (one column panel of the
  // product each), inside a parallel loop (the contraction's over heads) on the calling thread:
  // the same bits either way. With the BLAS's split of the depth, diff's last digits depended on
  // the threads.
  set_compute_threads(2);
  CHECK(detail::syrk_in_double_path() == DoubleSyrkPath::kernel);
  CHECK(same_bits(detail::syrk_in_double(a.rows, a.inner, a.values.data(), a.lda), sums));
  const StridedRows stacked = random_rows(400, 600, 603, rng);  // a stack of two bases
  const MatrixD stacked_sums = in_order_sums(stacked);
  CHECK(same_bits(
      detail::syrk_in_double(stacked.rows, stacked.inner, stacked.values.data(), stacked.lda),
      stacked_sums));
  MatrixD inside;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    inside = detail::syrk_in_double(a.rows, a.inner, a.values.data(), a.lda);
  }
  CHECK(same_bits(inside, sums));
#endif
  set_compute_threads(0);
}

TEST_CASE("double syrk: threads calling the kernel at once get each their own result",
          "[.double_syrk]") {
  REQUIRE(detail::double_syrk_kernel_supported());
  std::mt19937 rng(44);
  std::vector<StridedRows> heads;
  for (Index h = 0; h < 8; ++h) heads.push_back(random_rows(9 + 23 * h, 300 + h, 301 + h, rng));
  std::vector<MatrixD> together(heads.size());
  const auto count = static_cast<std::ptrdiff_t>(heads.size());
#pragma omp parallel for schedule(dynamic) num_threads(2)
  for (std::ptrdiff_t h = 0; h < count; ++h) together[h] = run_kernel(heads[h]);
  for (std::size_t h = 0; h < heads.size(); ++h)
    CHECK(same_bits(together[h], run_kernel(heads[h])));
}

// Tests of kvrank's AVX-512 float32 kernel for the upper triangle of A·Aᵀ of few rows over a long
// inner dimension (src/metric/float_syrk_kernel.cpp) and of syrk_double taking it (blas.hpp), on
// awkward shapes: rows not a multiple of the 4-row register blocks, a depth of 0, 1, 15 or 17
// (a vector's tail), of 1024 and 1025 (a column chunk's edge) and of several chunks, a row stride
// past the row's end (its gap full of NaN, which a read of it would spread).
//
// The bound: a product of two float32 values is exact before the FMA rounds it into its lane's
// sum, so a product reaches C through at most m roundings: one per FMA of its lane's chain in its
// chunk (⌈1024/16⌉ = 64), four in the tree that adds the 16 lanes, one per later chunk added to
// C. In any such order |computed − exact| ≤ γ_m Σ_k |a_ik a_jk|, γ_m = m·u / (1 − m·u), u = 2⁻²⁴
// (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1); the exact sums are taken in
// long double, whose own error (2⁻⁶⁴ a term) is far below it. A column left out moves an entry by
// about Σ|a_ik a_jk| / inner, past the bound for these depths.
//
// Run as the ctest test unit.float_syrk_kernel where the CPU has AVX-512F, a visible skip
// elsewhere.
#include "metric/float_syrk_kernel.hpp"

#include <cmath>
#include <random>
#include <vector>

#include "metric/blas.hpp"
#include "support/catch.hpp"
#include "support/strided_rows.hpp"

using namespace kvrank;
using test::random_rows;
using test::StridedRows;

namespace {

/// The kernel's C, its strict lower triangle filled with 42 beforehand.
MatrixF kernel_upper(const StridedRows& a) {
  MatrixF c = MatrixF::Constant(a.rows, a.rows, 42.0f);
  detail::float_syrk_kernel(a.rows, a.inner, a.values.data(), a.lda, c.data(), a.rows);
  return c;
}

/// The most roundings a product passes through on its way to C (see the top).
Index roundings(Index inner) {
  constexpr Index kChunk = 1024;
  const Index chunks = std::max<Index>(1, (inner + kChunk - 1) / kChunk);
  return std::min<Index>(inner, kChunk) / 16 + 1 + 4 + (chunks - 1);
}

/// The largest |c_ij − exact_ij| / (γ_m Σ_k |a_ik a_jk|) over the upper triangle: at most 1.
double worst_bound_ratio(const MatrixF& c, const StridedRows& a) {
  const long double u = std::ldexp(1.0L, -24);
  const long double m = static_cast<long double>(roundings(a.inner));
  const long double gamma = m * u / (1 - m * u);
  double worst = 0;
  for (Index j = 0; j < a.rows; ++j) {
    for (Index i = 0; i <= j; ++i) {
      const test::ExactDot exact = test::exact_dot(a, i, j);
      const long double error = std::fabs(static_cast<long double>(c(i, j)) - exact.sum);
      if (error > 0)
        worst = std::max(worst, exact.magnitude > 0
                                    ? static_cast<double>(error / (gamma * exact.magnitude))
                                    : 1e300);
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("float syrk: this CPU runs kvrank's AVX-512 kernel", "[.float_syrk_probe]") {
  REQUIRE(detail::float_syrk_kernel_supported());
}

TEST_CASE("float syrk: the upper triangle within float32's bound, the lower one untouched",
          "[.float_syrk]") {
  REQUIRE(detail::float_syrk_kernel_supported());
  std::mt19937 rng(50);
  for (const Index rows : {1, 3, 4, 5, 8, 13, 130}) {
    for (const Index inner : {0, 1, 15, 16, 17, 1024, 1025, 2500}) {
      INFO(rows << " × " << inner);
      const StridedRows a = random_rows(rows, inner, inner + (rows % 2 == 0 ? 0 : 7), rng);
      const MatrixF c = kernel_upper(a);
      CHECK(c.triangularView<Eigen::Upper>().toDenseMatrix().allFinite());
      CHECK(worst_bound_ratio(c, a) <= 1.0);
      for (Index j = 0; j < rows; ++j)
        for (Index i = j + 1; i < rows; ++i) CHECK(c(i, j) == 42.0f);
    }
  }
}

TEST_CASE("float syrk: a column dropped from a chunk is past the bound", "[.float_syrk]") {
  // The bound's own check: the same rows with one column zeroed, against the full rows' sums, is
  // out of it (so the bound above can tell a kernel that skips a column).
  REQUIRE(detail::float_syrk_kernel_supported());
  std::mt19937 rng(51);
  const StridedRows a = random_rows(6, 1025, 1025, rng);
  StridedRows dropped = a;
  for (Index i = 0; i < a.rows; ++i) dropped.values[static_cast<std::size_t>(i * a.lda + 1024)] = 0;
  CHECK(worst_bound_ratio(kernel_upper(dropped), a) > 1.0);
}

TEST_CASE("float syrk: syrk_double's slices take the kernel, which the BLAS's order tells apart",
          "[.float_syrk]") {
  REQUIRE(detail::float_syrk_kernel_supported());
  // 16 rows over 16 000 columns: one slice (the shape's own count), on the calling thread.
  std::mt19937 rng(52);
  const StridedRows a = random_rows(16, 16'000, 16'000, rng);
  MatrixD want = kernel_upper(a).cast<double>();
  want.triangularView<Eigen::StrictlyLower>() = want.transpose();
  // Whatever runs the other float32 products (the BLAS, or oneDNN under onednn-f32).
  for (const auto kernels : {detail::FloatKernels::blas, detail::FloatKernels::onednn})
    CHECK(detail::syrk_double(kernels, a.rows, a.inner, a.values.data(), a.lda) == want);
  // OpenBLAS's SSYRK sums in another order: other bits. Were they the same bits, the checks above
  // could not tell which ran.
  MatrixF blas = MatrixF::Constant(a.rows, a.rows, 42.0f);
  detail::syrk_upper(detail::FloatKernels::blas, a.rows, a.inner, a.values.data(), a.lda,
                     blas.data(), a.rows);
  CHECK(blas.triangularView<Eigen::Upper>().toDenseMatrix() !=
        kernel_upper(a).triangularView<Eigen::Upper>().toDenseMatrix());
}

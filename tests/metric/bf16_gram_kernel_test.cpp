// Tests of kvrank's own AVX512-BF16 Gram kernel (src/metric/bf16_gram_kernel.cpp), called
// directly: its upper triangle against the Gram in double on bases of awkward sizes (rows not a
// multiple of its 16-row panels, 8 × 48 register blocks or 256 × 288 thread blocks, depths not a
// multiple of a pair, of 32 or of the 256-deep slice, a single row or column), bit for bit against
// oneDNN's bf16 Gram (the same float32 sums; to round-off where oneDNN has AMX), the same bits on 1
// and 2 threads, a basis of other values refused, and two Grams formed together (one side as a
// checkpoint stores it) with each one's bits. Tagged [.bf16_kernel]: run as the ctest test
// unit.bf16_gram_kernel where the CPU has AVX512-BF16 (tests/CMakeLists.txt), a visible skip
// elsewhere.
#include "metric/bf16_gram_kernel.hpp"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "io/safetensors_writer.hpp"
#include "kvrank/io/dtype.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "support/catch.hpp"

using namespace kvrank;

namespace {

/// Random normal rows rounded to bfloat16, with a few exact zeros and large and small magnitudes.
RowMatrixF bf16_basis(Index rows, Index cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  RowMatrixF basis(rows, cols);
  for (Index i = 0; i < basis.size(); ++i) {
    const float value = i % 7 == 3 ? 0.0f : std::ldexp(normal(rng), i % 5 == 0 ? exponent(rng) : 0);
    basis.data()[i] = bf16_to_f32(f32_to_bf16(value));
  }
  return basis;
}

/// The kernel's Gram into a matrix first filled with NaN (to see which entries it writes).
MatrixF kernel_gram(const RowMatrixF& basis) {
  MatrixF gram =
      MatrixF::Constant(basis.rows(), basis.rows(), std::numeric_limits<float>::quiet_NaN());
  REQUIRE(detail::bf16_kernel_gram_upper(basis, gram));
  return gram;
}

bool same_upper_bits(const MatrixF& a, const MatrixF& b) {
  for (Index j = 0; j < a.cols(); ++j) {
    for (Index i = 0; i <= j; ++i) {
      if (std::bit_cast<std::uint32_t>(a(i, j)) != std::bit_cast<std::uint32_t>(b(i, j)))
        return false;
    }
  }
  return true;
}

const std::pair<Index, Index> kAwkwardShapes[] = {
    {1, 1},    {1, 9},   {5, 3},     {15, 31},   {16, 32},   {17, 33},  {47, 255},
    {49, 257}, {300, 1}, {290, 513}, {600, 200}, {545, 767}, {64, 1024}};

}  // namespace

TEST_CASE("bf16 kernel: this CPU runs kvrank's AVX512-BF16 kernel", "[.bf16_kernel_probe]") {
  REQUIRE(detail::bf16_kernel_supported());
}

TEST_CASE("bf16 kernel: the upper triangle equals the Gram in double to float32 round-off",
          "[.bf16_kernel]") {
  REQUIRE(detail::bf16_kernel_supported());
  std::mt19937 rng(40);
  for (const auto& [m, d] : kAwkwardShapes) {
    INFO("basis " << m << " × " << d);
    const RowMatrixF basis = bf16_basis(m, d, rng);
    const MatrixF gram = kernel_gram(basis);
    const MatrixD exact = basis.cast<double>() * basis.cast<double>().transpose();
    double worst = 0;
    for (Index j = 0; j < m; ++j) {
      for (Index i = 0; i <= j; ++i) {
        const double scale = std::sqrt(exact(i, i) * exact(j, j));
        const double error = std::abs(gram(i, j) - exact(i, j));
        worst = std::max(worst, scale > 0 ? error / scale : error);
      }
      // Below the diagonal: untouched, or the entry's true value (the mirror's very bits).
      for (Index i = j + 1; i < m; ++i) {
        if (!std::isnan(gram(i, j))) CHECK(gram(i, j) == gram(j, i));
      }
    }
    // Slices of 256 summed in float32: a few units of 2⁻²⁴ of the entries' scale.
    CHECK(worst <= 1e-6);
  }
}

TEST_CASE("bf16 kernel: the same bits as oneDNN's bf16 Gram, on 1 and 2 threads",
          "[.bf16_kernel]") {
  REQUIRE(detail::bf16_kernel_supported());
  std::mt19937 rng(41);
  const GramBackend saved = gram_backend();
  for (const auto& [m, d] : kAwkwardShapes) {
    INFO("basis " << m << " × " << d);
    const RowMatrixF basis = bf16_basis(m, d, rng);
    set_compute_threads(1);
    const MatrixF one_thread = kernel_gram(basis);
    set_compute_threads(2);
    CHECK(same_upper_bits(kernel_gram(basis), one_thread));
    if (bf16_gram_supported()) {
      // oneDNN's AVX512-BF16 kernel sums the same float32 chains in the same order: the same
      // bits. Its AMX kernel (where kvrank's own is not used) sums in another order: round-off.
      set_gram_backend(GramBackend::bf16);
      const bool same_order = bf16_grams_on_own_kernel();
      set_gram_backend(GramBackend::bf16_onednn);
      MatrixF onednn(m, m);
      REQUIRE(bf16_gram_upper(basis, onednn));
      if (same_order) {
        CHECK(same_upper_bits(onednn, one_thread));
      } else {
        CHECK((onednn - one_thread).triangularView<Eigen::Upper>().toDenseMatrix().norm() <=
              1e-6 * one_thread.triangularView<Eigen::Upper>().toDenseMatrix().norm());
      }
    }
  }
  set_compute_threads(0);
  set_gram_backend(saved);
}

TEST_CASE("bf16 kernel: a basis with a value that is not a bfloat16 is refused, untouched",
          "[.bf16_kernel]") {
  REQUIRE(detail::bf16_kernel_supported());
  std::mt19937 rng(42);
  for (const auto& [row, col] : {std::pair<Index, Index>{0, 5}, {40, 0}, {299, 199}}) {
    RowMatrixF basis = bf16_basis(300, 200, rng);
    basis(row, col) = 1.0f + 0x1p-20f;  // a float32 with a non-zero low half
    MatrixF gram = MatrixF::Constant(300, 300, 7.0f);
    CHECK_FALSE(detail::bf16_kernel_gram_upper(basis, gram));
    CHECK((gram.array() == 7.0f).all());
  }
}

TEST_CASE("bf16 kernel: subnormal bf16 values count as zeros, as documented", "[.bf16_kernel]") {
  REQUIRE(detail::bf16_kernel_supported());
  std::mt19937 rng(43);
  RowMatrixF basis = bf16_basis(20, 70, rng);
  basis.row(1) *= 0x1p60f;  // large enough that a subnormal's product with them would show
  RowMatrixF zeroed = basis;
  for (Index k = 0; k < basis.cols(); ++k) {  // row 0: subnormal bf16s, |x| from 9.2e-41 to 1.2e-38
    const auto bits = static_cast<std::uint32_t>(((k * 37) % 0x7F + 1) << 16);
    basis(0, k) = std::bit_cast<float>(bits | (k % 2 == 0 ? 0x80000000u : 0u));
    zeroed(0, k) = 0.0f;
  }
  const MatrixF gram = kernel_gram(basis);
  CHECK(gram(0, 0) == 0.0f);
  CHECK(gram(0, 1) == 0.0f);  // 2⁻¹³³ · 2⁶⁰ and more, were they not zeros
  CHECK(same_upper_bits(gram, kernel_gram(zeroed)));
}

TEST_CASE("bf16 kernel: two Grams formed together have each one's bits, on 1 and 2 threads",
          "[.bf16_kernel]") {
  REQUIRE(detail::bf16_kernel_supported());
  std::mt19937 rng(44);
  const std::pair<Index, Index> pairs[][2] = {{{290, 513}, {300, 513}},
                                              {{64, 1024}, {545, 1024}},  // one side ends early
                                              {{1, 1}, {17, 1}}};
  for (const auto& [left_shape, right_shape] : pairs) {
    INFO(left_shape.first << " and " << right_shape.first << " rows");
    const RowMatrixF left = bf16_basis(left_shape.first, left_shape.second, rng);
    const RowMatrixF right = bf16_basis(right_shape.first, right_shape.second, rng);
    // The right side as a checkpoint stores it: its bf16 bits.
    std::vector<std::byte> bytes(static_cast<std::size_t>(right.size()) * 2);
    for (Index i = 0; i < right.size(); ++i) {
      const std::uint16_t bits = f32_to_bf16(right.data()[i]);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    }
    const StoredBf16Rows stored{bytes, right.rows(), right.cols(), {}, {}};
    for (int threads : {1, 2}) {
      set_compute_threads(threads);
      MatrixF left_gram = MatrixF::Zero(left.rows(), left.rows());
      MatrixF right_gram = MatrixF::Zero(right.rows(), right.rows());
      REQUIRE(detail::bf16_kernel_gram_pair({&left, nullptr, &left_gram},
                                            {nullptr, &stored, &right_gram}));
      CHECK(same_upper_bits(left_gram, kernel_gram(left)));
      CHECK(same_upper_bits(right_gram, kernel_gram(right)));
    }
  }
  // A float32 side with a value that is not a bf16: refused (the caller forms them one by one).
  RowMatrixF off = bf16_basis(40, 64, rng);
  off(39, 63) = 1.0f + 0x1p-20f;
  const RowMatrixF plain = bf16_basis(40, 64, rng);
  MatrixF a(40, 40);
  MatrixF b(40, 40);
  CHECK_FALSE(detail::bf16_kernel_gram_pair({&plain, nullptr, &a}, {&off, nullptr, &b}));
  set_compute_threads(0);
}

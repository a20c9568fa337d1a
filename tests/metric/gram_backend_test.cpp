// Tests of the Gram backends (src/metric/gram_backend.cpp): the bf16 kernel against the f32 path
// on the same bf16 weights (Grams and layer metrics to 1e-5), the fallbacks, and the selection.
#include "kvrank/metric/gram_backend.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>

#include "kvrank/base/error.hpp"
#include "kvrank/io/dtype.hpp"
#include "kvrank/metric/diversity.hpp"
#include "support/catch.hpp"

using namespace kvrank;

namespace {

/// Restores the backend in force when a test ends.
class BackendGuard {
 public:
  BackendGuard() : saved_(gram_backend()) {}
  ~BackendGuard() { set_gram_backend(saved_); }
  BackendGuard(const BackendGuard&) = delete;
  BackendGuard& operator=(const BackendGuard&) = delete;

 private:
  GramBackend saved_;
};

/// Random normal rows truncated to bfloat16 (what a bf16 checkpoint's rows hold as float32).
RowMatrixF bf16_rows(Index rows, Index cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  RowMatrixF matrix(rows, cols);
  for (Index i = 0; i < matrix.size(); ++i) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(normal(rng));
    matrix.data()[i] = std::bit_cast<float>(bits & 0xFFFF0000u);
  }
  return matrix;
}

/// Gram through one backend.
MatrixD gram_with(GramBackend backend, const RowMatrixF& basis) {
  set_gram_backend(backend);
  return basis_gram(basis);
}

/// max |a_ij − b_ij| / sqrt(b_ii b_jj): the error relative to the entries' natural scale.
double max_scaled_difference(const MatrixD& a, const MatrixD& b) {
  double worst = 0;
  for (Index j = 0; j < b.cols(); ++j) {
    for (Index i = 0; i < b.rows(); ++i) {
      const double scale = std::sqrt(b(i, i) * b(j, j));
      worst = std::max(worst, std::abs(a(i, j) - b(i, j)) / scale);
    }
  }
  return worst;
}

bool close(double found, double expected) {
  return std::abs(found - expected) <= 1e-5 * std::abs(expected) + 1e-9;
}

/// A GQA-like layer (6 query heads, 3 KV heads, head width 48) whose weights are bf16.
HeadFactors bf16_layer(std::mt19937& rng) {
  const Index k = 48, d = 160;
  HeadFactors factors;
  factors.left.basis = bf16_rows(6 * k, d, rng);
  factors.right.basis = bf16_rows(3 * k, d, rng);
  factors.left.head_cols = factors.right.head_cols = k;
  for (Index h = 0; h < 6; ++h) {
    factors.left.heads.push_back({CoeffBlock::identity(h * k, k)});
    factors.right.heads.push_back({CoeffBlock::identity((h / 2) * k, k)});
  }
  return factors;
}

}  // namespace

TEST_CASE("gram backend: names, and the message for a wrong one", "[gram]") {
  CHECK(parse_gram_backend("auto") == GramBackend::automatic);
  CHECK(parse_gram_backend("f32") == GramBackend::f32);
  CHECK(parse_gram_backend("bf16") == GramBackend::bf16);
  CHECK_THROWS_MATCHES(
      parse_gram_backend("fp16"), Error,
      Catch::Matchers::Message("KVRANK_GRAM_BACKEND: expected auto, f32 or bf16, found "
                               "\"fp16\""));
}

TEST_CASE("gram backend: bf16-exact means every low half is zero", "[gram]") {
  std::mt19937 rng(1);
  RowMatrixF rows = bf16_rows(5, 7, rng);
  CHECK(is_bf16_exact(rows));
  CHECK(is_bf16_exact(RowMatrixF(0, 3)));
  rows(4, 6) = std::nextafter(rows(4, 6), 1.0f);  // one float32-only value
  CHECK_FALSE(is_bf16_exact(rows));
}

TEST_CASE("gram backend: every finite FP8 value is a bf16, so FP8 weights take the bf16 path",
          "[gram]") {
  RowMatrixF values(2, 256);
  for (int code = 0; code < 256; ++code) {
    const auto bits = static_cast<std::uint8_t>(code);
    values(0, code) = fp8_e4m3_to_f32(bits);
    values(1, code) = fp8_e5m2_to_f32(bits);
  }
  values = values.unaryExpr([](float x) { return std::isfinite(x) ? x : 0.0f; });
  CHECK(values.cwiseAbs().maxCoeff() == 57344.0f);  // E5M2's largest: the codes were all read
  CHECK(is_bf16_exact(values));
}

TEST_CASE("gram backend: bf16 is refused where there is no bf16 kernel", "[gram]") {
  BackendGuard guard;
  if (bf16_gram_supported()) {
    CHECK_NOTHROW(set_gram_backend(GramBackend::bf16));
    return;
  }
  CHECK_THROWS_MATCHES(
      set_gram_backend(GramBackend::bf16), Error,
      Catch::Matchers::Message("set_gram_backend: bf16: this kvrank has no bf16 Gram "
                               "kernel (it needs oneDNN at build time and a CPU with "
                               "AVX512-BF16); use auto or f32"));
}

// The tests tagged [.bf16] need the bf16 kernel: hidden from the ordinary list, they run as the
// ctest test unit.bf16_gram, which this probe turns into a visible skip where there is no kernel
// (tests/CMakeLists.txt).
TEST_CASE("gram backend: this build and CPU have a bf16 Gram kernel", "[.bf16_probe]") {
  REQUIRE(bf16_gram_supported());
}

TEST_CASE("gram backend: the bf16 Gram equals the f32 Gram of the same bf16 weights", "[.bf16]") {
  BackendGuard guard;
  REQUIRE(bf16_gram_supported());
  std::mt19937 rng(2);
  // Several column tiles with a partial last one, a single tile, one column, one row.
  for (auto [m, d] : {std::pair<Index, Index>{600, 200}, {64, 40}, {300, 1}, {1, 9}}) {
    INFO("basis " << m << " × " << d);
    const RowMatrixF basis = bf16_rows(m, d, rng);
    MatrixF upper(m, m);
    set_gram_backend(GramBackend::bf16);
    REQUIRE(bf16_gram_upper(basis, upper));  // the bf16 kernel really ran

    const MatrixD bf16 = gram_with(GramBackend::bf16, basis);
    const MatrixD f32 = gram_with(GramBackend::f32, basis);
    const MatrixD exact = basis.cast<double>() * basis.cast<double>().transpose();
    CHECK(bf16 == bf16.transpose());
    CHECK(max_scaled_difference(bf16, f32) <= 1e-5);
    CHECK(max_scaled_difference(bf16, exact) <= 1e-6);
  }
}

TEST_CASE("gram backend: layer metrics agree between bf16 and f32 to 1e-5", "[.bf16]") {
  BackendGuard guard;
  REQUIRE(bf16_gram_supported());
  std::mt19937 rng(3);
  const HeadFactors factors = bf16_layer(rng);
  set_gram_backend(GramBackend::bf16);
  const LayerMetrics bf16 = analyze_layer(factors);
  set_gram_backend(GramBackend::f32);
  const LayerMetrics f32 = analyze_layer(factors);

  CHECK(close(bf16.erank, f32.erank));
  CHECK(close(bf16.erank_centered, f32.erank_centered));
  CHECK(close(bf16.mean_similarity, f32.mean_similarity));
  REQUIRE(bf16.head_erank.size() == f32.head_erank.size());
  for (std::size_t h = 0; h < f32.head_erank.size(); ++h) {
    CHECK(close(bf16.head_erank[h], f32.head_erank[h]));
    CHECK(close(bf16.head_norm[h], f32.head_norm[h]));
  }
  CHECK((bf16.similarity - f32.similarity).cwiseAbs().maxCoeff() <= 1e-5);
}

TEST_CASE("gram backend: f32 weights, the f32 choice and small auto Grams use the f32 path",
          "[gram]") {
  BackendGuard guard;
  std::mt19937 rng(4);
  RowMatrixF inexact = bf16_rows(300, 64, rng);
  inexact(299, 63) = std::nextafter(inexact(299, 63), 1.0f);  // one float32-only value
  REQUIRE_FALSE(is_bf16_exact(inexact));
  const RowMatrixF exact = bf16_rows(300, 64, rng);
  MatrixF gram(300, 300);

  set_gram_backend(GramBackend::f32);
  CHECK_FALSE(bf16_gram_upper(exact, gram));  // the forced fallback
  const MatrixD f32 = basis_gram(inexact);
  if (bf16_gram_supported()) {
    set_gram_backend(GramBackend::bf16);
    CHECK_FALSE(bf16_gram_upper(inexact, gram));  // never rounds a float32 value
    CHECK(basis_gram(inexact) == f32);            // hence bit-identical to the f32 path
  }
  set_gram_backend(GramBackend::automatic);
  CHECK_FALSE(bf16_gram_upper(bf16_rows(64, 64, rng), gram));  // too small to pay off
  CHECK(bf16_gram_upper(bf16_rows(256, 256, rng), gram) == bf16_gram_in_auto());
}

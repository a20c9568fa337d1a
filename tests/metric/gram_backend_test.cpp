// Tests of the Gram backends (src/metric/gram_backend.cpp): the bf16 kernel against the f32 path
// on the same bf16 weights (Grams and layer metrics to 1e-5), the onednn-f32 products against the
// BLAS ones (to 1e-6), the fallbacks, and the selection.
#include "kvrank/metric/gram_backend.hpp"

#include <sys/resource.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "kvrank/base/error.hpp"
#include "kvrank/io/dtype.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/diversity.hpp"
#include "metric/blas.hpp"
#include "support/backend_guard.hpp"
#include "support/catch.hpp"

using namespace kvrank;

namespace {

using test::BackendGuard;

/// Sets the compute threads for a test, back to the default when it ends.
class ThreadsGuard {
 public:
  explicit ThreadsGuard(int threads) { set_compute_threads(threads); }
  ~ThreadsGuard() { set_compute_threads(0); }
  ThreadsGuard(const ThreadsGuard&) = delete;
  ThreadsGuard& operator=(const ThreadsGuard&) = delete;
};

/// Random normal rows truncated to bfloat16 (what a bf16 checkpoint's rows hold as float32).
RowMatrixF truncated_bf16_rows(Index rows, Index cols, std::mt19937& rng) {
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
  factors.left.basis = truncated_bf16_rows(6 * k, d, rng);
  factors.right.basis = truncated_bf16_rows(3 * k, d, rng);
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
  CHECK(parse_gram_backend("bf16-onednn") == GramBackend::bf16_onednn);
  CHECK(parse_gram_backend("onednn-f32") == GramBackend::onednn_f32);
  CHECK_THROWS_MATCHES(parse_gram_backend("fp16"), Error,
                       Catch::Matchers::Message("KVRANK_GRAM_BACKEND: expected auto, f32, bf16, "
                                                "bf16-onednn or onednn-f32, found \"fp16\""));
  // A long value (an environment variable may hold megabytes) is quoted as an excerpt.
  CHECK_THROWS_MATCHES(parse_gram_backend(std::string(1000, 'f')), Error,
                       Catch::Matchers::Message("KVRANK_GRAM_BACKEND: expected auto, f32, bf16, "
                                                "bf16-onednn or onednn-f32, found \"" +
                                                std::string(60, 'f') + "... (1000 bytes)\""));
}

TEST_CASE("gram backend: bf16-exact means every low half is zero", "[gram]") {
  std::mt19937 rng(1);
  RowMatrixF rows = truncated_bf16_rows(5, 7, rng);
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
    const RowMatrixF basis = truncated_bf16_rows(m, d, rng);
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

TEST_CASE("gram backend: the bf16 Gram over a long depth is as accurate as the f32 SSYRK",
          "[.bf16]") {
  // oneDNN sums a product's whole depth in one float32 chain; the bf16 Gram takes the depth in
  // slices added into the tile, so its error stays that of the BLAS's blocked SSYRK instead of
  // growing with d (over 4096 columns one chain was 3–4× the SSYRK's error).
  BackendGuard guard;
  REQUIRE(bf16_gram_supported());
  std::mt19937 rng(5);
  const RowMatrixF basis = truncated_bf16_rows(300, 4096 + 77, rng);  // a partial last slice
  const MatrixD exact = basis.cast<double>() * basis.cast<double>().transpose();
  const double f32_error = max_scaled_difference(gram_with(GramBackend::f32, basis), exact);
  const double bf16_error = max_scaled_difference(gram_with(GramBackend::bf16, basis), exact);
  INFO("f32 error " << f32_error << ", bf16 error " << bf16_error);
  CHECK(bf16_error <= 1.5 * f32_error);
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

TEST_CASE("gram backend: a bf16 Gram formed while its kernels are compiled aside is right",
          "[.bf16]") {
  BackendGuard guard;
  ThreadsGuard threads(2);
  set_gram_backend(GramBackend::bf16);
  std::mt19937 rng(7);
  const RowMatrixF basis =
      truncated_bf16_rows(600, 300, rng);  // a depth slice of a longer row: as in a model
  const MatrixD f32 = gram_with(GramBackend::f32, basis);
  set_gram_backend(GramBackend::bf16_onednn);  // kvrank's own bf16 kernel compiles nothing
  std::jthread kernels = compile_gram_kernels_aside(basis.rows(), basis.cols(), true, false);
  CHECK(kernels.joinable());
  const MatrixD bf16 = basis_gram(basis);  // while the kernels may still be compiled
  kernels.join();
  CHECK(max_scaled_difference(bf16, f32) <= 1e-5);
  CHECK(basis_gram(basis) == bf16);  // the same kernel once they are
}

TEST_CASE("gram backend: no thread compiles kernels that no Gram will run or with none to spare",
          "[gram]") {
  BackendGuard guard;
  ThreadsGuard threads(2);
  set_gram_backend(GramBackend::f32);  // no oneDNN product at all
  CHECK_FALSE(compile_gram_kernels_aside(768, 768, true, false).joinable());
  CHECK_FALSE(compile_gram_kernels_aside(768, 768, false, false).joinable());
  CHECK_FALSE(compile_gram_kernels_aside(768, 768, false, true).joinable());  // latent: the BLAS
  if (!bf16_gram_supported()) return;
  set_gram_backend(GramBackend::bf16);
  const bool own_kernel =
      gram_kernel_description(768, 768, true).find("kvrank's") != std::string::npos;
  CHECK(compile_gram_kernels_aside(768, 768, true, false).joinable() ==
        !own_kernel);  // own: compiled
  set_gram_backend(GramBackend::bf16_onednn);
  CHECK_FALSE(
      compile_gram_kernels_aside(768, 768, false, false).joinable());  // float32 values: the BLAS
  CHECK(compile_gram_kernels_aside(768, 768, true, false).joinable());
  set_compute_threads(1);
  CHECK_FALSE(compile_gram_kernels_aside(768, 768, true, false).joinable());  // no thread to spare
  set_compute_threads(2);
  // Under `ulimit -v` with room for it, it starts (promised its room: memory_limit.hpp);
  // compile_aside_test.cpp checks a limit without room.
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_AS, &saved) == 0);
  if (saved.rlim_cur != RLIM_INFINITY || saved.rlim_max != RLIM_INFINITY) return;
  rlimit huge = saved;
  huge.rlim_cur = rlim_t{1} << 44;  // 16 TiB: a limit, but not one this process can reach
  REQUIRE(setrlimit(RLIMIT_AS, &huge) == 0);
  const bool started = compile_gram_kernels_aside(768, 768, true, false).joinable();
  REQUIRE(setrlimit(RLIMIT_AS, &saved) == 0);
  CHECK(started);
}

TEST_CASE(
    "gram backend: a latent contraction's SGEMM kernels are compiled aside where it runs "
    "its products on oneDNN",
    "[gram]") {
  BackendGuard guard;
  ThreadsGuard threads(2);
  set_gram_backend(GramBackend::automatic);
  // Its M_h products on oneDNN, the rest on the BLAS (Zen 4's choice), or all on oneDNN, or none.
  CHECK(compile_gram_kernels_aside(768, 768, false, true).joinable() ==
        latent_products_on_onednn());
  // A dense model's float32 Grams there compile nothing of oneDNN's but where they run on it.
  CHECK(compile_gram_kernels_aside(768, 768, false, false).joinable() ==
        float_products_on_onednn());
}

TEST_CASE("gram backend: f32 weights, the f32 choice and small auto Grams use the f32 path",
          "[gram]") {
  BackendGuard guard;
  std::mt19937 rng(4);
  RowMatrixF inexact = truncated_bf16_rows(300, 64, rng);
  inexact(299, 63) = std::nextafter(inexact(299, 63), 1.0f);  // one float32-only value
  REQUIRE_FALSE(is_bf16_exact(inexact));
  const RowMatrixF exact = truncated_bf16_rows(300, 64, rng);
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
  CHECK_FALSE(bf16_gram_upper(truncated_bf16_rows(64, 64, rng), gram));  // too small to pay off
  CHECK(bf16_gram_upper(truncated_bf16_rows(256, 256, rng), gram) == bf16_gram_in_auto());
}

// ---- onednn-f32 -------------------------------------------------------------------------------

namespace {

/// Random normal float32 rows of standard deviation `scale`.
/// The kernels of the backend in force (diversity.cpp chooses them so where memory is no concern).
detail::FloatKernels backend_kernels() {
  return float_products_on_onednn() ? detail::FloatKernels::onednn : detail::FloatKernels::blas;
}

RowMatrixF float_rows(Index rows, Index cols, float scale, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, scale);
  RowMatrixF matrix(rows, cols);
  for (Index i = 0; i < matrix.size(); ++i) matrix.data()[i] = normal(rng);
  return matrix;
}

/// Whether |a_ij − b_ij| ≤ 1e-6 · sqrt(e_ii e_jj) for every entry, e = the exact (double) Gram of
/// `basis`: 1e-6 relative to the entries' natural scale, and exactly equal on zero rows.
bool grams_agree(const MatrixD& a, const MatrixD& b, const RowMatrixF& basis) {
  const VectorD norms = basis.cast<double>().rowwise().squaredNorm();
  for (Index j = 0; j < b.cols(); ++j) {
    for (Index i = 0; i < b.rows(); ++i) {
      if (std::abs(a(i, j) - b(i, j)) > 1e-6 * std::sqrt(norms(i) * norms(j))) return false;
    }
  }
  return true;
}

/// The awkward bases: several column tiles with a partial last one, exactly one tile, one more
/// than a tile, one row, one column, 1 × 1; tiny values (products near float's smallest normal
/// numbers), a zero row among others, all zeros.
std::vector<RowMatrixF> awkward_bases(std::mt19937& rng) {
  std::vector<RowMatrixF> bases;
  for (auto [m, d] :
       {std::pair<Index, Index>{600, 200}, {256, 64}, {257, 33}, {1, 9}, {300, 1}, {1, 1}}) {
    bases.push_back(float_rows(m, d, 1.0f, rng));
  }
  bases.push_back(float_rows(40, 70, 1e-18f, rng));
  RowMatrixF with_zero_row = float_rows(30, 50, 0.3f, rng);
  with_zero_row.row(17).setZero();
  bases.push_back(with_zero_row);
  bases.push_back(RowMatrixF::Zero(5, 8));
  return bases;
}

}  // namespace

TEST_CASE("gram backend: onednn-f32 is refused where there is no oneDNN float32 kernel", "[gram]") {
  BackendGuard guard;
  if (onednn_f32_supported()) {
    CHECK_NOTHROW(set_gram_backend(GramBackend::onednn_f32));
    CHECK(float_products_on_onednn());
    return;
  }
  CHECK_FALSE(onednn_f32_in_auto());
  CHECK_THROWS_MATCHES(
      set_gram_backend(GramBackend::onednn_f32), Error,
      Catch::Matchers::Message("set_gram_backend: onednn-f32: this kvrank has no oneDNN float32 "
                               "kernel (it needs oneDNN at build time and a CPU with AVX2); use "
                               "auto or f32"));
}

TEST_CASE("gram backend: auto runs float32 products on oneDNN only where the BLAS's are narrower",
          "[gram]") {
  BackendGuard guard;
  set_gram_backend(GramBackend::automatic);
  if (!onednn_f32_supported()) {
    CHECK_FALSE(float_products_on_onednn());
  } else if (detail::blas_kernels_are_generic()) {
    CHECK(float_products_on_onednn());  // no OpenBLAS, or its Prescott kernels
  } else if (detail::blas_kernels_use_avx512() || !detail::cpu_has_avx512()) {
    CHECK_FALSE(float_products_on_onednn());  // OpenBLAS's kernels are as wide as the CPU's
  } else {
    // OpenBLAS's AVX2 kernels on an AVX-512 CPU (OPENBLAS_CORETYPE=Haswell): oneDNN's take over,
    // where oneDNN itself runs AVX-512 (unless ONEDNN_MAX_CPU_ISA holds it lower).
    if (!std::getenv("ONEDNN_MAX_CPU_ISA") && !std::getenv("DNNL_MAX_CPU_ISA")) {
      CHECK(float_products_on_onednn());
      CHECK_THAT(gram_backend_description(),
                 Catch::Matchers::Contains("the BLAS runs AVX2 kernels on this AVX-512 CPU"));
    }
  }
  set_gram_backend(GramBackend::f32);
  CHECK_FALSE(float_products_on_onednn());
  MatrixF gram(4, 4);
  CHECK_FALSE(onednn_f32_gram_upper(RowMatrixF::Ones(4, 3), gram));
}

TEST_CASE(
    "gram backend: the latent contraction's M_h products take oneDNN under auto where it runs "
    "float32",
    "[gram]") {
  BackendGuard guard;
  set_gram_backend(GramBackend::automatic);
  CHECK(latent_products_on_onednn() == onednn_f32_supported());
  if (onednn_f32_supported() && !float_products_on_onednn()) {
    CHECK_THAT(gram_backend_description(),
               Catch::Matchers::Contains("the latent contraction's M_h products on oneDNN"));
  }
  set_gram_backend(GramBackend::f32);  // f32 keeps every float32 product on the BLAS
  CHECK_FALSE(latent_products_on_onednn());
  if (onednn_f32_supported()) {
    set_gram_backend(GramBackend::onednn_f32);
    CHECK(latent_products_on_onednn());
  }
}

// The tests tagged [.onednn_f32] need oneDNN's float32 kernels: they run as the ctest test
// unit.onednn_f32_gram, skipped where this probe fails (tests/CMakeLists.txt).
TEST_CASE("gram backend: this build and CPU have oneDNN float32 kernels", "[.onednn_f32_probe]") {
  REQUIRE(onednn_f32_supported());
}

TEST_CASE("gram backend: the onednn-f32 Gram equals the f32 Gram to 1e-6", "[.onednn_f32]") {
  BackendGuard guard;
  REQUIRE(onednn_f32_supported());
  std::mt19937 rng(5);
  for (const RowMatrixF& basis : awkward_bases(rng)) {
    INFO("basis " << basis.rows() << " × " << basis.cols() << ", largest |value| "
                  << basis.cwiseAbs().maxCoeff());
    MatrixF upper(basis.rows(), basis.rows());
    set_gram_backend(GramBackend::onednn_f32);
    REQUIRE(onednn_f32_gram_upper(basis, upper));  // oneDNN really ran
    const MatrixD onednn = gram_with(GramBackend::onednn_f32, basis);
    const MatrixD f32 = gram_with(GramBackend::f32, basis);
    const MatrixD exact = basis.cast<double>() * basis.cast<double>().transpose();
    CHECK(onednn == onednn.transpose());
    CHECK(grams_agree(onednn, f32, basis));
    CHECK(grams_agree(onednn, exact, basis));
  }
}

TEST_CASE("gram backend: the onednn-f32 GEMM, TRMM and SYRK equal the BLAS ones to 1e-6",
          "[.onednn_f32]") {
  BackendGuard guard;
  REQUIRE(onednn_f32_supported());
  std::mt19937 rng(6);
  auto both = [](auto product) {
    set_gram_backend(GramBackend::f32);
    const RowMatrixF f32 = product();
    set_gram_backend(GramBackend::onednn_f32);
    const RowMatrixF onednn = product();
    const float scale = std::max(f32.cwiseAbs().maxCoeff(), 1e-30f);
    return (onednn - f32).cwiseAbs().maxCoeff() / scale;
  };
  // GEMM: a strided, transposed A (the contraction's X_hᵀ columns) and beta 1 (accumulation).
  const RowMatrixF a = float_rows(40, 90, 1.0f, rng);
  const RowMatrixF b = float_rows(40, 70, 1.0f, rng);
  const RowMatrixF c0 = float_rows(33, 70, 1.0f, rng);
  for (float beta : {0.0f, 1.0f}) {
    INFO("GEMM, beta " << beta);
    CHECK(both([&] {
            RowMatrixF c = c0;
            detail::gemm(backend_kernels(), true, 33, 70, 40, a.data() + 5, 90, b.data(), 70, beta,
                         c.data(), 70);
            return c;
          }) <= 1e-6);
  }
  // TRMM: several panels with a partial last one, one column; the upper part of L is garbage,
  // which the product must not read.
  for (auto shape : {std::pair<Index, Index>{7, 300}, {3, 1}, {1, 256}}) {
    const Index rows = shape.first, n = shape.second;  // named: lambdas cannot capture bindings
    INFO("TRMM " << rows << " × " << n);
    const RowMatrixF l = float_rows(n, n + 3, 1.0f, rng);
    const RowMatrixF b0 = float_rows(rows, n + 2, 1.0f, rng);
    CHECK(both([&] {
            RowMatrixF out = b0;
            detail::trmm_right_lower(backend_kernels(), rows, n, l.data(), n + 3, out.data(),
                                     n + 2);
            return out;
          }) <= 1e-6);
  }
  // SYRK into double: few rows over many columns (the contraction's H × H), more than one tile.
  for (auto shape : {std::pair<Index, Index>{12, 5000}, {300, 20}}) {
    const Index rows = shape.first, inner = shape.second;
    INFO("SYRK " << rows << " × " << inner);
    const RowMatrixF x = float_rows(rows, inner + 1, 1.0f, rng);
    CHECK(both([&] {
            return RowMatrixF(
                detail::syrk_double(backend_kernels(), rows, inner, x.data(), inner + 1)
                    .cast<float>());
          }) <= 1e-6);
  }
}

TEST_CASE("gram backend: layer metrics agree between onednn-f32 and f32 to 1e-6", "[.onednn_f32]") {
  BackendGuard guard;
  REQUIRE(onednn_f32_supported());
  std::mt19937 rng(7);
  // MLA-like: 12 heads, each a dense 96 × 24 block on a 96-row latent of d 200, both sides.
  std::normal_distribution<double> normal;
  HeadFactors latent;
  for (FactorSide* side : {&latent.left, &latent.right}) {
    side->basis = float_rows(96, 200, 0.05f, rng);
    side->head_cols = 24;
    for (int h = 0; h < 12; ++h) {
      MatrixD block(96, 24);
      for (Index i = 0; i < block.size(); ++i) block.data()[i] = normal(rng);
      side->heads.push_back({CoeffBlock::dense(0, 0, block.transpose().cast<float>())});
    }
  }
  const HeadFactors dense = bf16_layer(rng);
  using Case = std::pair<const HeadFactors*, Contraction>;
  for (auto [factors, how] :
       {Case{&latent, Contraction::latent}, Case{&latent, Contraction::pairwise},
        Case{&dense, Contraction::automatic}}) {
    set_gram_backend(GramBackend::onednn_f32);
    const LayerMetrics onednn = analyze_layer(*factors, how);
    set_gram_backend(GramBackend::f32);
    const LayerMetrics f32 = analyze_layer(*factors, how);
    auto near = [](double found, double expected) {
      return std::abs(found - expected) <= 1e-6 * std::abs(expected) + 1e-12;
    };
    CHECK(near(onednn.erank, f32.erank));
    CHECK(near(onednn.erank_centered, f32.erank_centered));
    INFO("mean similarity " << onednn.mean_similarity << " vs " << f32.mean_similarity);
    // A mean of similarities in [-1, 1], near 0 for random heads: to 1e-6 absolute, as each one.
    CHECK(std::abs(onednn.mean_similarity - f32.mean_similarity) <= 1e-6);
    REQUIRE(onednn.head_erank.size() == f32.head_erank.size());
    for (std::size_t h = 0; h < f32.head_erank.size(); ++h) {
      CHECK(near(onednn.head_erank[h], f32.head_erank[h]));
      CHECK(near(onednn.head_norm[h], f32.head_norm[h]));
    }
    CHECK((onednn.similarity - f32.similarity).cwiseAbs().maxCoeff() <= 1e-6);
  }
}

// kvrank_bench_double_syrk — syrk_in_double's two paths side by side (docs/performance.md): A·Aᵀ in
// double of a float32 A (rows × inner) by
//   kernel   kvrank's AVX-512 kernel (metric/double_syrk_kernel.cpp)
//   blas     A cast to double and OpenBLAS's DSYRK (Eigen's rankUpdate without OpenBLAS)
// on one thread (as the contraction calls it, inside its loop over heads; --threads N gives the
// BLAS N, as a call from serial code has, the kernel keeping one), in one process,
// interleaved round by round, each the fastest of --rounds calls (after one untimed call each).
// "max diff" is max |k_ij − b_ij| / sqrt(b_ii b_jj) over all entries: round-off of double sums.
// Default shapes: DeepSeek-V3's two per-head products (192 × 1536, 192 × 576), 128 × 4096, and the
// small ones around the kernel's threshold; --rows R --inner N times one shape.
// Then the float32 upper triangle of syrk_double's slices (metric/float_syrk_kernel.cpp against
// OpenBLAS's SSYRK, syrk_upper), on one thread: DeepSeek-V3's 128 × 8 172 and two more.
//
//   kvrank_bench_double_syrk --rounds 20
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>

#include "bench_flags.hpp"
#include "kvrank/base/eigen.hpp"
#include "metric/blas.hpp"
#include "metric/double_syrk_kernel.hpp"
#include "metric/float_syrk_kernel.hpp"

namespace {

using kvrank::Index;
using kvrank::MatrixD;
using kvrank::MatrixF;
using kvrank::RowMatrixF;
using kvrank::detail::DoubleSyrkPath;

/// A rows × inner matrix of normal values, seeded.
RowMatrixF normal_rows(Index rows, Index inner) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RowMatrixF a(rows, inner);
  for (Index i = 0; i < a.size(); ++i) a.data()[i] = normal(rng);
  return a;
}

/// Max |k_ij − b_ij| / sqrt(b_ii b_jj).
double scaled_difference(const MatrixD& kernel, const MatrixD& blas) {
  double worst = 0;
  for (Index j = 0; j < blas.cols(); ++j) {
    for (Index i = 0; i < blas.rows(); ++i) {
      const double scale = std::sqrt(blas(i, i) * blas(j, j));
      if (scale > 0) worst = std::max(worst, std::abs(kernel(i, j) - blas(i, j)) / scale);
    }
  }
  return worst;
}

/// Seconds of one call on `path`, and its result.
double timed(DoubleSyrkPath path, const RowMatrixF& a, MatrixD& out) {
  const auto start = std::chrono::steady_clock::now();
  out = kvrank::detail::syrk_in_double(path, a.rows(), a.cols(), a.data(), a.cols());
  return kvrank_bench::seconds_since(start);
}

void run_shape(Index rows, Index inner, long rounds) {
  const RowMatrixF a = normal_rows(rows, inner);
  MatrixD kernel, blas;
  double best[2] = {1e300, 1e300};
  for (long round = -1; round < rounds; ++round) {  // round -1: untimed
    const double kernel_s = timed(DoubleSyrkPath::kernel, a, kernel);
    const double blas_s = timed(DoubleSyrkPath::blas, a, blas);
    if (round < 0) continue;
    best[0] = std::min(best[0], kernel_s);
    best[1] = std::min(best[1], blas_s);
  }
  const double macs =
      0.5 * static_cast<double>(rows) * static_cast<double>(rows + 1) * static_cast<double>(inner);
  std::printf(
      "%5ld x %-5ld  kernel %9.1f us (%5.1f G-MAC/s)  blas %9.1f us (%5.1f G-MAC/s)  "
      "blas/kernel %5.2f  max diff %.2e\n",
      static_cast<long>(rows), static_cast<long>(inner), best[0] * 1e6, macs / best[0] * 1e-9,
      best[1] * 1e6, macs / best[1] * 1e-9, best[1] / best[0], scaled_difference(kernel, blas));
}

/// The float32 upper triangle of A·Aᵀ on kvrank's float kernel and on the BLAS, one thread.
void run_float_shape(Index rows, Index inner, long rounds) {
  const RowMatrixF a = normal_rows(rows, inner);
  MatrixF kernel(rows, rows), blas(rows, rows);
  double best[2] = {1e300, 1e300};
  for (long round = -1; round < rounds; ++round) {  // round -1: untimed
    auto start = std::chrono::steady_clock::now();
    kvrank::detail::float_syrk_kernel(rows, inner, a.data(), inner, kernel.data(), rows);
    const double kernel_s = kvrank_bench::seconds_since(start);
    start = std::chrono::steady_clock::now();
    kvrank::detail::syrk_upper(kvrank::detail::FloatKernels::blas, rows, inner, a.data(), inner,
                               blas.data(), rows);
    const double blas_s = kvrank_bench::seconds_since(start);
    if (round < 0) continue;
    best[0] = std::min(best[0], kernel_s);
    best[1] = std::min(best[1], blas_s);
  }
  const MatrixD kernel_upper = kernel.cast<double>().selfadjointView<Eigen::Upper>();
  const MatrixD blas_upper = blas.cast<double>().selfadjointView<Eigen::Upper>();
  const double macs =
      0.5 * static_cast<double>(rows) * static_cast<double>(rows + 1) * static_cast<double>(inner);
  std::printf(
      "%5ld x %-5ld  float  %9.1f us (%5.1f G-MAC/s)  ssyrk %9.1f us (%5.1f G-MAC/s)  "
      "ssyrk/float %5.2f  max diff %.2e\n",
      static_cast<long>(rows), static_cast<long>(inner), best[0] * 1e6, macs / best[0] * 1e-9,
      best[1] * 1e6, macs / best[1] * 1e-9, best[1] / best[0],
      scaled_difference(kernel_upper, blas_upper));
}

}  // namespace

int main(int argc, char** argv) {
  const long rows = kvrank_bench::parse_flag(argc, argv, "--rows", 0);
  const long inner = kvrank_bench::parse_flag(argc, argv, "--inner", 0);
  const long rounds = kvrank_bench::parse_flag(argc, argv, "--rounds", 20);
  const long threads = kvrank_bench::parse_flag(argc, argv, "--threads", 1);
  if (rows < 0 || inner < 0 || rounds < 1 || threads < 1 || (rows > 0) != (inner > 0)) {
    std::fprintf(stderr, "kvrank_bench_double_syrk: --rows and --inner go together, positive\n");
    return 2;
  }
  if (!kvrank::detail::double_syrk_kernel_supported()) {
    std::printf("no AVX-512F here: syrk_in_double runs the BLAS\n");
    return 0;
  }
  kvrank_bench::set_threads(threads);  // the BLAS's; the kernel runs on the calling thread
  if (rows > 0) {
    run_shape(rows, inner, rounds);
    return 0;
  }
  const std::pair<Index, Index> shapes[] = {{192, 1536}, {192, 576}, {128, 4096}, {256, 4096},
                                            {4, 576},    {8, 576},   {16, 576},   {32, 576}};
  for (const auto& [r, n] : shapes) run_shape(r, n, rounds);
  const std::pair<Index, Index> float_shapes[] = {{128, 8172}, {32, 3456}, {256, 2048}};
  for (const auto& [r, n] : float_shapes) run_float_shape(r, n, rounds);
  return 0;
}

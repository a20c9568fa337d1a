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

/// Seconds of one call of `work`.
template <typename Work>
double seconds_of(Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return kvrank_bench::seconds_since(start);
}

/// The fastest of `rounds` calls of `ours` and of `theirs`, interleaved call by call, after one
/// untimed call of each.
template <typename Ours, typename Theirs>
std::pair<double, double> fastest(long rounds, Ours&& ours, Theirs&& theirs) {
  std::pair<double, double> best{1e300, 1e300};
  for (long round = -1; round < rounds; ++round) {  // round -1: untimed
    const double ours_s = seconds_of(ours);
    const double theirs_s = seconds_of(theirs);
    if (round < 0) continue;
    best = {std::min(best.first, ours_s), std::min(best.second, theirs_s)};
  }
  return best;
}

/// One line: the shape, both times and rates (the triangle's multiply-adds), their ratio and the
/// largest difference of the two results.
void print_line(Index rows, Index inner, const char* ours, const char* theirs,
                std::pair<double, double> best, double difference) {
  const double macs =
      0.5 * static_cast<double>(rows) * static_cast<double>(rows + 1) * static_cast<double>(inner);
  std::printf(
      "%5ld x %-5ld  %-6s %9.1f us (%5.1f G-MAC/s)  %-5s %9.1f us (%5.1f G-MAC/s)  "
      "%s/%s %5.2f  max diff %.2e\n",
      static_cast<long>(rows), static_cast<long>(inner), ours, best.first * 1e6,
      macs / best.first * 1e-9, theirs, best.second * 1e6, macs / best.second * 1e-9, theirs, ours,
      best.second / best.first, difference);
}

void run_shape(Index rows, Index inner, long rounds) {
  const RowMatrixF a = normal_rows(rows, inner);
  MatrixD kernel, blas;
  const auto on = [&](DoubleSyrkPath path, MatrixD& out) {
    return [&a, path, &out] {
      out = kvrank::detail::syrk_in_double(path, a.rows(), a.cols(), a.data(), a.cols());
    };
  };
  const auto best =
      fastest(rounds, on(DoubleSyrkPath::kernel, kernel), on(DoubleSyrkPath::blas, blas));
  print_line(rows, inner, "kernel", "blas", best, scaled_difference(kernel, blas));
}

/// The float32 upper triangle of A·Aᵀ on kvrank's float kernel and on the BLAS, one thread.
void run_float_shape(Index rows, Index inner, long rounds) {
  const RowMatrixF a = normal_rows(rows, inner);
  MatrixF kernel(rows, rows), blas(rows, rows);
  const auto best = fastest(
      rounds,
      [&] { kvrank::detail::float_syrk_kernel(rows, inner, a.data(), inner, kernel.data(), rows); },
      [&] {
        kvrank::detail::syrk_upper(kvrank::detail::FloatKernels::blas, rows, inner, a.data(), inner,
                                   blas.data(), rows);
      });
  const MatrixD kernel_upper = kernel.cast<double>().selfadjointView<Eigen::Upper>();
  const MatrixD blas_upper = blas.cast<double>().selfadjointView<Eigen::Upper>();
  print_line(rows, inner, "float", "ssyrk", best, scaled_difference(kernel_upper, blas_upper));
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

// kvrank_bench_bf16_gram — the bf16 Gram kernels side by side (docs/performance.md): the upper
// triangle of G = B·Bᵀ of an m × d basis of bf16 values by
//   onednn   the library's oneDNN path (backend bf16-onednn, gram_backend.cpp: 256-column tiles,
//            depth slices of 256 added into the tile by oneDNN's sum post-op, the tile's diagonal
//            block in full)
//   kernel   kvrank's AVX512-BF16 kernel (metric/bf16_gram_kernel.cpp)
//   square   oneDNN's bf16 matmul of 2048 × 2048 × 2048: the rate that rates both (bench/limit.cpp)
// in one process, interleaved round by round, each the fastest of --rounds calls (after one
// untimed call each). "limit" is the Gram's m²d/2 multiply-adds at the square product's rate.
// Accuracy: the entries of --check-rows rows i (spread over [0, m), the last one included)
// against every column j ≥ i, against the Gram in double:
// max |g_ij − e_ij| / sqrt(e_ii e_jj); and how many entries of the two triangles are the same bits.
//
//   kvrank_bench_bf16_gram --m 4096 --d 4096 --threads 1 --rounds 5
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_flags.hpp"
#include "io/safetensors_writer.hpp"
#include "kvrank/base/eigen.hpp"
#include "kvrank/io/dtype.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "metric/bf16_gram_kernel.hpp"
#include "onednn_square.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using kvrank::Index;
using kvrank::MatrixF;
using kvrank::RowMatrixF;

constexpr long kSquare = 2048;

/// An m × d basis of bf16 values (normal, rounded to bf16), seeded.
RowMatrixF bf16_basis(Index m, Index d) {
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RowMatrixF basis(m, d);
  for (Index i = 0; i < basis.size(); ++i) {
    basis.data()[i] = kvrank::bf16_to_f32(kvrank::f32_to_bf16(normal(rng)));
  }
  return basis;
}

/// Max |g_ij − e_ij| / sqrt(e_ii e_jj) over rows i of `rows` and columns j ≥ i, e in double.
double scaled_error(const RowMatrixF& basis, const MatrixF& gram, const std::vector<Index>& rows) {
  const Index m = basis.rows();
  const Eigen::MatrixXd exact_rows = basis.cast<double>();
  Eigen::VectorXd norms(m);
  for (Index j = 0; j < m; ++j) norms(j) = exact_rows.row(j).squaredNorm();
  double worst = 0;
  for (const Index i : rows) {
    for (Index j = i; j < m; ++j) {
      const double exact = exact_rows.row(i).dot(exact_rows.row(j));
      const double scale = std::sqrt(norms(i) * norms(j));
      if (scale > 0) worst = std::max(worst, std::abs(gram(i, j) - exact) / scale);
    }
  }
  return worst;
}

/// The entries of the two upper triangles that are the same bits, as a share of all.
double same_bits(const MatrixF& a, const MatrixF& b) {
  double same = 0;
  double all = 0;
  for (Index j = 0; j < a.cols(); ++j) {
    for (Index i = 0; i <= j; ++i) {
      same += std::bit_cast<std::uint32_t>(a(i, j)) == std::bit_cast<std::uint32_t>(b(i, j));
      all += 1;
    }
  }
  return same / all;
}

}  // namespace

int main(int argc, char** argv) {
  const long m = kvrank_bench::parse_flag(argc, argv, "--m", 4096);
  const long d = kvrank_bench::parse_flag(argc, argv, "--d", 4096);
  const long threads = kvrank_bench::parse_flag(argc, argv, "--threads", 1);
  const long rounds = kvrank_bench::parse_flag(argc, argv, "--rounds", 5);
  const long check_rows = kvrank_bench::parse_flag(argc, argv, "--check-rows", 48);
  if (m < 1 || d < 1 || threads < 1 || rounds < 1 || check_rows < 1) {
    std::fprintf(stderr, "kvrank_bench_bf16_gram: every size must be positive\n");
    return 2;
  }
  if (!kvrank::bf16_gram_supported() || !kvrank::detail::bf16_kernel_supported()) {
    std::printf("no bf16 kernel here\n");
    return 0;
  }
  kvrank_bench::set_threads(threads);
  kvrank::set_gram_backend(kvrank::GramBackend::bf16_onednn);  // bf16_gram_upper on oneDNN
  const RowMatrixF basis = bf16_basis(m, d);
  MatrixF onednn = MatrixF::Zero(m, m);
  MatrixF kernel = MatrixF::Zero(m, m);
  kvrank_bench::OnednnSquare square(kSquare, dnnl::memory::data_type::bf16);
  double best[3] = {1e300, 1e300, 1e300};
  for (long round = -1; round < rounds; ++round) {  // round -1: untimed
    auto start = std::chrono::steady_clock::now();
    if (!kvrank::bf16_gram_upper(basis, onednn)) return 1;
    const double onednn_s = kvrank_bench::seconds_since(start);
    start = std::chrono::steady_clock::now();
    if (!kvrank::detail::bf16_kernel_gram_upper(basis, kernel)) return 1;
    const double kernel_s = kvrank_bench::seconds_since(start);
    const double square_s = square.seconds();
    if (round < 0) continue;
    best[0] = std::min(best[0], onednn_s);
    best[1] = std::min(best[1], kernel_s);
    best[2] = std::min(best[2], square_s);
  }
  const double rate = static_cast<double>(kSquare) * kSquare * kSquare / best[2];
  const auto size = [](long n) { return static_cast<double>(n); };
  const double limit = size(m) * size(m) * size(d) / 2 / rate;
  std::vector<Index> rows;
  for (long r = 0; r < check_rows; ++r) rows.push_back(r * (m - 1) / std::max(1L, check_rows - 1));
  std::printf(
      "m %ld d %ld threads %ld: onednn %.4f s (%.2fx limit), kernel %.4f s (%.2fx), kernel/onednn "
      "%.3f; square %.1f G-MAC/s; error onednn %.3g kernel %.3g; same bits %.4f\n",
      m, d, threads, best[0], best[0] / limit, best[1], best[1] / limit, best[1] / best[0],
      rate / 1e9, scaled_error(basis, onednn, rows), scaled_error(basis, kernel, rows),
      same_bits(onednn, kernel));
  return 0;
}

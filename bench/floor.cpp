// kvrank_bench_floor — times L × (SYRK of an M×D and an N×D float32 matrix), the two Grams per
// layer that `kvrank analyze --repr qk` cannot avoid (query rows and key rows), through the same
// BLAS as kvrank_core. Prints the seconds on stdout.
//
//   kvrank_bench_floor --layers 32 --d 4096 --q-rows 4096 --k-rows 4096 --threads 2
#include <Eigen/Core>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench_flags.hpp"

#ifdef KVRANK_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using kvrank_bench::parse_flag;

using RowMatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// gram = rows · rowsᵀ (one triangle), as kvrank's basis_gram does it.
void syrk(const RowMatrixF& rows, Eigen::MatrixXf& gram) {
#ifdef KVRANK_HAVE_OPENBLAS
  const auto m = static_cast<blasint>(rows.rows());
  const auto n = static_cast<blasint>(rows.cols());
  cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, m, n, 1.0f, rows.data(), n, 0.0f,
              gram.data(), m);
#else
  gram.setZero();
  gram.selfadjointView<Eigen::Upper>().rankUpdate(rows);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--blas-info") == 0) {
#ifdef KVRANK_HAVE_OPENBLAS
    // The kernels OpenBLAS picked for this CPU (OPENBLAS_CORETYPE overrides its detection).
    std::printf("%s, %s kernels\n", openblas_get_config(), openblas_get_corename());
#else
    std::printf("Eigen products (no OpenBLAS)\n");
#endif
    return 0;
  }
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: kvrank_bench_floor --layers L --d D --q-rows M --k-rows N [--threads T] | "
                 "--blas-info\n");
    return argc < 2 ? 2 : 0;
  }
  const long layers = parse_flag(argc, argv, "--layers", 1);
  const long d = parse_flag(argc, argv, "--d", 768);
  const long q_rows = parse_flag(argc, argv, "--q-rows", d);
  const long k_rows = parse_flag(argc, argv, "--k-rows", d);
  const long threads = parse_flag(argc, argv, "--threads", 0);
  if (layers < 1 || d < 1 || q_rows < 1 || k_rows < 1 || threads < 0) {
    std::fprintf(stderr, "kvrank_bench_floor: every size must be positive\n");
    return 2;
  }
  kvrank_bench::set_threads(threads);
  const RowMatrixF q = RowMatrixF::Random(q_rows, d);
  const RowMatrixF k = RowMatrixF::Random(k_rows, d);
  Eigen::MatrixXf q_gram(q_rows, q_rows), k_gram(k_rows, k_rows);
  syrk(k, k_gram);  // warm-up: BLAS thread pool start, page faults of the outputs

  const auto start = std::chrono::steady_clock::now();
  for (long layer = 0; layer < layers; ++layer) {
    syrk(q, q_gram);
    syrk(k, k_gram);
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  std::printf("%.3f\n", elapsed.count());
  return 0;
}

// The metric's BLAS/LAPACK calls (see blas.hpp).
#include "metric/blas.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/memory_limit_text.hpp"
#include "kvrank/base/memory_limit.hpp"
#include "metric/double_syrk_kernel.hpp"
#include "metric/float_syrk_kernel.hpp"
#include "metric/thread_pool.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef KVRANK_HAVE_OPENBLAS
#include <cblas.h>

extern "C" {
// OpenBLAS's pool of work buffers (memory.c; exported by its shared library, weak so that a build
// without them still links): a slot freed keeps its buffer mapped for the next caller.
[[gnu::weak]] void* blas_memory_alloc(int procpos);
[[gnu::weak]] void blas_memory_free(void* buffer);
}
#endif
#ifdef KVRANK_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace kvrank::detail {
namespace {

// Row tile of onednn_syrk_lower and column panel of the TRMM on oneDNN: the redundant work of a
// tile's diagonal block is tile/rows of the whole; 256 keeps it small and each SGEMM large.
constexpr Index kOnednnTile = 256;

/// B (rows × n, ldb) := B · L for L (n × n, ldl) lower triangular, on oneDNN's SGEMM: column panel
/// J of the result is B[:, J] · tril(L[J, J]) + B[:, after J] · L[after J, J], which reads only
/// columns J and after of B, so the panels are written back left to right, in place.
void onednn_trmm_right_lower(Index rows, Index n, const float* l, Index ldl, float* b, Index ldb) {
  std::vector<float> diagonal(
      static_cast<std::size_t>(std::min(kOnednnTile, n) * std::min(kOnednnTile, n)));
  std::vector<float> panel(static_cast<std::size_t>(rows * std::min(kOnednnTile, n)));
  for (Index j = 0; j < n; j += kOnednnTile) {
    const Index width = std::min(kOnednnTile, n - j);
    const Index after = j + width;
    for (Index r = 0; r < width; ++r) {
      for (Index c = 0; c < width; ++c) {
        diagonal[r * width + c] = c <= r ? l[(j + r) * ldl + j + c] : 0.0f;
      }
    }
    onednn_sgemm(false, false, rows, width, width, b + j, ldb, diagonal.data(), width, 0.0f,
                 panel.data(), width);
    if (after < n) {
      onednn_sgemm(false, false, rows, width, n - after, b + after, ldb, l + after * ldl + j, ldl,
                   1.0f, panel.data(), width);
    }
    for (Index r = 0; r < rows; ++r) std::copy_n(panel.data() + r * width, width, b + r * ldb + j);
  }
}

using StridedMapF = Eigen::Map<RowMatrixF, 0, Eigen::OuterStride<>>;
using ConstStridedMapF = Eigen::Map<const RowMatrixF, 0, Eigen::OuterStride<>>;
using RowMatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

}  // namespace

int default_thread_count() {
  // What OpenMP programs (and OpenBLAS, numpy, PyTorch) take: OMP_NUM_THREADS when set, at most
  // the processors this process may use, as OpenBLAS caps it; else all of those. Not when kvrank
  // lowered the variable itself to fit a memory limit (memory_limit.hpp): fit_compute_threads
  // then finds that count again, and says why.
  const int processors = usable_processors();
  const bool fitted = is_own_process_marker(std::getenv(kThreadsFittedVariable));
  const int asked = fitted ? 0 : parse_thread_count(std::getenv("OMP_NUM_THREADS"));
  return asked > 0 ? std::min(asked, processors) : processors;
}

int blas_buffers_held() {
#ifdef KVRANK_HAVE_OPENBLAS
  // OpenBLAS's OpenMP build mapped a buffer for each of its threads when it was loaded.
  if (openblas_get_parallel() == 2) return openblas_get_num_threads();
#endif
  return 0;
}

void map_thread_memory(int threads) {
#ifdef _OPENMP
  // The pool's threads and their stacks: libgomp exits 1 when it cannot create one later.
#pragma omp parallel num_threads(threads)
  { [[maybe_unused]] volatile int started = omp_get_thread_num(); }
#endif
#ifdef KVRANK_HAVE_OPENBLAS
  if (blas_memory_alloc == nullptr || blas_memory_free == nullptr) return;
  // Each thread that calls OpenBLAS at the same time takes a buffer of its pool; a buffer that
  // cannot be mapped is retried forever (a hang). So as many as may be taken at once are mapped
  // now, while the room that fit_compute_threads found is there, and freed back to the pool.
  const int callers = blas_nests_in_openmp() ? threads : 1;
  std::vector<void*> held;
  for (int i = 0; i < callers && memory_fits(kBlasBufferBytes + kWorkingReserve); ++i) {
    held.push_back(blas_memory_alloc(0));
  }
  for (void* buffer : held) blas_memory_free(buffer);
#endif
  (void)threads;
}

void set_thread_count(int threads) {
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
#ifdef KVRANK_HAVE_OPENBLAS
  openblas_set_num_threads(threads);
#endif
  (void)threads;
}

HeldThreads hold_calling_thread() {
  HeldThreads saved;
#ifdef _OPENMP
  if (omp_in_parallel()) return saved;  // everything runs on the calling thread already
  saved.openmp = omp_get_max_threads();
  if (saved.openmp > 1) omp_set_num_threads(1);
#endif
#ifdef KVRANK_HAVE_OPENBLAS
  if (blas_nests_in_openmp()) return saved;
  saved.blas = openblas_get_num_threads();
  if (saved.blas > 1) openblas_set_num_threads(1);
#endif
  return saved;
}

void release_calling_thread(const HeldThreads& saved) {
#ifdef _OPENMP
  if (saved.openmp > 1) omp_set_num_threads(saved.openmp);
#endif
#ifdef KVRANK_HAVE_OPENBLAS
  if (saved.blas > 1) openblas_set_num_threads(saved.blas);
#endif
  (void)saved;
}

int available_threads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

std::optional<std::string> openblas_kernels() {
#ifdef KVRANK_HAVE_OPENBLAS
  return std::string(openblas_get_config()) + ", " + openblas_get_corename() + " kernels";
#else
  return std::nullopt;
#endif
}

bool blas_nests_in_openmp() {
#ifdef KVRANK_HAVE_OPENBLAS
  static const bool nests = openblas_get_parallel() != 1;  // 0 sequential, 1 pthreads, 2 OpenMP
  return nests;
#else
  return true;
#endif
}

bool blas_kernels_are_generic() {
#ifdef KVRANK_HAVE_OPENBLAS
  static const bool generic = std::string_view(openblas_get_corename()) == "Prescott";
  return generic;
#else
  return true;
#endif
}

bool blas_kernels_use_avx512() {
#ifdef KVRANK_HAVE_OPENBLAS
  static const bool avx512 = [] {
    const std::string_view core = openblas_get_corename();
    return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
  }();
  return avx512;
#else
  return false;
#endif
}

bool cpu_has_avx512() {
  static const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return avx512;
}

void onednn_sgemm(bool trans_a, bool trans_b, Index rows, Index cols, Index inner, const float* a,
                  Index lda, const float* b, Index ldb, float beta, float* c, Index ldc) {
#ifdef KVRANK_HAVE_DNNL
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', rows, cols,
                                          inner, 1.0f, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    throw std::runtime_error("oneDNN sgemm failed with status " +
                             std::to_string(static_cast<int>(status)));
  }
#else
  (void)trans_a, (void)trans_b, (void)rows, (void)cols, (void)inner, (void)a, (void)lda, (void)b;
  (void)ldb, (void)beta, (void)c, (void)ldc;
  throw std::runtime_error("onednn_sgemm: kvrank was built without oneDNN");
#endif
}

void onednn_syrk_lower(Index rows, Index inner, const float* a, Index lda, float* c, Index ldc) {
  for (Index i0 = 0; i0 < rows; i0 += kOnednnTile) {
    const Index tile = std::min(kOnednnTile, rows - i0);
    // Rows [i0, i0 + tile) of the lower triangle, columns [0, i0 + tile): A[i0:] · A[:i0 + tile]ᵀ.
    onednn_sgemm(false, true, tile, i0 + tile, inner, a + i0 * lda, lda, a, lda, 0.0f, c + i0 * ldc,
                 ldc);
  }
}

namespace {

/// C (rows × cols, ldc) = op(A) · op(B) + beta · C, all row-major, beta 0 or 1 (gemm, gemm_abt).
void row_major_sgemm(FloatKernels kernels, bool trans_a, bool trans_b, Index rows, Index cols,
                     Index inner, const float* a, Index lda, const float* b, Index ldb, float beta,
                     float* c, Index ldc) {
  if (rows == 0 || cols == 0) return;
  if (kernels == FloatKernels::onednn) {
    onednn_sgemm(trans_a, trans_b, rows, cols, inner, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#ifdef KVRANK_HAVE_OPENBLAS
  cblas_sgemm(
      CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
      static_cast<blasint>(rows), static_cast<blasint>(cols), static_cast<blasint>(inner), 1.0f, a,
      static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
#else
  StridedMapF out(c, rows, cols, Eigen::OuterStride<>(ldc));
  if (beta == 0.0f) out.setZero();
  const ConstStridedMapF a_stored(a, trans_a ? inner : rows, trans_a ? rows : inner,
                                  Eigen::OuterStride<>(lda));
  const ConstStridedMapF b_stored(b, trans_b ? cols : inner, trans_b ? inner : cols,
                                  Eigen::OuterStride<>(ldb));
  if (trans_a && trans_b) {
    out.noalias() += a_stored.transpose() * b_stored.transpose();
  } else if (trans_a) {
    out.noalias() += a_stored.transpose() * b_stored;
  } else if (trans_b) {
    out.noalias() += a_stored * b_stored.transpose();
  } else {
    out.noalias() += a_stored * b_stored;
  }
#endif
}

}  // namespace

void gemm(FloatKernels kernels, bool trans_a, Index rows, Index cols, Index inner, const float* a,
          Index lda, const float* b, Index ldb, float beta, float* c, Index ldc) {
  row_major_sgemm(kernels, trans_a, false, rows, cols, inner, a, lda, b, ldb, beta, c, ldc);
}

void gemm_abt(FloatKernels kernels, Index rows, Index cols, Index inner, const float* a, Index lda,
              const float* b, Index ldb, float* c, Index ldc) {
  row_major_sgemm(kernels, false, true, rows, cols, inner, a, lda, b, ldb, 0.0f, c, ldc);
}

void trmm_right_lower(FloatKernels kernels, Index rows, Index n, const float* l, Index ldl,
                      float* b, Index ldb) {
  if (rows == 0 || n == 0) return;
  if (kernels == FloatKernels::onednn) {
    onednn_trmm_right_lower(rows, n, l, ldl, b, ldb);
    return;
  }
#ifdef KVRANK_HAVE_OPENBLAS
  cblas_strmm(CblasRowMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit,
              static_cast<blasint>(rows), static_cast<blasint>(n), 1.0f, l,
              static_cast<blasint>(ldl), b, static_cast<blasint>(ldb));
#else
  StridedMapF target(b, rows, n, Eigen::OuterStride<>(ldb));
  const RowMatrixF product =
      target * ConstStridedMapF(l, n, n, Eigen::OuterStride<>(ldl)).triangularView<Eigen::Lower>();
  target = product;
#endif
}

void syrk_upper(FloatKernels kernels, Index rows, Index inner, const float* a, Index lda, float* c,
                Index ldc) {
  if (rows == 0) return;
  if (inner == 0) {
    for (Index j = 0; j < rows; ++j) std::fill(c + j * ldc, c + j * ldc + j + 1, 0.0f);
    return;
  }
  if (kernels == FloatKernels::onednn) {             // generic OpenBLAS kernels: gram_backend.hpp
    onednn_syrk_lower(rows, inner, a, lda, c, ldc);  // row-major lower = column-major upper
    return;
  }
#ifdef KVRANK_HAVE_OPENBLAS
  // Row-major A·Aᵀ is column-major (Aᵀ)ᵀ·Aᵀ: the upper triangle of C.
  cblas_ssyrk(CblasColMajor, CblasUpper, CblasTrans, static_cast<blasint>(rows),
              static_cast<blasint>(inner), 1.0f, a, static_cast<blasint>(lda), 0.0f, c,
              static_cast<blasint>(ldc));
#else
  Eigen::Map<MatrixF, 0, Eigen::OuterStride<>> out(c, rows, rows, Eigen::OuterStride<>(ldc));
  out.triangularView<Eigen::Upper>().setZero();
  out.selfadjointView<Eigen::Upper>().rankUpdate(
      ConstStridedMapF(a, rows, inner, Eigen::OuterStride<>(lda)));
#endif
}

void syrk_upper_tiled(FloatKernels kernels, Index rows, Index inner, const float* a, Index lda,
                      float* c, Index ldc) {
  constexpr Index kTile = 256;
  const Index tiles = (rows + kTile - 1) / kTile;
  [[maybe_unused]] const bool nested = blas_nests_in_openmp();  // only in the OpenMP clause
  ParallelFailure failure;
  // A region even for one tile: inside one the BLAS runs on its calling thread alone.
#pragma omp parallel for schedule(dynamic, 1) if (nested)
  for (Index t = 0; t < tiles; ++t) {
    failure.run([&] {
      const Index j0 = (tiles - 1 - t) * kTile;  // the widest tiles first
      const Index tile = std::min(kTile, rows - j0);
      // Columns [j0, j0 + tile) of the column-major C, above their diagonal block, are the rows of
      // the row-major tile × j0 product A[j0:j0 + tile] · A[0:j0]ᵀ.
      gemm_abt(kernels, tile, j0, inner, a + j0 * lda, lda, a, lda, c + j0 * ldc, ldc);
      syrk_upper(kernels, tile, inner, a + j0 * lda, lda, c + j0 * ldc + j0, ldc);
    });
  }
  failure.rethrow();
}

namespace {

/// How many slices of the inner dimension syrk_double splits A into, each a single-threaded SYRK,
/// summed in double in slice order: for a few rows over a long inner dimension (the contraction's
/// H × H over M_h chunks, 128 rows × 131 072 for DeepSeek-V3), where the BLAS's threads, which
/// split the rows, leave one of two idle a third of the time. The count follows the shape alone,
/// never the threads, so the sums and their last digits are the same on any number of threads
/// (one slice per thread moved a V3 layer's head_norm by 1.5e-7 between 1 and 2 threads).
Index inner_slices(Index rows, Index inner) {
  constexpr Index kSplitWork = Index(1) << 22;  // multiply-adds below which a fork costs more
  constexpr Index kMostSlices = 16;             // more than the threads of most machines
  if (inner < 8 * rows || rows * rows * inner < kSplitWork) return 1;
  return std::clamp<Index>(rows * rows * inner / kSplitWork, 1,
                           std::min(kMostSlices, inner / rows));
}

/// Rows of A up to which a slice takes kvrank's own float32 kernel (float_syrk_kernel.hpp): one
/// tile of syrk_upper_tiled, so on one thread either way.
constexpr Index kKernelRows = 256;

/// The upper triangle of one slice's A·Aᵀ into C (rows × rows): few rows on kvrank's own kernel
/// where the CPU has it (1.3× OpenBLAS's SSYRK at V3's 128 × 8172), else by tiles — on their
/// own thread inside the slices' region, shared out when there is one slice (which leaves the
/// region out): neither follows the thread count.
void slice_syrk_upper(FloatKernels kernels, Index rows, Index inner, const float* a, Index lda,
                      float* c) {
  if (rows <= kKernelRows && float_syrk_kernel_supported())
    return float_syrk_kernel(rows, inner, a, lda, c, rows);
  syrk_upper_tiled(kernels, rows, inner, a, lda, c, rows);
}

}  // namespace

MatrixD syrk_double(FloatKernels kernels, Index rows, Index inner, const float* a, Index lda) {
  const Index slices = inner_slices(rows, inner);
  std::vector<MatrixF> partial(static_cast<std::size_t>(slices));
  [[maybe_unused]] const bool nested = blas_nests_in_openmp();  // only in the OpenMP clause
  ParallelFailure failure;
#pragma omp parallel for schedule(static) if (slices > 1 && nested)
  for (Index s = 0; s < slices; ++s) {
    failure.run([&] {
      const Index begin = inner * s / slices;
      const Index end = inner * (s + 1) / slices;
      partial[s] = MatrixF::Zero(rows, rows);
      slice_syrk_upper(kernels, rows, end - begin, a + begin, lda, partial[s].data());
    });
  }
  failure.rethrow();
  MatrixD out = MatrixD::Zero(rows, rows);
  for (const MatrixF& part : partial) out += part.cast<double>();  // the slices summed in double
  out.triangularView<Eigen::StrictlyLower>() = out.transpose();
  return out;
}

DoubleSyrkPath syrk_in_double_path() {
  return double_syrk_kernel_supported() ? DoubleSyrkPath::kernel : DoubleSyrkPath::blas;
}

MatrixD syrk_in_double(Index rows, Index inner, const float* a, Index lda) {
  return syrk_in_double(syrk_in_double_path(), rows, inner, a, lda);
}

MatrixD syrk_in_double(DoubleSyrkPath path, Index rows, Index inner, const float* a, Index lda) {
  if (rows == 0 || inner == 0) return MatrixD::Zero(rows, rows);
  if (path == DoubleSyrkPath::kernel && double_syrk_kernel_supported()) {
    MatrixD out(rows, rows);
    // Over the threads where the call has them (diff's stacked bases, from serial code) and the
    // product is worth a fork/join; the same bits either way.
    const bool threaded = available_threads() > 1 && rows > 8 && rows * rows * inner >= (1 << 22);
    double_syrk_kernel(rows, inner, a, lda, out.data(), threaded);
    return out;
  }
  const RowMatrixD values =
      ConstStridedMapF(a, rows, inner, Eigen::OuterStride<>(lda)).cast<double>();
  MatrixD out = MatrixD::Zero(rows, rows);
#ifdef KVRANK_HAVE_OPENBLAS
  cblas_dsyrk(CblasColMajor, CblasUpper, CblasTrans, static_cast<blasint>(rows),
              static_cast<blasint>(inner), 1.0, values.data(), static_cast<blasint>(inner), 0.0,
              out.data(), static_cast<blasint>(rows));
#else
  out.selfadjointView<Eigen::Upper>().rankUpdate(values);
#endif
  out.triangularView<Eigen::StrictlyLower>() = out.transpose();
  return out;
}

}  // namespace kvrank::detail

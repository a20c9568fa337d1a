// Private: the few float32 BLAS and double LAPACK calls of the metric, row-major, on OpenBLAS when
// kvrank is built with it and on Eigen's own products otherwise. The float32 GEMM, TRMM and SYRK
// run on oneDNN's SGEMM instead when the caller asks for FloatKernels::onednn. Which one is chosen
// above this wrapper (diversity.cpp, from gram_backend.hpp's float_products_on_onednn() and the
// memory left): this file calls nothing above it. Implemented in blas.cpp (threads, products),
// eigensolvers.cpp (LAPACK's eigenvalues and Cholesky) and svd.cpp (singular vectors, dgemm).
//
// Threads: OpenBLAS built on OpenMP (what CMake looks for first) runs on the same libgomp pool as
// kvrank's `#pragma omp` loops and single-threaded inside them, so per-head loops may call BLAS.
// With the pthreads OpenBLAS they must not (each call would start BLAS threads on top of the
// loop's): blas_nests_in_openmp() tells which.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/base/eigen.hpp"
#include "kvrank/base/memory_limit.hpp"

namespace kvrank::detail {

/// What runs the float32 GEMM, TRMM and SYRK below: the BLAS (OpenBLAS, or Eigen's products
/// without it), or oneDNN's SGEMM.
enum class FloatKernels { blas, onednn };

/// The thread count `--threads 0` (the default) asks for: OMP_NUM_THREADS when set, at most the
/// processors this process may use; else all of those.
int default_thread_count();
/// How many per-thread buffers OpenBLAS mapped when it was loaded (its OpenMP build maps one per
/// thread it starts with; 0 for other builds): address space already spent (memory_limit.hpp).
int blas_buffers_held();
/// Sets the threads of the BLAS and of OpenMP (at least 1).
void set_thread_count(int threads);
/// Starts `threads` OpenMP threads and maps the OpenBLAS buffers that many callers take at once,
/// so that neither meets a memory limit later, when one layer's data has filled the room: OpenBLAS
/// retries a failed buffer forever, libgomp exits 1 (memory_limit.hpp).
void map_thread_memory(int threads);
/// The thread counts hold_calling_thread() lowered, for release_calling_thread() (1: unchanged).
struct HeldThreads {
  int openmp = 1;
  int blas = 1;
};
/// Holds BLAS/LAPACK calls and parallel loops started from the calling thread to it alone: its own
/// OpenMP count, and a pthreads OpenBLAS's count, set to 1 (compute.hpp's CallingThreadOnly).
/// Inside a parallel region it changes nothing.
HeldThreads hold_calling_thread();
/// Restores what hold_calling_thread() lowered.
void release_calling_thread(const HeldThreads& saved);

/// Address space oneDNN may take for one layer beside the buffers kvrank hands it: its compiled
/// kernels, and per thread the scratchpads and packed blocks of its products. Under `ulimit -v` it
/// crashes (SIGSEGV, or an abort in its unwinding) where an allocation fails, so a layer runs on it
/// only with this much room to spare (diversity.cpp), and its kernels are compiled aside only with
/// the first thread's share (gram_backend.cpp). Measured on a d 4096 layer
/// (docs/input-limits.md): the bf16 Grams took 85 MiB beyond their packed copies on one thread.
inline constexpr std::uint64_t kOnednnReserve = 128 * kMiB;
inline constexpr std::uint64_t kOnednnPerThread = 32 * kMiB;
inline constexpr std::uint64_t kOnednnFirstThread = kOnednnReserve + kOnednnPerThread;

/// The threads a parallel region started now would get (1 inside one, and without OpenMP).
int available_threads();

/// OpenBLAS's build and the kernels it picked ("OpenBLAS 0.3.21 ..., Haswell kernels"), nullopt
/// without OpenBLAS.
std::optional<std::string> openblas_kernels();

/// Whether BLAS/LAPACK may be called from inside an OpenMP parallel loop (see above).
bool blas_nests_in_openmp();

/// Whether the float32 products run without SIMD kernels of their own: no OpenBLAS (Eigen's
/// products, built for baseline x86-64), or OpenBLAS on its generic Prescott (SSE3) kernels because
/// it does not recognise the CPU (Debian 12's 0.3.21 on 5th-generation Xeon or Zen 5).
bool blas_kernels_are_generic();

/// Whether OpenBLAS runs AVX-512 kernels: the cores it has them for (SkylakeX, and Cooperlake and
/// SapphireRapids, which differ from it only in bf16 routines). False without OpenBLAS.
bool blas_kernels_use_avx512();

/// Whether the CPU runs the AVX-512 subsets (F, BW, VL, DQ) that OpenBLAS's and oneDNN's AVX-512
/// float kernels need.
bool cpu_has_avx512();

/// C (rows × cols, ldc) = op(A) · op(B) + beta · C on oneDNN's SGEMM, op(X) = X or Xᵀ (row-major
/// BLAS conventions); throws std::runtime_error when oneDNN fails or kvrank was built without it.
void onednn_sgemm(bool trans_a, bool trans_b, Index rows, Index cols, Index inner, const float* a,
                  Index lda, const float* b, Index ldb, float beta, float* c, Index ldc);

/// The row-major lower triangle (diagonal included) of C = A · Aᵀ for A (rows × inner, lda) on
/// oneDNN's SGEMM — the upper triangle of a column-major C — in row tiles; of each tile's diagonal
/// block the other triangle is written too. rows, inner > 0.
void onednn_syrk_lower(Index rows, Index inner, const float* a, Index lda, float* c, Index ldc);

/// C (rows × cols, ldc) = op(A) · B + beta · C, op(A) = A (rows × inner, lda) or, with trans_a,
/// the transpose of A (inner × rows, lda). B is inner × cols (ldb).
void gemm(FloatKernels kernels, bool trans_a, Index rows, Index cols, Index inner, const float* a,
          Index lda, const float* b, Index ldb, float beta, float* c, Index ldc);

/// C (rows × cols, ldc) = A · Bᵀ for A (rows × inner, lda) and B (cols × inner, ldb), row-major.
void gemm_abt(FloatKernels kernels, Index rows, Index cols, Index inner, const float* a, Index lda,
              const float* b, Index ldb, float* c, Index ldc);

/// B (rows × n, ldb) := B · L for L (n × n, ldl) lower triangular.
void trmm_right_lower(FloatKernels kernels, Index rows, Index n, const float* l, Index ldl,
                      float* b, Index ldb);

/// The upper triangle (diagonal included) of A · Aᵀ for A (rows × inner, lda, row-major) into the
/// column-major C (rows × rows, ldc); the strict lower triangle is left as it was.
void syrk_upper(FloatKernels kernels, Index rows, Index inner, const float* a, Index lda, float* c,
                Index ldc);

/// syrk_upper by column tiles of the triangle shared out over the threads, each tile's products
/// on its thread alone (the rows above its diagonal block by one GEMM, the block by a SYRK): the
/// same bits on any number of threads, where one SYRK over all threads splits its sums as the
/// thread count does (an MLA layer's float32 latent Gram differed between 1 and 2 threads).
void syrk_upper_tiled(FloatKernels kernels, Index rows, Index inner, const float* a, Index lda,
                      float* c, Index ldc);

/// A · Aᵀ for A (rows × inner, lda) in float32, returned in double with both triangles. A long
/// inner dimension is cut into slices that depend on the shape only, a single-threaded SYRK each,
/// shared out over the threads and summed in double: the same bits on any number of threads.
MatrixD syrk_double(FloatKernels kernels, Index rows, Index inner, const float* a, Index lda);

/// What forms syrk_in_double's product: kvrank's AVX-512 kernel (double_syrk_kernel.hpp: each
/// entry one FMA chain over the depth in order), or the BLAS's DSYRK on A cast to double (Eigen's
/// rankUpdate without OpenBLAS). The two agree to double round-off, not bit for bit.
enum class DoubleSyrkPath { kernel, blas };

/// The path syrk_in_double() takes: the kernel where the CPU has AVX-512F, at every size
/// (bench/double_syrk.cpp, one thread: 2.3–2.4× OpenBLAS's DSYRK on the per-head shapes, 1.3–3.4×
/// from 2 rows up, never slower), over the threads the call has (diff's stacked bases, from serial
/// code) or on the calling thread (inside a parallel loop over heads). Its bits do not depend on
/// the threads: the BLAS's split of the depth made diff's last digits depend on them.
DoubleSyrkPath syrk_in_double_path();

/// A · Aᵀ for A (rows × inner, lda) accumulated in double (the entries of A are float32), both
/// triangles, exactly symmetric: for the small per-head products whose rank must survive round-off.
MatrixD syrk_in_double(Index rows, Index inner, const float* a, Index lda);
/// The same on the path given (tests, the benchmark); `kernel` runs the BLAS where the CPU has no
/// AVX-512F.
MatrixD syrk_in_double(DoubleSyrkPath path, Index rows, Index inner, const float* a, Index lda);

/// Replaces a symmetric positive definite matrix (lower triangle read) by its lower Cholesky
/// factor L (L Lᵀ = the matrix, zeros above the diagonal); false, leaving it unspecified, when the
/// matrix is not positive definite.
bool cholesky_lower(MatrixD& matrix);

/// M = U Σ Vᵀ for a square M: its left and right singular vectors (LAPACK's dgesdd on the calling
/// thread with OpenBLAS, else Eigen's BDCSVD) (svd.cpp).
void singular_vectors(const MatrixD& m, MatrixD& u, MatrixD& v);

/// A · B in double on OpenBLAS's dgemm (calling thread only), else Eigen's product: at d_h = 128
/// dgemm's kernels take about half the time of Eigen's built for baseline x86-64 (svd.cpp).
MatrixD product(const MatrixD& a, const Eigen::Ref<const MatrixD>& b);

/// Eigenvalues of a symmetric matrix, ascending.
std::vector<double> symmetric_eigenvalues(const MatrixD& symmetric);

/// The `count` largest eigenvalues of a symmetric matrix (ascending, into `values`) and their
/// eigenvectors (the columns of `vectors`, same order): LAPACK's dsyevr with OpenBLAS, which
/// computes only those eigenpairs, else all of Eigen's solver's. 0 < count ≤ the order.
void top_symmetric_eigenpairs(const MatrixD& symmetric, int count, VectorD& values,
                              MatrixD& vectors);

/// Eigenvalues of Fᵀ Q F where P = F Fᵀ, ascending, or nullopt when P is not positive definite
/// (its Cholesky factor does not exist). P and Q symmetric k × k.
std::optional<std::vector<double>> congruent_eigenvalues(const MatrixD& p, const MatrixD& q);

}  // namespace kvrank::detail

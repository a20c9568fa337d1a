// The singular vectors of a small square matrix (blas.hpp): LAPACK's dgesdd where kvrank is built
// with OpenBLAS, Eigen's BDCSVD otherwise. At order 128 (a head's d_h) dgesdd on OpenBLAS's
// kernels took 2.4 ms against 6–10 ms for BDCSVD built for baseline x86-64: `kvrank plan` aligns
// heads with thousands of these (docs/plan.md, "Cost"). Also the double product of such matrices
// on OpenBLAS's dgemm (its kernels, where Eigen's are built for baseline x86-64).
#include <Eigen/SVD>
#include <algorithm>
#include <vector>

#include "metric/blas.hpp"

#ifdef KVRANK_HAVE_OPENBLAS
extern "C" {
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, std::size_t jobz_len);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc, std::size_t transa_len,
            std::size_t transb_len);
}
#endif

namespace kvrank::detail {

void singular_vectors(const MatrixD& m, MatrixD& u, MatrixD& v) {
#ifdef KVRANK_HAVE_OPENBLAS
  if (const int n = static_cast<int>(m.rows()); n > 0 && m.cols() == n) {
    const HeldThreads saved = hold_calling_thread();  // no threads for one small matrix
    MatrixD a = m;
    VectorD s(n);
    MatrixD vt(n, n);
    u.resize(n, n);
    std::vector<int> iwork(static_cast<std::size_t>(8 * n));
    int info = 0;
    double size = 0;
    const int query = -1;
    dgesdd_("S", &n, &n, a.data(), &n, s.data(), u.data(), &n, vt.data(), &n, &size, &query,
            iwork.data(), &info, 1);
    std::vector<double> work(static_cast<std::size_t>(std::max(1.0, size)));
    const int lwork = static_cast<int>(work.size());
    if (info == 0)
      dgesdd_("S", &n, &n, a.data(), &n, s.data(), u.data(), &n, vt.data(), &n, work.data(), &lwork,
              iwork.data(), &info, 1);
    release_calling_thread(saved);
    if (info == 0) {
      v = vt.transpose();
      return;
    }
    // No convergence (never seen on these matrices): Eigen's solver below.
  }
#endif
  Eigen::BDCSVD<MatrixD> svd(m, Eigen::ComputeThinU | Eigen::ComputeThinV);
  u = svd.matrixU();
  v = svd.matrixV();
}

MatrixD product(const MatrixD& a, const Eigen::Ref<const MatrixD>& b) {
#ifdef KVRANK_HAVE_OPENBLAS
  const int m = static_cast<int>(a.rows()), n = static_cast<int>(b.cols());
  const int k = static_cast<int>(a.cols());
  MatrixD c(m, n);
  if (m > 0 && n > 0 && k > 0 && b.rows() == k) {
    const HeldThreads saved = hold_calling_thread();
    const double one = 1, zero = 0;
    const int lda = static_cast<int>(a.outerStride()), ldb = static_cast<int>(b.outerStride());
    dgemm_("N", "N", &m, &n, &k, &one, a.data(), &lda, b.data(), &ldb, &zero, c.data(), &m, 1, 1);
    release_calling_thread(saved);
    return c;
  }
#endif
  return a * b;
}

}  // namespace kvrank::detail

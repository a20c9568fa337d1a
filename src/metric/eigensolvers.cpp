// The metric's LAPACK eigensolvers and Cholesky factorisation (see blas.hpp): LAPACK's where
// kvrank is built with OpenBLAS, Eigen's otherwise.
//
// Every one of them runs on the calling thread alone (CallingThreadOnly). OpenBLAS threads each
// level-2 call of the tridiagonal reduction (no size threshold in 0.3.21) unless it is called from
// inside an active parallel region: called from serial code (a layer's H × H similarity, or the
// per-head loop of a small model, which does not go parallel) every call woke the pool, and
// data/tiny/mha's JSON took 0.25 s on 2 threads against 0.012 s on one. Below order 128 the
// calling thread alone was never slower, at 512 (a 512-head layer) within the noise; and the
// threads' partial sums moved the last digits of a V3 layer's eigenvalues with the thread count.
#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

#include "kvrank/metric/compute.hpp"
#include "metric/blas.hpp"
#include "metric/lapack.hpp"

namespace kvrank::detail {
namespace {

#ifdef KVRANK_HAVE_OPENBLAS
/// LAPACK's optimal workspace from a query call (lwork = −1) of `call(work, lwork)`.
template <typename Call>
std::vector<double> lapack_workspace(Call call) {
  double size = 0;
  const int query = -1;
  call(&size, &query);
  return std::vector<double>(static_cast<std::size_t>(std::max(1.0, size)));
}

#endif

}  // namespace

std::vector<double> symmetric_eigenvalues(const MatrixD& symmetric) {
  const int n = static_cast<int>(symmetric.rows());
  if (n == 0) return {};
#ifdef KVRANK_HAVE_OPENBLAS
  const CallingThreadOnly one_thread;
  MatrixD a = symmetric;
  std::vector<double> values(static_cast<std::size_t>(n));
  int info = 0;
  auto call = [&](double* work, const int* lwork) {
    dsyev_("N", "U", &n, a.data(), &n, values.data(), work, lwork, &info, 1, 1);
  };
  std::vector<double> work = lapack_workspace(call);
  const int lwork = static_cast<int>(work.size());
  call(work.data(), &lwork);
  if (info == 0) return values;
    // No convergence (never seen on these matrices): Eigen's solver below.
#endif
  Eigen::SelfAdjointEigenSolver<MatrixD> solver(symmetric, Eigen::EigenvaluesOnly);
  return {solver.eigenvalues().begin(), solver.eigenvalues().end()};
}

#ifdef KVRANK_HAVE_OPENBLAS
namespace {

/// dsyevr's eigenpairs il..iu (1-based, ascending); false when it did not converge.
bool lapack_eigenpairs(const MatrixD& symmetric, int il, int iu, VectorD& values,
                       MatrixD& vectors) {
  const int n = static_cast<int>(symmetric.rows());
  const CallingThreadOnly one_thread;
  MatrixD a = symmetric;
  const int count = iu - il + 1;
  VectorD w(n);
  vectors.resize(n, count);
  std::vector<int> support(2 * static_cast<std::size_t>(count));
  const double unused = 0, abstol = 0;
  int found = 0, info = 0;
  auto call = [&](double* work, const int* lwork, int* iwork, const int* liwork) {
    dsyevr_("V", "I", "U", &n, a.data(), &n, &unused, &unused, &il, &iu, &abstol, &found, w.data(),
            vectors.data(), &n, support.data(), work, lwork, iwork, liwork, &info, 1, 1, 1);
  };
  double work_size = 0;
  int iwork_size = 0;
  const int query = -1;
  call(&work_size, &query, &iwork_size, &query);
  std::vector<double> work(static_cast<std::size_t>(std::max(1.0, work_size)));
  std::vector<int> iwork(static_cast<std::size_t>(std::max(1, iwork_size)));
  const int lwork = static_cast<int>(work.size()), liwork = static_cast<int>(iwork.size());
  call(work.data(), &lwork, iwork.data(), &liwork);
  if (info != 0 || found != count) return false;
  values = w.head(count);
  return true;
}

}  // namespace
#endif

void top_symmetric_eigenpairs(const MatrixD& symmetric, int count, VectorD& values,
                              MatrixD& vectors) {
#ifdef KVRANK_HAVE_OPENBLAS
  const int n = static_cast<int>(symmetric.rows());
  if (lapack_eigenpairs(symmetric, n - count + 1, n, values, vectors)) return;
    // No convergence (never seen on these matrices): Eigen's solver below.
#endif
  const Eigen::SelfAdjointEigenSolver<MatrixD> solver(symmetric);
  values = solver.eigenvalues().tail(count);
  vectors = solver.eigenvectors().rightCols(count);
}

bool cholesky_lower(MatrixD& matrix) {
  const int n = static_cast<int>(matrix.rows());
  if (n == 0) return true;
#ifdef KVRANK_HAVE_OPENBLAS
  // OpenBLAS's own dpotrf is blocked (Eigen's LLT took 112 ms of a V3 layer); on the calling
  // thread, as the eigensolvers: threaded, its sums moved with the thread count.
  const CallingThreadOnly one_thread;
  int info = 0;
  dpotrf_("L", &n, matrix.data(), &n, &info, 1);
  if (info != 0) return false;
  matrix.triangularView<Eigen::StrictlyUpper>().setZero();
  return true;
#else
  Eigen::LLT<MatrixD> cholesky(matrix);
  if (cholesky.info() != Eigen::Success) return false;
  matrix = cholesky.matrixL();
  return true;
#endif
}

std::optional<std::vector<double>> congruent_eigenvalues(const MatrixD& p, const MatrixD& q) {
  const int n = static_cast<int>(p.rows());
  if (n == 0) return std::vector<double>{};
#ifdef KVRANK_HAVE_OPENBLAS
  // dsygv itype 2: eigenvalues of A·B, B = UᵀU — those of U A Uᵀ = Fᵀ Q F with F = Uᵀ.
  const CallingThreadOnly one_thread;
  MatrixD a = q;
  MatrixD b = p;
  std::vector<double> values(static_cast<std::size_t>(n));
  const int itype = 2;
  int info = 0;
  auto call = [&](double* work, const int* lwork) {
    dsygv_(&itype, "N", "U", &n, a.data(), &n, b.data(), &n, values.data(), work, lwork, &info, 1,
           1);
  };
  std::vector<double> work = lapack_workspace(call);
  const int lwork = static_cast<int>(work.size());
  call(work.data(), &lwork);
  if (info == 0) return values;
  if (info > n) return std::nullopt;  // P is not positive definite
#endif
  MatrixD f = p;
  if (!cholesky_lower(f)) return std::nullopt;
  // Fᵀ Q F with F lower triangular: two triangular products.
  const MatrixD q_f = q * f.triangularView<Eigen::Lower>();
  return symmetric_eigenvalues(f.transpose().triangularView<Eigen::Upper>() * q_f);
}

}  // namespace kvrank::detail

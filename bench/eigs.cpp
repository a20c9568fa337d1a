// kvrank_bench_eigs — the per-head eigenproblem of a JSON run (docs/performance.md, "Where the time
// goes"): σ(A_h)² = λ(Fᵀ Q F), P = F Fᵀ, from a head's two d_h × d_h blocks P = LᵀL and Q = RᵀR,
// by the library's detail::congruent_eigenvalues (LAPACK dsygv itype 2, eigenvalues only) against
//   cached     the same dsygv, its workspace asked once instead of on every call
//   dqds       dpotrf, dsygst, dsytrd as dsygv does, then the tridiagonal T = L D Lᵀ (dpttrf) and
//              its eigenvalues by dqds (dlasq2 on the qd array D_i, D_i l_i²) in place of dsterf
//   svd        σ as singular values: P = F Fᵀ with F upper (Cholesky of P in reversed order),
//              Q = UᵀU (dpotrf), so Fᵀ Q F = (U F)ᵀ(U F) with U F upper triangular (dtrmm); then
//              dgebrd and dqds on the bidiagonal (dlasq1)
//   trmm       dsygv's steps with dsygst's U Q Uᵀ as two level-3 dtrmm, then dsytrd and dsterf
//   lanes      kvrank's own solver, eight heads at a time in the lanes of a zmm (eigen_lanes.hpp;
//              timed over batches of 8 heads, per head)
// and the last steps alone on the same heads (dsterf against dpttrf + dlasq2 on one tridiagonal;
// dgebrd and dlasq1 of U F), each the fastest of --rounds passes over the heads (interleaved, one
// thread), on random heads of L, R: --rows × --d Gaussian values rounded to bf16 ("plain"), the
// same with 4 columns of L scaled by 1e-3 ("scaled"), and with L's last column its first plus 1e-7
// noise ("near-deficient"). Agreement: max relative difference of σ to dsygv's and to a long double
// reference (Cholesky and U F in long double, then Eigen's one-sided Jacobi SVD, accurate to high
// relative accuracy), over σ ≥ 1e-8 σ_max and over σ ≥ 1e-4 σ_max.
//
//   kvrank_bench_eigs --heads 8 --rounds 20 --d 128 --rows 4096
#include <Eigen/Cholesky>
#include <Eigen/SVD>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <random>
#include <vector>

#include "bench_flags.hpp"
#include "io/safetensors_writer.hpp"
#include "kvrank/base/eigen.hpp"
#include "kvrank/io/dtype.hpp"
#include "metric/blas.hpp"
#include "metric/eigen_lanes.hpp"
#include "metric/lapack.hpp"

#ifndef KVRANK_HAVE_OPENBLAS
int main() {
  std::puts("kvrank_bench_eigs: built without OpenBLAS (LAPACK); nothing to compare");
  return 0;
}
#else
#include <cblas.h>

namespace {

using kvrank::Index;
using kvrank::MatrixD;
using MatrixL = Eigen::Matrix<long double, Eigen::Dynamic, Eigen::Dynamic>;
using Sigmas = std::vector<double>;  // descending

struct Head {
  MatrixD p, q;
};

/// Gaussian values rounded to bf16 (as the weights are), seeded.
MatrixD bf16_gaussian(Index rows, Index cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  MatrixD m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) {
    m.data()[i] = kvrank::bf16_to_f32(kvrank::f32_to_bf16(normal(rng)));
  }
  return m;
}

enum class Kind { plain, scaled, near_deficient };
const char* const kKindNames[] = {"plain", "scaled", "near-deficient"};

std::vector<Head> make_heads(Kind kind, int count, Index rows, Index d, std::mt19937& rng) {
  std::vector<Head> heads;
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int h = 0; h < count; ++h) {
    MatrixD l = bf16_gaussian(rows, d, rng);
    const MatrixD r = bf16_gaussian(rows, d, rng);
    if (kind == Kind::scaled) {
      for (Index c = 0; c < 4; ++c) l.col(c * (d / 4)) *= 1e-3;
    } else if (kind == Kind::near_deficient) {
      for (Index i = 0; i < rows; ++i) l(i, d - 1) = l(i, 0) + 1e-7 * normal(rng);
    }
    heads.push_back({l.transpose() * l, r.transpose() * r});
  }
  return heads;
}

Sigmas roots_descending(std::vector<double> squares) {
  std::sort(squares.begin(), squares.end(), std::greater<>());
  for (double& s : squares) s = std::sqrt(std::max(s, 0.0));
  return squares;
}

Sigmas library_route(const Head& head) {
  const std::optional<std::vector<double> > values =
      kvrank::detail::congruent_eigenvalues(head.p, head.q);
  return values ? roots_descending(*values) : Sigmas{};
}

/// The heads in batches of kEigenLanes through lane_eigenvalues; σ of the last head.
Sigmas lanes_batches(const Head* heads, std::size_t count) {
  Sigmas last;
  for (std::size_t first = 0; first < count; first += kvrank::detail::kEigenLanes) {
    std::vector<kvrank::detail::EigenProblem> batch;
    for (std::size_t h = first; h < std::min(count, first + kvrank::detail::kEigenLanes); ++h)
      batch.push_back({&heads[h].p, &heads[h].q});
    const auto values = kvrank::detail::lane_eigenvalues(batch);
    last = values.back() ? roots_descending(*values.back()) : Sigmas{};
  }
  return last;
}

Sigmas lanes_route(const Head& head) { return lanes_batches(&head, 1); }

void lanes_all(const std::vector<Head>& heads) { lanes_batches(heads.data(), heads.size()); }

/// dsygv with one workspace per order, asked once.
Sigmas cached_dsygv(const Head& head) {
  static std::vector<double> work;
  const int n = static_cast<int>(head.p.rows()), itype = 2;
  MatrixD a = head.q, b = head.p;
  std::vector<double> values(static_cast<std::size_t>(n));
  int info = 0;
  if (work.empty()) {
    double size = 0;
    const int query = -1;
    dsygv_(&itype, "N", "U", &n, a.data(), &n, b.data(), &n, values.data(), &size, &query, &info, 1,
           1);
    work.resize(static_cast<std::size_t>(std::max(1.0, size)));
  }
  const int lwork = static_cast<int>(work.size());
  dsygv_(&itype, "N", "U", &n, a.data(), &n, b.data(), &n, values.data(), work.data(), &lwork,
         &info, 1, 1);
  return info == 0 ? roots_descending(values) : Sigmas{};
}

/// dsygv's reduction to a tridiagonal T, then λ(T) by dqds instead of dsterf.
Sigmas tridiagonal_dqds(const Head& head) {
  static std::vector<double> work;
  const int n = static_cast<int>(head.p.rows()), itype = 2;
  MatrixD a = head.q, b = head.p;
  std::vector<double> d(n), e(n), tau(n), z(4 * static_cast<std::size_t>(n));
  int info = 0;
  dpotrf_("U", &n, b.data(), &n, &info, 1);
  if (info != 0) return {};
  dsygst_(&itype, "U", &n, a.data(), &n, b.data(), &n, &info, 1);
  if (work.empty()) work.resize(static_cast<std::size_t>(64 * n));
  const int lwork = static_cast<int>(work.size());
  dsytrd_("U", &n, a.data(), &n, d.data(), e.data(), tau.data(), work.data(), &lwork, &info, 1);
  dpttrf_(&n, d.data(), e.data(), &info);  // T = L D Lᵀ, D in d, L's subdiagonal in e
  if (info != 0) return {};
  for (int i = 0; i < n; ++i) {
    z[2 * i] = d[i];
    z[2 * i + 1] = i + 1 < n ? d[i] * e[i] * e[i] : 0.0;
  }
  dlasq2_(&n, z.data(), &info);
  if (info != 0) return {};
  return roots_descending({z.begin(), z.begin() + n});
}

/// dsygv's steps with dsygst's U Q Uᵀ formed by two level-3 dtrmm instead, then dsytrd, dsterf.
Sigmas trmm_reduction(const Head& head) {
  static std::vector<double> work;
  const int n = static_cast<int>(head.p.rows());
  MatrixD a = head.q, u = head.p;
  std::vector<double> d(n), e(n), tau(n);
  int info = 0;
  dpotrf_("U", &n, u.data(), &n, &info, 1);
  if (info != 0) return {};
  cblas_dtrmm(CblasColMajor, CblasRight, CblasUpper, CblasTrans, CblasNonUnit, n, n, 1.0, u.data(),
              n, a.data(), n);
  cblas_dtrmm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, n, 1.0, u.data(),
              n, a.data(), n);
  if (work.empty()) work.resize(static_cast<std::size_t>(64 * n));
  const int lwork = static_cast<int>(work.size());
  dsytrd_("U", &n, a.data(), &n, d.data(), e.data(), tau.data(), work.data(), &lwork, &info, 1);
  dsterf_(&n, d.data(), e.data(), &info);
  if (info != 0) return {};
  return roots_descending(d);
}

/// σ as the singular values of the upper triangular U F.
Sigmas triangular_svd(const Head& head) {
  static std::vector<double> work;
  const int n = static_cast<int>(head.p.rows());
  MatrixD f = head.p.reverse(), u = head.q;  // reversed: its lower Cholesky factor, reversed, is F
  int info = 0;
  dpotrf_("L", &n, f.data(), &n, &info, 1);
  if (info != 0) return {};
  f.triangularView<Eigen::StrictlyUpper>().setZero();
  f = f.reverse().eval();
  dpotrf_("U", &n, u.data(), &n, &info, 1);
  if (info != 0) return {};
  cblas_dtrmm(CblasColMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, n, n, 1.0, u.data(),
              n, f.data(), n);
  std::vector<double> d(n), e(n), tauq(n), taup(n);
  if (work.empty()) work.resize(static_cast<std::size_t>(std::max(64 * 2 * n, 4 * n)));
  const int lwork = static_cast<int>(work.size());
  dgebrd_(&n, &n, f.data(), &n, d.data(), e.data(), tauq.data(), taup.data(), work.data(), &lwork,
          &info);
  dlasq1_(&n, d.data(), e.data(), work.data(), &info);
  if (info != 0) return {};
  return d;  // descending
}

/// σ in long double: Cholesky factors and U F as triangular_svd, then one-sided Jacobi.
Sigmas reference(const Head& head) {
  const MatrixL p = head.p.cast<long double>().reverse(), q = head.q.cast<long double>();
  const Eigen::LLT<MatrixL> fp(p), fq(q);
  if (fp.info() != Eigen::Success || fq.info() != Eigen::Success) return {};
  const MatrixL f = MatrixL(fp.matrixL()).reverse();
  const MatrixL c = MatrixL(fq.matrixU()) * f;
  const Eigen::JacobiSVD<MatrixL> svd(c);
  Sigmas sigma(static_cast<std::size_t>(c.rows()));
  for (Index i = 0; i < c.rows(); ++i) sigma[i] = static_cast<double>(svd.singularValues()(i));
  return sigma;
}

/// Max relative difference of a to b over b's σ ≥ floor · σ_max.
double max_relative(const Sigmas& a, const Sigmas& b, double floor) {
  if (a.size() != b.size() || b.empty()) return NAN;
  double worst = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b[i] >= floor * b[0]) worst = std::max(worst, std::abs(a[i] - b[i]) / b[i]);
  }
  return worst;
}

/// A head reduced as far as both routes' last steps: dsygv's tridiagonal (d, e) and the upper
/// triangular U F of triangular_svd.
struct Reduced {
  std::vector<double> d, e;
  MatrixD c;
};

Reduced reduce(const Head& head) {
  const int n = static_cast<int>(head.p.rows()), itype = 2;
  Reduced out{std::vector<double>(n), std::vector<double>(n), head.p.reverse()};
  MatrixD a = head.q, b = head.p, u = head.q;
  std::vector<double> tau(n), work(64 * static_cast<std::size_t>(n));
  const int lwork = static_cast<int>(work.size());
  int info = 0;
  dpotrf_("U", &n, b.data(), &n, &info, 1);
  dsygst_(&itype, "U", &n, a.data(), &n, b.data(), &n, &info, 1);
  dsytrd_("U", &n, a.data(), &n, out.d.data(), out.e.data(), tau.data(), work.data(), &lwork, &info,
          1);
  dpotrf_("L", &n, out.c.data(), &n, &info, 1);
  out.c.triangularView<Eigen::StrictlyUpper>().setZero();
  out.c = out.c.reverse().eval();
  dpotrf_("U", &n, u.data(), &n, &info, 1);
  u.triangularView<Eigen::StrictlyLower>().setZero();
  out.c = (u * out.c).eval();
  return out;
}

/// The last steps alone, fastest of `rounds` (ms per head): dsterf and dpttrf + dlasq2 on the same
/// tridiagonal, dgebrd and dlasq1 of the triangle.
void time_steps(const std::vector<Head>& heads, int rounds) {
  std::vector<Reduced> reduced;
  for (const Head& head : heads) reduced.push_back(reduce(head));
  const int n = static_cast<int>(heads.front().p.rows());
  std::vector<double> d(n), e(n), z(4 * static_cast<std::size_t>(n)), tq(n), tp(n);
  std::vector<double> work(128 * static_cast<std::size_t>(n));
  const int lwork = static_cast<int>(work.size());
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  int info = 0;
  for (int round = 0; round <= rounds; ++round) {
    double spent[4] = {0, 0, 0, 0};
    for (const Reduced& r : reduced) {
      d = r.d, e = r.e;
      auto start = std::chrono::steady_clock::now();
      dsterf_(&n, d.data(), e.data(), &info);
      spent[0] += kvrank_bench::seconds_since(start);
      d = r.d, e = r.e;
      start = std::chrono::steady_clock::now();
      dpttrf_(&n, d.data(), e.data(), &info);
      for (int i = 0; i < n; ++i) {
        z[2 * i] = d[i];
        z[2 * i + 1] = i + 1 < n ? d[i] * e[i] * e[i] : 0.0;
      }
      dlasq2_(&n, z.data(), &info);
      spent[1] += kvrank_bench::seconds_since(start);
      MatrixD c = r.c;
      start = std::chrono::steady_clock::now();
      dgebrd_(&n, &n, c.data(), &n, d.data(), e.data(), tq.data(), tp.data(), work.data(), &lwork,
              &info);
      spent[2] += kvrank_bench::seconds_since(start);
      start = std::chrono::steady_clock::now();
      dlasq1_(&n, d.data(), e.data(), work.data(), &info);
      spent[3] += kvrank_bench::seconds_since(start);
    }
    for (int s = 0; round > 0 && s < 4; ++s)
      best[s] = std::min(best[s], spent[s] / static_cast<double>(heads.size()));
  }
  std::printf("  steps: dsterf %.3f ms, dpttrf+dlasq2 %.3f ms; dgebrd %.3f ms, dlasq1 %.3f ms\n",
              best[0] * 1e3, best[1] * 1e3, best[2] * 1e3, best[3] * 1e3);
}

struct Route {
  const char* name;
  Sigmas (*solve)(const Head&);
  void (*solve_all)(const std::vector<Head>&) = nullptr;  ///< timed on all heads at once
};

/// The routes this CPU runs: the lanes only where it has AVX-512F (lane_eigenvalues' condition).
std::vector<Route> routes() {
  std::vector<Route> all = {{"dsygv", library_route},
                            {"cached", cached_dsygv},
                            {"dqds", tridiagonal_dqds},
                            {"svd", triangular_svd},
                            {"trmm", trmm_reduction}};
  if (kvrank::detail::eigen_lanes_supported()) all.push_back({"lanes", lanes_route, lanes_all});
  return all;
}

void run_kind(Kind kind, int count, int rounds, Index rows, Index d, std::mt19937& rng) {
  const std::vector<Head> heads = make_heads(kind, count, rows, d, rng);
  const std::vector<Route> all = routes();
  const auto count_routes = static_cast<int>(all.size());
  std::vector<double> best(all.size(), 1e30);
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up, untimed
    for (int r = 0; r < count_routes; ++r) {
      const auto start = std::chrono::steady_clock::now();
      if (all[r].solve_all) {
        all[r].solve_all(heads);
      } else {
        for (const Head& head : heads) all[r].solve(head);
      }
      if (round > 0) best[r] = std::min(best[r], kvrank_bench::seconds_since(start) / count);
    }
  }
  std::printf("%-15s", kKindNames[static_cast<int>(kind)]);
  for (int r = 0; r < count_routes; ++r) std::printf(" %s %.3f ms", all[r].name, best[r] * 1e3);
  std::printf("\n");
  time_steps(heads, rounds);
  std::vector<Sigmas> library, exact;
  for (const Head& head : heads) {
    library.push_back(library_route(head));
    exact.push_back(reference(head));
  }
  const double floors[2] = {1e-8, 1e-4};
  for (int r = 0; r < count_routes; ++r) {
    double to_dsygv[2] = {0, 0}, to_reference[2] = {0, 0};
    for (std::size_t h = 0; h < heads.size(); ++h) {
      const Sigmas mine = all[r].solve(heads[h]);
      for (int f = 0; f < 2; ++f) {
        to_dsygv[f] = std::max(to_dsygv[f], max_relative(mine, library[h], floors[f]));
        to_reference[f] = std::max(to_reference[f], max_relative(mine, exact[h], floors[f]));
      }
    }
    std::printf("  %-7s vs dsygv %.1e (σ≥1e-4: %.1e)  vs long double %.1e (σ≥1e-4: %.1e)\n",
                all[r].name, to_dsygv[0], to_dsygv[1], to_reference[0], to_reference[1]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int count = static_cast<int>(kvrank_bench::parse_flag(argc, argv, "--heads", 8));
  const int rounds = static_cast<int>(kvrank_bench::parse_flag(argc, argv, "--rounds", 20));
  const Index d = kvrank_bench::parse_flag(argc, argv, "--d", 128);
  const Index rows = kvrank_bench::parse_flag(argc, argv, "--rows", 4096);
  kvrank_bench::set_threads(1);
  std::mt19937 rng(2026);
  std::printf("d_h %ld, %d heads of each kind, fastest of %d rounds, 1 thread (ms per head)\n",
              static_cast<long>(d), count, rounds);
  for (Kind kind : {Kind::plain, Kind::scaled, Kind::near_deficient})
    run_kind(kind, count, rounds, rows, d, rng);
  return 0;
}
#endif

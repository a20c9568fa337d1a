// Tests of the compute seam (include/kvrank/metric/compute.hpp): the workspace reused across layers
// and the threaded per-layer work give the results of a fresh, serial run.
#include "kvrank/metric/compute.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/metric/diversity.hpp"
#include "metric/blas.hpp"
#include "metric/thread_pool.hpp"
#include "support/catch.hpp"
#include "support/layer_metrics_check.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

using namespace kvrank;

namespace {

/// Dense MHA-shaped factors: `heads` heads of width k, each a plain row block of a d-wide basis.
HeadFactors dense_factors(Index heads, Index d, Index k, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  auto side = [&] {
    FactorSide out;
    out.head_cols = k;
    out.basis.resize(heads * k, d);
    for (Index i = 0; i < out.basis.size(); ++i) out.basis.data()[i] = normal(rng);
    for (Index h = 0; h < heads; ++h) out.heads.push_back({CoeffBlock::identity(h * k, k)});
    return out;
  };
  HeadFactors factors;
  factors.left = side();
  factors.right = side();
  return factors;
}

/// MLA-shaped factors: every head a dense combination of a shared latent basis (the contraction).
HeadFactors latent_factors(Index heads, Index latent, Index d, Index k, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  auto side = [&] {
    FactorSide out;
    out.head_cols = k;
    out.basis = RowMatrixF::Random(latent, d);
    for (Index h = 0; h < heads; ++h) {
      MatrixD block(latent, k);
      for (Index i = 0; i < block.size(); ++i) block.data()[i] = normal(rng);
      out.heads.push_back({CoeffBlock::dense(0, 0, block.transpose().cast<float>())});
    }
    return out;
  };
  HeadFactors factors;
  factors.left = side();
  factors.right = side();
  return factors;
}

void check_same(const LayerMetrics& a, const LayerMetrics& b, double rel) {
  test::check_close(a.erank, b.erank, rel, 1e-12);
  test::check_close(a.erank_centered, b.erank_centered, rel, 1e-12);
  // A mean of cosines (each ≤ 1) that nearly cancel for unrelated heads: its round-off is relative
  // to 1, not to the mean (Debian 13's OpenBLAS threads a 2.4e-4 mean to 1.3e-6 of itself).
  CHECK(std::abs(a.mean_similarity - b.mean_similarity) <= std::max(1e-12, rel));
  REQUIRE(a.eigenvalues.size() == b.eigenvalues.size());
  // S's eigenvalues carry the float32 Grams' round-off relative to the largest one
  // (docs/metric.md), so a small eigenvalue is compared on that scale (Debian 13's OpenBLAS threads
  // one 2e-4 eigenvalue of a 16-head layer to 1.3e-6 of itself, 2e-11 of λ_max).
  const double largest = b.eigenvalues.empty() ? 0.0 : std::abs(b.eigenvalues.front());
  for (std::size_t i = 0; i < a.eigenvalues.size(); ++i) {
    INFO("eigenvalue " << i << ": " << a.eigenvalues[i] << " against " << b.eigenvalues[i]);
    CHECK(std::abs(a.eigenvalues[i] - b.eigenvalues[i]) <= std::max(1e-12, rel * largest));
  }
  REQUIRE(a.head_erank.size() == b.head_erank.size());
  for (std::size_t h = 0; h < a.head_erank.size(); ++h) {
    test::check_close(a.head_erank[h], b.head_erank[h], rel, 1e-12);
    test::check_close(a.head_norm[h], b.head_norm[h], rel, 1e-12);
  }
}

}  // namespace

TEST_CASE("a workspace reused across layers of different shapes gives fresh results", "[compute]") {
  std::mt19937 rng(25);
  const std::vector<HeadFactors> layers = {
      dense_factors(4, 96, 16, rng), dense_factors(6, 64, 8, rng), dense_factors(4, 96, 16, rng)};
  ComputeWorkspace workspace;
  for (const HeadFactors& factors : layers) {
    const LayerMetrics reused = analyze_layer(factors, workspace);
    const LayerMetrics fresh = analyze_layer(factors);
    check_same(reused, fresh, 0.0);  // the same products on the same values: bit for bit
  }
  HeadFactors symmetric = layers[0];
  symmetric.symmetric = true;
  check_same(analyze_layer(symmetric, workspace), analyze_layer(symmetric), 0.0);
}

// The shapes are large enough that every threaded loop of a layer runs threaded (per-head
// eigenproblems, the basis scale scan, the contraction's heads and its H × H in slices of the
// depth, and the two sides' Grams formed side by side, a SYRK on each thread): 1 and 2 threads
// must agree, the contraction bit for bit.
TEST_CASE("threaded per-layer work equals the serial run", "[compute]") {
  std::mt19937 rng(18);
  const HeadFactors dense = dense_factors(8, 4096, 128, rng);
  // 32 heads over M_h of 96 × 96: the H × H SYRK is 32² × 9216, cut in 2 slices of the depth.
  const HeadFactors latent = latent_factors(32, 96, 256, 64, rng);
  set_compute_threads(1);
  const LayerMetrics dense_serial = analyze_layer(dense);
  const LayerMetrics latent_serial = analyze_layer(latent, Contraction::latent);
  set_compute_threads(2);
  const LayerMetrics dense_threaded = analyze_layer(dense);
  const LayerMetrics latent_threaded = analyze_layer(latent, Contraction::latent);
  set_compute_threads(0);
  // Every sum is split by the shape, never by the threads (the Grams by tiles of their triangle,
  // the contraction's H × H by slices of its depth): bit for bit.
  check_same(dense_threaded, dense_serial, 0.0);
  check_same(latent_threaded, latent_serial, 0.0);
}

TEST_CASE("a small eigensolver runs on the calling thread and gives the threads back",
          "[compute]") {
  // LAPACK's eigensolvers hold OpenBLAS to the calling thread (eigensolvers.cpp: each level-2
  // call of theirs woke the pool, and from order 128 on their threads' sums moved the last digits),
  // so their values are the one-thread values, bit for bit, and the thread count in force is the
  // caller's again afterwards.
  std::mt19937 rng(20);
  std::normal_distribution<double> normal;
  for (const Index n : {Index(6), Index(48), Index(127), Index(128), Index(200)}) {
    INFO("order " << n);
    MatrixD random(n, n);
    for (Index i = 0; i < random.size(); ++i) random.data()[i] = normal(rng);
    const MatrixD p = random * random.transpose() + MatrixD::Identity(n, n);
    const MatrixD q = random.transpose() * random;
    set_compute_threads(1);
    const std::vector<double> values_serial = detail::symmetric_eigenvalues(q);
    const std::optional<std::vector<double>> congruent_serial = detail::congruent_eigenvalues(p, q);
    set_compute_threads(2);
    const int threads = detail::available_threads();  // 2; 1 in a build without OpenMP
    CHECK(detail::symmetric_eigenvalues(q) == values_serial);
    CHECK(detail::available_threads() == threads);
    CHECK(detail::congruent_eigenvalues(p, q) == congruent_serial);
    CHECK(detail::available_threads() == threads);
  }
  set_compute_threads(0);
}

TEST_CASE("top_symmetric_eigenpairs gives Eigen's top eigenvalues and their subspace",
          "[compute]") {
  // dsyevr (with OpenBLAS) computes only the top `count` eigenpairs: against Eigen's full solver,
  // the values and the spanned subspace (its projector; the vectors' signs are the solver's).
  std::mt19937 rng(21);
  std::normal_distribution<double> normal;
  for (const Index n : {Index(1), Index(12), Index(200)}) {
    MatrixD random(n, n + 3);
    for (Index i = 0; i < random.size(); ++i) random.data()[i] = normal(rng);
    const MatrixD symmetric =
        random * random.transpose() - 0.5 * static_cast<double>(n) * MatrixD::Identity(n, n);
    const Eigen::SelfAdjointEigenSolver<MatrixD> eigen(symmetric);
    for (const Index count : {Index(1), (n + 1) / 2, n}) {
      INFO("order " << n << ", top " << count);
      VectorD values;
      MatrixD vectors;
      detail::top_symmetric_eigenpairs(symmetric, static_cast<int>(count), values, vectors);
      REQUIRE(values.size() == count);
      REQUIRE(vectors.rows() == n);
      REQUIRE(vectors.cols() == count);
      const double scale = symmetric.norm();
      CHECK((values - eigen.eigenvalues().tail(count)).cwiseAbs().maxCoeff() < 1e-12 * scale);
      const MatrixD expected = eigen.eigenvectors().rightCols(count);
      CHECK((vectors * vectors.transpose() - expected * expected.transpose()).norm() < 1e-10);
      CHECK((symmetric * vectors - vectors * values.asDiagonal()).norm() < 1e-12 * scale);
    }
  }
}

TEST_CASE("CallingThreadOnly holds the calling thread to itself and gives the threads back",
          "[compute]") {
  set_compute_threads(2);
  const int threads = detail::available_threads();  // 2; 1 in a build without OpenMP
  {
    const CallingThreadOnly held;
    CHECK(detail::available_threads() == 1);
    {
      const CallingThreadOnly nested;  // saves 1, so restores nothing
      CHECK(detail::available_threads() == 1);
    }
    CHECK(detail::available_threads() == 1);
  }
  CHECK(detail::available_threads() == threads);
  {
    const CallingThreadOnly not_engaged(false);
    CHECK(detail::available_threads() == threads);
  }
  CHECK(detail::available_threads() == threads);
  set_compute_threads(0);
}

TEST_CASE("a layer below kThreadedLayerWeights runs on the calling thread and a larger one on all",
          "[compute]") {
  set_compute_threads(2);
  const int threads = detail::available_threads();
  {
    const LayerThreads small(kThreadedLayerWeights - 1);
    CHECK(detail::available_threads() == 1);
  }
  CHECK(detail::available_threads() == threads);
  {
    const LayerThreads large(kThreadedLayerWeights);
    CHECK(detail::available_threads() == threads);
  }
  CHECK(detail::available_threads() == threads);
  set_compute_threads(0);
}

namespace {

/// The CPUs the calling thread may run on; the test ends (with a warning) where that is one.
std::optional<cpu_set_t> two_or_more_cpus() {
  cpu_set_t allowed;
  REQUIRE(::sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  if (CPU_COUNT(&allowed) >= 2) return allowed;
  WARN("one CPU allowed: no other to move a thread to");
  return std::nullopt;
}

}  // namespace

TEST_CASE("move_off_cpu moves the calling thread to another CPU and leaves it unbound",
          "[compute]") {
  const std::optional<cpu_set_t> cpus = two_or_more_cpus();
  if (!cpus) return;
  const cpu_set_t& allowed = *cpus;
  // Held to one CPU, the thread is not on any other: nothing to move (and nowhere to go).
  const int here = ::sched_getcpu();
  cpu_set_t only_here;
  CPU_ZERO(&only_here);
  CPU_SET(here, &only_here);
  REQUIRE(::sched_setaffinity(0, sizeof only_here, &only_here) == 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed) && cpu != here) CHECK_FALSE(detail::move_off_cpu(cpu));
  }
  CHECK_FALSE(detail::move_off_cpu(here));  // its set holds no other CPU
  REQUIRE(::sched_setaffinity(0, sizeof allowed, &allowed) == 0);
  // Free again, it may move between reading its CPU and the call (other tests run beside this
  // one): a few tries, each checked by where it runs after.
  int from = -1;
  bool moved = false;
  for (int attempt = 0; attempt < 20 && !moved; ++attempt) {
    from = ::sched_getcpu();
    moved = detail::move_off_cpu(from);
  }
  REQUIRE(moved);
  CHECK(::sched_getcpu() != from);
  cpu_set_t after;
  REQUIRE(::sched_getaffinity(0, sizeof after, &after) == 0);
  CHECK(CPU_EQUAL(&after, &allowed));
}

#if defined(_OPENMP)
namespace {

/// Puts the calling thread on `cpu` and then gives it back `allowed`: it stays on `cpu` until
/// something moves it, as a new thread started on its creator's CPU does.
void put_on(int cpu, const cpu_set_t& allowed) {
  cpu_set_t only;
  CPU_ZERO(&only);
  CPU_SET(cpu, &only);
  ::sched_setaffinity(0, sizeof only, &only);
  ::sched_setaffinity(0, sizeof allowed, &allowed);
}

/// The CPU the thread `tid` of this process is on (field 39 of /proc/self/task/TID/stat): read
/// without running it, which a parallel region asking the thread itself would need.
int cpu_of(pid_t tid) {
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // from field 3, the state
  std::string field;
  for (int number = 3; number <= 39; ++number) fields >> field;
  return std::stoi(field);
}

}  // namespace

TEST_CASE("a large layer moves a worker off the calling thread's CPU and leaves it unbound",
          "[compute]") {
  // The pool's worker is put on the caller's CPU, as Linux may start it, and given back the whole
  // set (a thread stays where it is then); LayerThreads must move it elsewhere and leave it
  // unbound.
  const std::optional<cpu_set_t> cpus = two_or_more_cpus();
  if (!cpus) return;
  const cpu_set_t& allowed = *cpus;
  set_compute_threads(2);
  pid_t worker = 0;
  bool together = false;
  for (int attempt = 0; attempt < 20 && !together; ++attempt) {
    const int caller = ::sched_getcpu();
#pragma omp parallel num_threads(2)
    if (omp_get_thread_num() != 0) {
      worker = ::gettid();
      put_on(caller, allowed);
    }
    together = cpu_of(worker) == ::sched_getcpu();  // else the scheduler moved one: again
  }
  if (!together) {
    WARN("could not put the worker on the caller's CPU in 20 attempts");
    return;
  }

  { const LayerThreads large(kThreadedLayerWeights); }
  CHECK(cpu_of(worker) != ::sched_getcpu());
  cpu_set_t worker_set;
  REQUIRE(::sched_getaffinity(worker, sizeof worker_set, &worker_set) == 0);
  CHECK(CPU_EQUAL(&worker_set, &allowed));
  set_compute_threads(0);
}
#endif

TEST_CASE("a SYRK of few rows over a long inner dimension is split over the threads", "[compute]") {
  // syrk_double slices the inner dimension, the slices shared out over the threads, and sums them
  // in double (the contraction's H × H over chunks of M_h). The slices follow the shape, not the
  // threads: every thread count gives A·Aᵀ with the same bits.
  std::mt19937 rng(19);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const Index rows = 16, inner = 40'001;  // an odd count: the slices differ in length
  RowMatrixF a(rows, inner + 3);          // lda > inner: the slices start inside the rows
  for (Index i = 0; i < a.size(); ++i) a.data()[i] = uniform(rng);
  const MatrixD exact =
      a.leftCols(inner).cast<double>() * a.leftCols(inner).cast<double>().transpose();
  std::optional<MatrixD> first;
  for (int threads : {1, 2, 3}) {
    INFO(threads << " threads");
    set_compute_threads(threads);
    const MatrixD got =
        detail::syrk_double(detail::FloatKernels::blas, rows, inner, a.data(), a.cols());
    // float32 sums of 40 001 products are off by about 0.004 here; a column left out or counted
    // twice would move some entry by about 1, i.e. 1e-4 of the diagonal (≈ 13 000).
    CHECK((got - exact).cwiseAbs().maxCoeff() <= 4e-6 * exact.diagonal().minCoeff());
    CHECK(got == got.transpose());
    if (!first) first = got;
    CHECK(got == *first);
  }
  set_compute_threads(0);
}

TEST_CASE("a SYRK by tiles gives the same bits on any number of threads", "[compute]") {
  // syrk_upper_tiled (every float32 Gram, syrk_double's slices): column tiles of 256, each on one
  // thread. 600 rows: three tiles, the last one short; 200 rows: one. ctest runs it once more on
  // OpenBLAS's Haswell kernels (unit.tiled_syrk_on_haswell_kernels), where an untiled threaded
  // SYRK gives other bits than on one thread, so that there the check can fail.
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Index rows : {Index(200), Index(600)}) {
    const Index inner = 700;
    RowMatrixF a(rows, inner + 5);  // lda > inner
    for (Index i = 0; i < a.size(); ++i) a.data()[i] = uniform(rng);
    const MatrixD exact =
        a.leftCols(inner).cast<double>() * a.leftCols(inner).cast<double>().transpose();
    std::optional<MatrixF> first;
    for (int threads : {1, 2, 3}) {
      INFO(rows << " rows, " << threads << " threads");
      set_compute_threads(threads);
      MatrixF got = MatrixF::Zero(rows, rows);
      detail::syrk_upper_tiled(detail::FloatKernels::blas, rows, inner, a.data(), a.cols(),
                               got.data(), rows);
      const MatrixF upper = got.triangularView<Eigen::Upper>();
      const MatrixD want = exact.triangularView<Eigen::Upper>();
      // float32 sums of 700 products; a column of tiles left out would be off by ~100.
      CHECK((upper.cast<double>() - want).cwiseAbs().maxCoeff() <= 1e-3);
      if (!first) first = upper;
      CHECK(upper == *first);
    }
  }
  set_compute_threads(0);
}

TEST_CASE("the compute settings are checked and described", "[compute]") {
  CHECK_THROWS_AS(check_thread_count(-1), Error);
  CHECK_NOTHROW(check_thread_count(0));
  CHECK_FALSE(compute_backend_description().empty());
}

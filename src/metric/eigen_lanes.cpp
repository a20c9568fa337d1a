// Eight small eigenproblems side by side, one in each double lane of a zmm (eigen_lanes.hpp).
//
// Storage: the lower triangle of eight n × n matrices by columns, entry (i, j) (i ≥ j) at
// offset(n, j) + i − j, each entry one 64-byte `Entry` of eight lanes: a step of the textbook
// algorithm on one entry is one vector instruction for all eight problems. At order 128 the two
// packed matrices take 2 × 0.5 MB and stay in a 1 MB L2 cache for the most part.
//
// Every lane does the same arithmetic; where a lane must not (a converged eigenvalue, a failed
// pivot), a mask keeps its values. Lanes never mix: a lane's result is the same whichever
// problems share the call.
#include "metric/eigen_lanes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVRANK_EIGEN_LANES 1
#include <immintrin.h>
/// Compiled for AVX-512F per function: the binary still runs on any x86-64.
#define KVRANK_LANES_TARGET __attribute__((target("avx512f")))
#endif

namespace kvrank::detail {
// A namespace of its own: the library is built as one unity file per layer.
namespace eigen_lanes {
namespace {

#ifdef KVRANK_EIGEN_LANES

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reads the _mm512_undefined_pd() of the unmasked intrinsics (sqrt, min, max) as maybe
// uninitialized: a false positive of its headers.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

constexpr int kLanes = kEigenLanes;
using Mask = __mmask8;
using Vec = __m512d;

/// One entry of eight problems: lane k is problem k's.
struct alignas(64) Entry {
  double lane[kLanes];
};

/// LAPACK's bound (dsteqr): 30 QL iterations per eigenvalue, counted over the whole matrix.
constexpr Index kIterationsPerEigenvalue = 30;

Index offset(Index n, Index j) { return j * n - j * (j - 1) / 2; }

KVRANK_LANES_TARGET inline Vec load(const Entry& entry) { return _mm512_load_pd(entry.lane); }
KVRANK_LANES_TARGET inline void store(Entry& entry, Vec value) {
  _mm512_store_pd(entry.lane, value);
}
KVRANK_LANES_TARGET inline Vec splat(double value) { return _mm512_set1_pd(value); }
/// `yes` in the lanes of `mask`, `no` in the others.
KVRANK_LANES_TARGET inline Vec where(Mask mask, Vec yes, Vec no) {
  return _mm512_mask_blend_pd(mask, no, yes);
}
KVRANK_LANES_TARGET inline Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_pd(a, b, c); }
/// c − a·b
KVRANK_LANES_TARGET inline Vec fnma(Vec a, Vec b, Vec c) { return _mm512_fnmadd_pd(a, b, c); }

/// √(a² + b²) without overflow or underflow in the squares (LAPACK's dlapy2).
KVRANK_LANES_TARGET Vec hypot(Vec a, Vec b) {
  a = _mm512_abs_pd(a);
  b = _mm512_abs_pd(b);
  const Vec big = _mm512_max_pd(a, b);
  const Vec ratio = where(_mm512_cmp_pd_mask(big, splat(0), _CMP_EQ_OQ), splat(0),
                          _mm512_div_pd(_mm512_min_pd(a, b), big));
  return big * _mm512_sqrt_pd(fma(ratio, ratio, splat(1)));
}

/// Σ a[r]·b[r] over `count` entries, in four running sums (one would wait on each FMA).
KVRANK_LANES_TARGET Vec dot(const Entry* a, const Entry* b, Index count) {
  Vec sums[4] = {splat(0), splat(0), splat(0), splat(0)};
  Index r = 0;
  for (; r + 4 <= count; r += 4) {
    for (int u = 0; u < 4; ++u) sums[u] = fma(load(a[r + u]), load(b[r + u]), sums[u]);
  }
  for (; r < count; ++r) sums[0] = fma(load(a[r]), load(b[r]), sums[0]);
  return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

/// t = S v, S the symmetric trailing matrix of `a` from row and column `first` on (order m), v
/// and t of length m. One pass over each column of S serves both of its uses: S(k+r, k)·v_k into
/// t_{k+r}, and S(k+r, k)·v_{k+r} into t_k (in four running sums: one would wait on each FMA).
KVRANK_LANES_TARGET void symmetric_times(const Entry* a, Index n, Index first, const Entry* v,
                                         Entry* t) {
  const Index m = n - first;
  for (Index i = 0; i < m; ++i) store(t[i], splat(0));
  for (Index k = 0; k < m; ++k) {
    const Entry* column = a + offset(n, first + k);  // S(k, k), S(k + 1, k), …
    const Vec v_k = load(v[k]);
    Vec sums[4] = {load(column[0]) * v_k, splat(0), splat(0), splat(0)};
    Index r = 1;
    for (; r + 4 <= m - k; r += 4) {
      for (int u = 0; u < 4; ++u) {
        const Vec s = load(column[r + u]);
        store(t[k + r + u], fma(s, v_k, load(t[k + r + u])));
        sums[u] = fma(s, load(v[k + r + u]), sums[u]);
      }
    }
    for (; r < m - k; ++r) {
      const Vec s = load(column[r]);
      store(t[k + r], fma(s, v_k, load(t[k + r])));
      sums[0] = fma(s, load(v[k + r]), sums[0]);
    }
    store(t[k], load(t[k]) + ((sums[0] + sums[1]) + (sums[2] + sums[3])));
  }
}

/// The binade 2^exponent of the largest magnitude in the lower triangle of `source` (0 for a zero
/// matrix), clamped to −1022 … 1023 so that 2^−exponent is a double; nullopt if an entry is not
/// finite.
KVRANK_LANES_TARGET std::optional<int> largest_binade(const MatrixD& source) {
  const Index n = source.rows();
  double largest = 0;
  bool finite = true;  // and-ed without a branch: the loop vectorises
  for (Index j = 0; j < n; ++j) {
    for (Index i = j; i < n; ++i) {
      const double magnitude = std::abs(source(i, j));
      largest = magnitude > largest ? magnitude : largest;
      finite &= magnitude <= std::numeric_limits<double>::max();
    }
  }
  if (!finite) return std::nullopt;
  return largest > 0 ? std::max(std::ilogb(largest), -1022) : 0;
}

/// The lower triangles of `sources` (one per lane), each times its `scales` (a power of two:
/// exact), into `packed`: one entry, all lanes, at a time.
KVRANK_LANES_TARGET void pack_lanes(const MatrixD* const* sources, const double* scales,
                                    Entry* packed) {
  const Index n = sources[0]->rows();
  for (Index j = 0; j < n; ++j) {
    Entry* column = packed + offset(n, j);
    for (Index i = j; i < n; ++i) {
      for (int k = 0; k < kLanes; ++k) column[i - j].lane[k] = (*sources[k])(i, j) * scales[k];
    }
  }
}

/// L with P = L Lᵀ, in place (lower); the lanes whose P is not positive definite (their pivot
/// replaced by 1 so that the others go on).
KVRANK_LANES_TARGET Mask cholesky(Entry* a, Index n) {
  Mask failed = 0;
  for (Index j = 0; j < n; ++j) {
    Entry* column = a + offset(n, j);
    Vec pivot = load(column[0]);
    const Mask bad = _mm512_cmp_pd_mask(pivot, splat(0), _CMP_NGT_UQ);  // ≤ 0 or NaN
    failed |= bad;
    const Vec root = _mm512_sqrt_pd(where(bad, splat(1), pivot));
    store(column[0], root);
    const Vec inverse = splat(1) / root;
    const Index below = n - j - 1;
    for (Index r = 1; r <= below; ++r) store(column[r], load(column[r]) * inverse);
    for (Index k = 1; k <= below; ++k) {  // column j + k: L(j+k.., j+k) −= L(j+k.., j)·L(j+k, j)
      Entry* target = a + offset(n, j + k);
      const Vec l_kj = load(column[k]);
      for (Index r = k; r <= below; ++r) {
        store(target[r - k], fnma(load(column[r]), l_kj, load(target[r - k])));
      }
    }
  }
  return failed;
}

/// Q ← Lᵀ Q L in place (lower triangles), column by column. With L = [λ 0; l L₂], Q = [α qᵀ; q Q₂]:
/// the first column of Lᵀ Q L is α λ² + 2 λ qᵀl + lᵀQ₂ l over L₂ᵀ(λ q + Q₂ l), and the rest is
/// L₂ᵀ Q₂ L₂ — the same step on the trailing matrices, which this column's writes leave alone.
KVRANK_LANES_TARGET void congruence(Entry* q, const Entry* l, Index n, Entry* t, Entry* u) {
  for (Index j = 0; j < n; ++j) {
    const Index m = n - j - 1;
    Entry* q_column = q + offset(n, j);
    const Entry* l_column = l + offset(n, j);
    const Vec lambda = load(l_column[0]);
    symmetric_times(q, n, j + 1, l_column + 1, t);  // t = Q₂ l
    const Vec q_l = dot(q_column + 1, l_column + 1, m);
    const Vec l_t = dot(l_column + 1, t, m);
    const Vec alpha = load(q_column[0]);
    const Vec corner = fma(alpha * lambda, lambda, fma(splat(2) * lambda, q_l, l_t));
    for (Index r = 0; r < m; ++r) store(u[r], fma(load(q_column[1 + r]), lambda, load(t[r])));
    for (Index i = 0; i < m; ++i) {  // (L₂ᵀ u)_i = Σ_{k ≥ i} L₂(k, i) u_k: column i of L₂
      store(q_column[1 + i], dot(l + offset(n, j + 1 + i), u + i, m - i));
    }
    store(q_column[0], corner);
  }
}

/// A Householder reflector H = I − τ v vᵀ (v₀ = 1) and the vector w of its two-sided update
/// H S H = S − v wᵀ − w vᵀ, both indexed from the first row of the block S it reduces.
struct Reflector {
  Entry* v;
  Entry* w;
};

/// The reflector of the column x (length m, below the diagonal) that leaves β e₁: v, τ and β
/// (LAPACK's dlarfg, without its rescaling: the entries are near 1). A column already reduced
/// (x₁… all 0) gets τ = 0, β = x₀.
KVRANK_LANES_TARGET Vec make_reflector(const Entry* x, Index m, Entry* v, Vec& beta_out) {
  const Vec alpha = load(x[0]);
  const Vec rest = dot(x + 1, x + 1, m - 1);
  const Mask none = _mm512_cmp_pd_mask(rest, splat(0), _CMP_EQ_OQ);
  const Vec norm = _mm512_sqrt_pd(fma(alpha, alpha, rest));
  const Vec beta = where(_mm512_cmp_pd_mask(alpha, splat(0), _CMP_GE_OQ), -norm, norm);
  const Vec scale = where(none, splat(0), splat(1) / (alpha - beta));
  store(v[0], splat(1));
  for (Index r = 1; r < m; ++r) store(v[r], load(x[r]) * scale);
  beta_out = where(none, alpha, beta);
  return where(none, splat(0), (beta - alpha) / beta);
}

/// Column `column` (its entries from the diagonal down, `count` of them) less the pending update
/// (v wᵀ + w vᵀ) at index k of its block.
KVRANK_LANES_TARGET Vec updated(const Entry* column, Index r, Index k, const Reflector& pending) {
  return fnma(load(pending.w[k + r]), load(pending.v[k]),
              fnma(load(pending.v[k + r]), load(pending.w[k]), load(column[r])));
}

/// One pass over the trailing block S (rows and columns j + 1 …, order m) of step j: applies the
/// pending update of step j − 1 (indexed from row j) to each column and, from the updated values,
/// forms t = S v (indexed from row j + 1; each column serves both of its uses, as in
/// symmetric_times). One read and one write of S a step where the update and the product apart
/// read it twice.
KVRANK_LANES_TARGET void update_and_multiply(Entry* a, Index n, Index j, const Reflector& pending,
                                             const Entry* v, Entry* t) {
  const Index m = n - j - 1;
  for (Index i = 0; i < m; ++i) store(t[i], splat(0));
  for (Index k = 0; k < m; ++k) {
    Entry* column = a + offset(n, j + 1 + k);
    const Vec v_k = load(v[k]);
    const Vec diagonal = updated(column, 0, k + 1, pending);
    store(column[0], diagonal);
    Vec sums[2] = {diagonal * v_k, splat(0)};
    Index r = 1;
    for (; r + 2 <= m - k; r += 2) {
      for (int u = 0; u < 2; ++u) {
        const Vec s = updated(column, r + u, k + 1, pending);
        store(column[r + u], s);
        store(t[k + r + u], fma(s, v_k, load(t[k + r + u])));
        sums[u] = fma(s, load(v[k + r + u]), sums[u]);
      }
    }
    for (; r < m - k; ++r) {
      const Vec s = updated(column, r, k + 1, pending);
      store(column[r], s);
      store(t[k + r], fma(s, v_k, load(t[k + r])));
      sums[0] = fma(s, load(v[k + r]), sums[0]);
    }
    store(t[k], load(t[k]) + (sums[0] + sums[1]));
  }
}

/// Householder reduction of the symmetric `a` (lower, destroyed) to the tridiagonal d, e: e[j]
/// couples j and j + 1, e[n − 1] = 0 (LAPACK's dsytd2, lower). Each step's two-sided update is
/// applied lazily, column by column, in the next step's pass (update_and_multiply). `reflectors`:
/// two pairs of n entries.
KVRANK_LANES_TARGET void tridiagonalize(Entry* a, Index n, Entry* d, Entry* e,
                                        Reflector (&reflectors)[2]) {
  Reflector pending = reflectors[0], next = reflectors[1];
  for (Index i = 0; i < n; ++i) {
    store(pending.v[i], splat(0));
    store(pending.w[i], splat(0));
  }
  for (Index j = 0; j + 1 < n; ++j) {
    Entry* column = a + offset(n, j);
    const Index m = n - j - 1;  // the reflector's length
    for (Index r = 0; r <= m; ++r) store(column[r], updated(column, r, 0, pending));
    store(d[j], load(column[0]));
    Vec beta;
    const Vec tau = make_reflector(column + 1, m, next.v, beta);
    store(e[j], beta);
    update_and_multiply(a, n, j, pending, next.v, next.w);  // w = τ S v − (τ/2)(τ vᵀ S v) v
    for (Index r = 0; r < m; ++r) store(next.w[r], load(next.w[r]) * tau);
    const Vec half = splat(0.5) * tau * dot(next.w, next.v, m);
    for (Index r = 0; r < m; ++r) store(next.w[r], fnma(half, load(next.v[r]), load(next.w[r])));
    std::swap(pending, next);
  }
  Entry* last = a + offset(n, n - 1);  // its pending update is step n − 2's, whose τ is 0
  store(d[n - 1], load(last[0]));
  store(e[n - 1], splat(0));
}

/// For each lane, the first m ≥ l whose e[m] is negligible beside d[m] and d[m + 1] (n − 1 if
/// none), as doubles; the lanes where m > l (an eigenvalue at l still to converge).
KVRANK_LANES_TARGET Mask split_points(const Entry* d, const Entry* e, Index n, Index l, Vec& m) {
  constexpr double kEps = std::numeric_limits<double>::epsilon() / 2;
  Mask found = 0;
  m = splat(static_cast<double>(n - 1));
  for (Index i = l; i + 1 < n && found != 0xff; ++i) {
    // + the smallest normal double: entries down there are round-off beside ‖T‖ ≈ 1, and would
    // otherwise never pass a test relative to neighbours as small.
    const Vec bound = fma(splat(kEps), _mm512_abs_pd(load(d[i])) + _mm512_abs_pd(load(d[i + 1])),
                          splat(std::numeric_limits<double>::min()));
    const Mask small =
        _mm512_cmp_pd_mask(_mm512_abs_pd(load(e[i])), bound, _CMP_LE_OQ) & Mask(~found);
    m = where(small, splat(static_cast<double>(i)), m);
    found |= small;
  }
  return _mm512_cmp_pd_mask(m, splat(static_cast<double>(l)), _CMP_GT_OQ);
}

/// Lane k of values[index[k]], for each lane k.
KVRANK_LANES_TARGET Vec gather(const Entry* values, Vec index) {
  Entry picked;
  for (int k = 0; k < kLanes; ++k) picked.lane[k] = values[static_cast<Index>(index[k])].lane[k];
  return load(picked);
}

/// One implicit QL sweep with Wilkinson's shift from l to m (per lane) in the lanes `active`
/// (Numerical Recipes' tqli, eigenvalues only).
KVRANK_LANES_TARGET void ql_sweep(Entry* d, Entry* e, Index l, Vec m, Mask active) {
  const Vec d_l = load(d[l]);
  const Vec e_l = load(e[l]);
  Vec g = (load(d[l + 1]) - d_l) / (splat(2) * e_l);
  Vec r = hypot(g, splat(1));
  const Vec signed_r =
      where(_mm512_cmp_pd_mask(g, splat(0), _CMP_GE_OQ), _mm512_abs_pd(r), -_mm512_abs_pd(r));
  g = gather(d, m) - d_l + e_l / (g + signed_r);
  Vec s = splat(1), c = splat(1), p = splat(0);
  Mask alive = active;
  const Index top = static_cast<Index>(_mm512_mask_reduce_max_pd(active, m));
  for (Index i = top - 1; i >= l; --i) {
    Mask on = alive & _mm512_cmp_pd_mask(m, splat(static_cast<double>(i)), _CMP_GT_OQ);
    const Vec e_i = load(e[i]);
    const Vec f = s * e_i;
    const Vec b = c * e_i;
    // No dlapy2 here: the entries of T are at most n² (each problem scaled to entries near 1), so
    // f² + g² cannot overflow; it underflows to 0 only for |f|, |g| < 1e−154, which the split
    // below treats as the exact zero it is beside ‖T‖.
    r = _mm512_sqrt_pd(fma(f, f, g * g));
    store(e[i + 1], where(on, r, load(e[i + 1])));
    const Mask underflow = on & _mm512_cmp_pd_mask(r, splat(0), _CMP_EQ_OQ);
    if (underflow) {  // the matrix splits here: this lane's sweep ends
      store(d[i + 1], where(underflow, load(d[i + 1]) - p, load(d[i + 1])));
      for (int k = 0; k < kLanes; ++k) {
        if (underflow >> k & 1) e[static_cast<Index>(m[k])].lane[k] = 0;
      }
      alive &= Mask(~underflow);
      on &= Mask(~underflow);
    }
    const Vec s_next = f / r;
    const Vec c_next = g / r;
    const Vec g_next = load(d[i + 1]) - p;
    const Vec r_next = fma((load(d[i]) - g_next), s_next, splat(2) * c_next * b);
    const Vec p_next = s_next * r_next;
    store(d[i + 1], where(on, g_next + p_next, load(d[i + 1])));
    s = where(on, s_next, s);
    c = where(on, c_next, c);
    p = where(on, p_next, p);
    g = where(on, fnma(splat(1), b, c_next * r_next), g);
  }
  store(d[l], where(alive, load(d[l]) - p, load(d[l])));
  store(e[l], where(alive, g, load(e[l])));
  for (int k = 0; k < kLanes; ++k) {
    if (alive >> k & 1) e[static_cast<Index>(m[k])].lane[k] = 0;
  }
}

/// The eigenvalues of the tridiagonal d, e into d, in the lanes not in `skip`; the lanes that did
/// not converge.
KVRANK_LANES_TARGET Mask tridiagonal_eigenvalues(Entry* d, Entry* e, Index n, Mask skip) {
  Mask failed = 0;
  Index iterations[kLanes] = {};
  for (Index l = 0; l < n; ++l) {
    for (;;) {
      Vec m;
      Mask active = split_points(d, e, n, l, m) & Mask(~(failed | skip));
      for (int k = 0; k < kLanes; ++k) {
        if ((active >> k & 1) && ++iterations[k] > kIterationsPerEigenvalue * n) {
          failed |= Mask(1u << k);
        }
      }
      active &= Mask(~failed);
      if (!active) break;
      ql_sweep(d, e, l, m, active);
    }
  }
  return failed;
}

/// A thread's buffers, kept for the next call (the next heads).
struct Buffers {
  std::vector<Entry> p, q, d, e, t, u, v, w;
};

Buffers& thread_buffers(Index n) {
  thread_local Buffers buffers;
  const auto packed = static_cast<std::size_t>(n * (n + 1) / 2);
  const auto vector = static_cast<std::size_t>(n);
  buffers.p.resize(packed);
  buffers.q.resize(packed);
  for (auto* v : {&buffers.d, &buffers.e, &buffers.t, &buffers.u, &buffers.v, &buffers.w})
    v->resize(vector);
  return buffers;
}

/// Fills every lane, each problem scaled so that its largest entries are near 1 (`exponents`: the
/// power of two that undoes it for the eigenvalues): problem k in lane k, the first problem again
/// in the lanes past the last (their results are dropped). Returns the lanes whose entries are
/// not all finite.
Mask load_problems(std::span<const EigenProblem> problems, Buffers& buffers, int* exponents) {
  Mask bad = 0;
  const MatrixD* ps[kLanes];
  const MatrixD* qs[kLanes];
  double p_scales[kLanes], q_scales[kLanes];
  const auto count = static_cast<int>(problems.size());
  for (int k = 0; k < count; ++k) {
    const EigenProblem& problem = problems[k];
    const std::optional<int> p_binade = largest_binade(*problem.p);
    const std::optional<int> q_binade = problem.q ? largest_binade(*problem.q) : 0;
    if (!p_binade || !q_binade) bad |= Mask(1u << k);
    ps[k] = problem.p;
    qs[k] = problem.q;
    p_scales[k] = std::ldexp(1.0, -p_binade.value_or(0));
    q_scales[k] = std::ldexp(1.0, -q_binade.value_or(0));
    exponents[k] = p_binade.value_or(0) + q_binade.value_or(0);
  }
  for (int k = count; k < kLanes; ++k) {  // lane 0 again, its scan not repeated
    ps[k] = ps[0];
    qs[k] = qs[0];
    p_scales[k] = p_scales[0];
    q_scales[k] = q_scales[0];
    exponents[k] = exponents[0];
    if (bad & 1) bad |= Mask(1u << k);
  }
  pack_lanes(ps, p_scales, buffers.p.data());
  if (problems.front().q) pack_lanes(qs, q_scales, buffers.q.data());
  return bad;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // KVRANK_EIGEN_LANES

}  // namespace
}  // namespace eigen_lanes

bool eigen_lanes_supported() noexcept {
#ifdef KVRANK_EIGEN_LANES
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
#else
  return false;
#endif
}

std::vector<std::optional<std::vector<double>>> lane_eigenvalues(
    std::span<const EigenProblem> problems) {
  std::vector<std::optional<std::vector<double>>> results(problems.size());
#ifdef KVRANK_EIGEN_LANES
  using namespace eigen_lanes;
  const Index n = problems.front().p->rows();
  Buffers& buffers = thread_buffers(n);
  int exponents[kLanes];
  Mask failed = load_problems(problems, buffers, exponents);
  const bool with_q = problems.front().q != nullptr;
  if (with_q) {
    failed |= cholesky(buffers.p.data(), n);
    congruence(buffers.q.data(), buffers.p.data(), n, buffers.t.data(), buffers.u.data());
  }
  Entry* symmetric = with_q ? buffers.q.data() : buffers.p.data();
  Reflector reflectors[2] = {{buffers.t.data(), buffers.u.data()},
                             {buffers.v.data(), buffers.w.data()}};
  tridiagonalize(symmetric, n, buffers.d.data(), buffers.e.data(), reflectors);
  failed |= tridiagonal_eigenvalues(buffers.d.data(), buffers.e.data(), n, failed);
  for (std::size_t k = 0; k < problems.size(); ++k) {
    if (failed >> k & 1) continue;
    std::vector<double> values(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) values[i] = std::ldexp(buffers.d[i].lane[k], exponents[k]);
    std::sort(values.begin(), values.end());
    results[k] = std::move(values);
  }
#endif
  return results;
}

}  // namespace kvrank::detail

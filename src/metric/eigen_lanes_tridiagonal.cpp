// The tridiagonal half of the lane solver (eigen_lanes_tridiagonal.hpp).
#include "metric/eigen_lanes_tridiagonal.hpp"

#include <limits>
#include <utility>

namespace kvrank::detail::eigen_lanes {

#ifdef KVRANK_EIGEN_LANES

KVRANK_LANES_BEGIN

namespace {

/// LAPACK's bound (dsteqr): 30 QL iterations per eigenvalue, counted over the whole matrix.
constexpr Index kIterationsPerEigenvalue = 30;

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

/// Entry r of `column` (its entries from the diagonal down, the diagonal at index k of the pending
/// update's vectors) less that update.
KVRANK_LANES_TARGET Vec updated(const Entry* column, Index r, Index k, const Reflector& pending) {
  return less_pending(load(column[r]), load(pending.v[k + r]), load(pending.w[k + r]),
                      load(pending.v[k]), load(pending.w[k]));
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

}  // namespace

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
    update_and_multiply(a, n, j + 1, pending, next.v, next.w);  // w = τ S v − (τ/2)(τ vᵀ S v) v
    for (Index r = 0; r < m; ++r) store(next.w[r], load(next.w[r]) * tau);
    const Vec half = splat(0.5) * tau * dot(next.w, next.v, m);
    for (Index r = 0; r < m; ++r) store(next.w[r], fnma(half, load(next.v[r]), load(next.w[r])));
    std::swap(pending, next);
  }
  Entry* last = a + offset(n, n - 1);  // its pending update is step n − 2's, whose τ is 0
  store(d[n - 1], load(last[0]));
  store(e[n - 1], splat(0));
}

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

KVRANK_LANES_END

#endif  // KVRANK_EIGEN_LANES

}  // namespace kvrank::detail::eigen_lanes

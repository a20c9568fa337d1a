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

#include "metric/eigen_lanes_tridiagonal.hpp"

namespace kvrank::detail {
// A namespace of its own: the library is built as one unity file per layer. Its primitives are
// eigen_lanes_simd.hpp's; the tridiagonal half of the solver is eigen_lanes_tridiagonal.cpp.
namespace eigen_lanes {
namespace {

#ifdef KVRANK_EIGEN_LANES

KVRANK_LANES_BEGIN

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

/// The columns of the Cholesky factor's panels (see cholesky).
constexpr Index kPanelColumns = 4;

/// Column j of L from column j of P less the columns before it: its pivot's root, the entries
/// below divided by it. The lanes whose pivot is not positive or NaN (their pivot taken as 1, so
/// that the other lanes go on).
KVRANK_LANES_TARGET Mask finish_column(Entry* a, Index n, Index j) {
  Entry* column = a + offset(n, j);
  const Vec pivot = load(column[0]);
  const Mask bad = _mm512_cmp_pd_mask(pivot, splat(0), _CMP_NGT_UQ);  // ≤ 0 or NaN
  const Vec root = _mm512_sqrt_pd(where(bad, splat(1), pivot));
  store(column[0], root);
  const Vec inverse = splat(1) / root;
  for (Index r = 1; r < n - j; ++r) store(column[r], load(column[r]) * inverse);
  return bad;
}

/// Column c, from row c down, less L(c.., j)·L(c, j).
KVRANK_LANES_TARGET void subtract_column(Entry* a, Index n, Index j, Index c) {
  const Entry* column = a + offset(n, j);
  Entry* target = a + offset(n, c);
  const Vec l_cj = load(column[c - j]);
  for (Index i = c; i < n; ++i) {
    store(target[i - c], fnma(load(column[i - j]), l_cj, load(target[i - c])));
  }
}

/// Columns c … c + W − 1, from their diagonals down, less their terms from the panel's columns
/// j0 … j0 + 3, each entry its four in the panel's order. One pass over the targets, a row of the
/// panel loaded once for them all, where a column at a time would pass over each target four
/// times (the matrix, 1.2 MB at order 192, is past L2).
template <int W>
KVRANK_LANES_TARGET void subtract_panel(Entry* a, Index n, Index j0, Index c) {
  const Entry* panel[kPanelColumns];  // L(i, j0 + q) is panel[q][i − j0 − q]
  Entry* target[W];
  Vec l[W][kPanelColumns];  // L(c + w, j0 + q)
  for (int q = 0; q < kPanelColumns; ++q) panel[q] = a + offset(n, j0 + q);
#pragma GCC unroll 2
  for (int w = 0; w < W; ++w) {
    target[w] = a + offset(n, c + w);
#pragma GCC unroll 4
    for (int q = 0; q < kPanelColumns; ++q) l[w][q] = load(panel[q][c + w - j0 - q]);
  }
  for (Index i = c; i < n; ++i) {
    Vec row[kPanelColumns];
#pragma GCC unroll 4
    for (int q = 0; q < kPanelColumns; ++q) row[q] = load_once(panel[q][i - j0 - q]);
#pragma GCC unroll 2
    for (int w = 0; w < W; ++w) {
      if (i < c + w) continue;  // column c + 1 starts a row lower
      Vec value = load(target[w][i - c - w]);
#pragma GCC unroll 4
      for (int q = 0; q < kPanelColumns; ++q) value = fnma(row[q], l[w][q], value);
      store(target[w][i - c - w], value);
    }
  }
}

/// L with P = L Lᵀ, in place (lower); the lanes whose P is not positive definite (their pivot
/// replaced by 1 so that the others go on). Four columns a panel: each finished and taken from
/// the panel's later columns in turn, then from every column after the panel in one pass. Each
/// entry gets its terms in column order, as the column-at-a-time algorithm gives them.
KVRANK_LANES_TARGET Mask cholesky(Entry* a, Index n) {
  Mask failed = 0;
  for (Index j0 = 0; j0 < n; j0 += kPanelColumns) {
    const Index end = std::min(j0 + kPanelColumns, n);
    for (Index j = j0; j < end; ++j) {
      failed |= finish_column(a, n, j);
      for (Index c = j + 1; c < end; ++c) subtract_column(a, n, j, c);
    }
    Index c = end;  // a last panel of fewer than four columns ends at n
    for (; c + 2 <= n; c += 2) subtract_panel<2>(a, n, j0, c);
    if (c < n) subtract_panel<1>(a, n, j0, c);
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
    lower_transposed_times(l, n, j + 1, u, q_column + 1);  // L₂ᵀ u
    store(q_column[0], corner);
  }
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

KVRANK_LANES_END

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

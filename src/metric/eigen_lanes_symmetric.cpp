// Products of a packed block and a vector, four columns a pass (eigen_lanes_symmetric.hpp).
#include "metric/eigen_lanes_symmetric.hpp"

#include <type_traits>

namespace kvrank::detail::eigen_lanes {

#ifdef KVRANK_EIGEN_LANES

KVRANK_LANES_BEGIN

namespace {

/// The columns a pass takes. Four: its running sums (4 × S) and the columns' own values stay in
/// registers, and a row's loads serve four columns.
constexpr Index kPassColumns = 4;

enum class Product {
  symmetric,               // t = S v
  symmetric_after_update,  // the same, S updated in place first
  lower_transposed,        // t = Lᵀ v, L lower triangular: the inner products alone
};

/// What a pass reads of a row i besides the block: v_i and, with a pending update, its vectors.
struct Row {
  Vec v, pending_v, pending_w;
};

/// A column's S running sums added up.
template <int S>
KVRANK_LANES_TARGET Vec total(const Vec (&sums)[S]) {
  if constexpr (S == 2) {
    return sums[0] + sums[1];
  } else {
    static_assert(S == 4);
    return (sums[0] + sums[1]) + (sums[2] + sums[3]);
  }
}

/// One pass over the columns k0 … k0 + B − 1 of the block (indices from its first row; k0 a
/// multiple of 4): the triangle of rows k0 … k0 + B − 1, then every row below, S at a time. Column
/// k's inner product runs in S sums, row i into sum i mod S (the diagonal's too): k0 a multiple of
/// S, which sum a row takes is known when compiled, and all B × S sums stay in registers.
template <int B, int S, Product P>
class Pass {
  static constexpr bool kUpdates = P == Product::symmetric_after_update;
  static constexpr bool kScatters = P != Product::lower_transposed;  // t_{k+r} += S(k+r, k) v_k
  static_assert(kPassColumns % S == 0);

 public:
  using Matrix = std::conditional_t<kUpdates, Entry, const Entry>;

  KVRANK_LANES_TARGET Pass(Matrix* a, Index n, Index first, Index k0, const Reflector* pending,
                           const Entry* v, Entry* t)
      : pending_(pending), v_(v), t_(t), k0_(k0), m_(n - first) {
    for (int q = 0; q < B; ++q) {
      column_[q] = a + offset(n, first + k0 + q);
      if constexpr (kScatters) v_k_[q] = load(v[k0 + q]);
      if constexpr (kUpdates) {  // the pending vectors are indexed from the row above the block
        pending_v_[q] = load(pending->v[k0 + q + 1]);
        pending_w_[q] = load(pending->w[k0 + q + 1]);
      }
    }
  }

  KVRANK_LANES_TARGET void run() {
    Vec sums[B][S];
    for (int q = 0; q < B; ++q) {
      for (int c = 0; c < S; ++c) sums[q][c] = splat(0);
    }
    triangle<0>(sums);
    for (Index i = k0_ + B; i < m_; i += S) take_rows<0>(i, sums);
    for (int q = 0; q < B; ++q) store(t_[k0_ + q], load(t_[k0_ + q]) + total<S>(sums[q]));
  }

 private:
  KVRANK_LANES_TARGET Row row(Index i) const {
    Row row{load(v_[i]), splat(0), splat(0)};
    if constexpr (kUpdates) {
      row.pending_v = load(pending_->v[i + 1]);
      row.pending_w = load(pending_->w[i + 1]);
    }
    return row;
  }

  /// S(i, k0 + q), with the pending update applied (and stored) first where there is one.
  KVRANK_LANES_TARGET Vec entry(int q, Index i, const Row& row) const {
    Matrix& at = column_[q][i - k0_ - q];
    if constexpr (kUpdates) {
      const Vec s =
          less_pending(load(at), row.pending_v, row.pending_w, pending_v_[q], pending_w_[q]);
      store(at, s);
      return s;
    } else {
      return load_once(at);  // it feeds two FMAs
    }
  }

  /// Row k0 + p of the triangle: the columns before p below their diagonals, column p on it.
  template <int p>
  KVRANK_LANES_TARGET void triangle(Vec (&sums)[B][S]) {
    if constexpr (p < B) {
      take_row<p + 1, p % S, true>(k0_ + p, sums);
      triangle<p + 1>(sums);
    }
  }

  /// Rows i + u … i + S − 1 of every column, those above m: row k0 + B + S·g + u into sum
  /// (B + u) mod S.
  template <int u>
  KVRANK_LANES_TARGET void take_rows(Index i, Vec (&sums)[B][S]) {
    if constexpr (u < S) {
      if (i + u >= m_) return;
      take_row<B, (B + u) % S, false>(i + u, sums);
      take_rows<u + 1>(i, sums);
    }
  }

  /// Row i of columns 0 … kColumns − 1 into their sums c; with kOnDiagonal the last column's
  /// entry is on its diagonal, which scatters nothing into t_i.
  template <int kColumns, int c, bool kOnDiagonal>
  KVRANK_LANES_TARGET void take_row(Index i, Vec (&sums)[B][S]) {
    const Row at = row(i);
    Vec t_i = splat(0);
    if constexpr (kScatters) t_i = load(t_[i]);
#pragma GCC unroll 4
    for (int q = 0; q < kColumns; ++q) {
      const Vec s = entry(q, i, at);
      if (kScatters && !(kOnDiagonal && q == kColumns - 1)) t_i = fma(s, v_k_[q], t_i);
      sums[q][c] = fma(s, at.v, sums[q][c]);
    }
    if constexpr (kScatters) store(t_[i], t_i);
  }

  Matrix* column_[B];                // entry r of column q: S(k0 + q + r, k0 + q)
  Vec v_k_[B];                       // v at the columns, for their scatter into t
  Vec pending_v_[B], pending_w_[B];  // the pending vectors at the columns
  const Reflector* pending_;
  const Entry* v_;
  Entry* t_;
  Index k0_, m_;
};

/// The passes over the whole block: four columns each, the last one to three in one more.
template <int S, Product P, typename Matrix>
KVRANK_LANES_TARGET void multiply(Matrix* a, Index n, Index first, const Reflector* pending,
                                  const Entry* v, Entry* t) {
  const Index m = n - first;
  for (Index i = 0; i < m; ++i) store(t[i], splat(0));
  Index k0 = 0;
  for (; k0 + kPassColumns <= m; k0 += kPassColumns) {
    Pass<kPassColumns, S, P>(a, n, first, k0, pending, v, t).run();
  }
  const Index last = m - k0;
  if (last == 3) Pass<3, S, P>(a, n, first, k0, pending, v, t).run();
  if (last == 2) Pass<2, S, P>(a, n, first, k0, pending, v, t).run();
  if (last == 1) Pass<1, S, P>(a, n, first, k0, pending, v, t).run();
}

}  // namespace

KVRANK_LANES_TARGET void symmetric_times(const Entry* a, Index n, Index first, const Entry* v,
                                         Entry* t) {
  multiply<4, Product::symmetric>(a, n, first, nullptr, v, t);
}

KVRANK_LANES_TARGET void update_and_multiply(Entry* a, Index n, Index first,
                                             const Reflector& pending, const Entry* v, Entry* t) {
  multiply<2, Product::symmetric_after_update>(a, n, first, &pending, v, t);
}

KVRANK_LANES_TARGET void lower_transposed_times(const Entry* l, Index n, Index first,
                                                const Entry* v, Entry* t) {
  multiply<4, Product::lower_transposed>(l, n, first, nullptr, v, t);
}

KVRANK_LANES_END

#endif  // KVRANK_EIGEN_LANES

}  // namespace kvrank::detail::eigen_lanes

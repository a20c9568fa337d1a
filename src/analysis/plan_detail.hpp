// Private: the pieces of the planner (plan.hpp) shared by its source files.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kvrank/analysis/plan.hpp"
#include "metric/blas.hpp"

namespace kvrank::detail {

/// The d_h × d_h block (i, j) of a Gram of stacked heads.
template <class Matrix>
auto head_block(Matrix& gram, int head_dim, int i, int j) {
  return gram.block(Index(i) * head_dim, Index(j) * head_dim, head_dim, head_dim);
}

/// The rows of a gauge transform R as at most two nonzeros each (`column`, `value` at 2i, 2i + 1;
/// unused slots column 0, value 0), or `dense` where some row has more. A RoPE-plane transform is
/// the former (the free entries of partial rotary aside), so its products read 2 of every d_h
/// entries: at d_h = 128 some 60× fewer operations than a dense product, and the key side of a 7B
/// layer's plan is made of these. R is read column by column (its storage order).
struct RowPairs {
  bool dense = false;
  std::vector<Index> column;
  std::vector<double> value;
};

inline RowPairs row_pairs(const MatrixD& r) {
  const Index d = r.rows();
  RowPairs pairs;
  pairs.column.assign(2 * static_cast<std::size_t>(d), 0);
  pairs.value.assign(pairs.column.size(), 0.0);
  std::vector<int> found(static_cast<std::size_t>(d), 0);
  for (Index j = 0; j < r.cols(); ++j)
    for (Index i = 0; i < d; ++i) {
      if (r(i, j) == 0) continue;
      if (found[i] == 2) {
        pairs.dense = true;
        return pairs;
      }
      pairs.column[2 * i + found[i]] = j;
      pairs.value[2 * i + found[i]++] = r(i, j);
    }
  return pairs;
}

/// R · X for a gauge transform R whose rows are `p` (a dense product where R is not made of pairs).
template <class X>
MatrixD rotate(const MatrixD& r, const RowPairs& p, const X& x) {
  if (p.dense) return product(r, x);
  MatrixD out(r.rows(), x.cols());
  for (Index c = 0; c < x.cols(); ++c)
    for (Index i = 0; i < r.rows(); ++i)
      out(i, c) =
          p.value[2 * i] * x(p.column[2 * i], c) + p.value[2 * i + 1] * x(p.column[2 * i + 1], c);
  return out;
}

template <class X>
MatrixD rotate(const MatrixD& r, const X& x) {
  return rotate(r, row_pairs(r), x);
}

/// X · Rᵀ for a gauge transform R whose rows are `p`: (R Xᵀ)ᵀ, entry for entry, without
/// transposing X.
template <class X>
MatrixD rotate_columns(const X& x, const MatrixD& r, const RowPairs& p) {
  if (p.dense) return product(r, x.transpose()).transpose();
  MatrixD out(x.rows(), r.rows());
  for (Index i = 0; i < r.rows(); ++i)
    out.col(i) =
        p.value[2 * i] * x.col(p.column[2 * i]) + p.value[2 * i + 1] * x.col(p.column[2 * i + 1]);
  return out;
}

template <class X>
MatrixD rotate_columns(const X& x, const MatrixD& r) {
  return rotate_columns(x, r, row_pairs(r));
}

/// The square submatrix of m on the given rows and columns (the same indices for both).
inline MatrixD submatrix(const MatrixD& m, const std::vector<int>& entries) {
  const Index f = static_cast<Index>(entries.size());
  MatrixD out(f, f);
  for (Index r = 0; r < f; ++r)
    for (Index c = 0; c < f; ++c) out(r, c) = m(entries[r], entries[c]);
  return out;
}

/// R in the gauge maximising tr(R M) (a polar factor, or one 2 × 2 rotation per RoPE plane).
MatrixD best_transform(const MatrixD& m, const KeyGauge& gauge);

/// The aligned mean-pool of one group: R_i per member (in the group's order) and the residual
/// Σ_i ‖R_i X_i − X̄‖²_F = Σ_i ‖X_i‖² − (1/n) Σ_ij tr(R_i C_ij R_jᵀ), C_ij = X_i X_jᵀ.
struct GroupFit {
  std::vector<MatrixD> rotations;
  double residual = 0;
};
/// Pairs in closed form; larger groups by generalised Procrustes sweeps (each R_i the best
/// transform against the others' sum) until the residual stops falling.
GroupFit align_group(const MatrixD& gram, int head_dim, const std::vector<int>& members,
                     const KeyGauge& gauge);

/// A partition of the KV heads into equal groups, each sorted, groups ordered by first member.
using Partition = std::vector<std::vector<int>>;

/// The cost of one group (members sorted) under the chosen objective; costs add over groups.
using GroupCost = std::function<double(const std::vector<int>&)>;

/// The best partition of 0 … n−1 into groups of `size`: exhaustive when there are at most
/// `exact_limit` of them (`exact` set), else local search (pair swaps between groups) from the
/// contiguous partition and `restarts` random ones.
Partition best_partition(int n, int size, const GroupCost& cost, long long exact_limit,
                         int restarts, std::uint64_t seed, bool& exact);

Partition contiguous_partition(int n, int size);
/// `count` random partitions drawn with `seed` (a fixed generator: the same on every platform).
std::vector<Partition> random_partitions(int n, int size, int count, std::uint64_t seed);

/// The symmetric square root of a positive semi-definite matrix (negative round-off clipped).
MatrixD psd_root(const MatrixD& m);

/// Sorts each group and the groups by first member.
void normalise(Partition& partition);

}  // namespace kvrank::detail

// One side's Gram and the heads' inner products read from it (side_gram.hpp).
#include "metric/side_gram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "base/pages.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "metric/bf16_gram_kernel.hpp"
#include "metric/blas.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank::detail {

/// Whether a loop of about `work` flops is worth a parallel region: a fork/join costs microseconds
/// (much more on a loaded machine, where idle threads spin), small layers run faster serially.
bool worth_threads(Index work) { return work >= (Index(1) << 22); }

// In tiles, so that the strided reads stay in cache.
void mirror_upper(MatrixF& gram) {
  const Index m = gram.rows();
  constexpr Index kTile = 64;
#pragma omp parallel for schedule(dynamic) if (m >= 1024)
  for (Index col_tile = 0; col_tile < m; col_tile += kTile) {
    for (Index row_tile = col_tile; row_tile < m; row_tile += kTile) {
      const Index col_end = std::min(col_tile + kTile, m);
      const Index row_end = std::min(row_tile + kTile, m);
      for (Index j = col_tile; j < col_end; ++j) {
        for (Index i = std::max(row_tile, j + 1); i < row_end; ++i) gram(i, j) = gram(j, i);
      }
    }
  }
}

/// Float32 Gram of the rows of `basis` into `gram` (resized; its buffer is reused when the size
/// matches, which spares the page faults of a fresh allocation per layer).
void gram_float(const RowMatrixF& basis, MatrixF& gram, const detail::LayerKernels& kernels,
                Triangles triangles) {
  const Index m = basis.rows();
  const Index n = basis.cols();
  detail::fit_buffer(gram, m, m);
  if (m == 0) return;
  if (n == 0) {
    gram.setZero();
    return;
  }
  // bf16 weights, generic BLAS: see gram_backend.hpp. Every path shares the Gram out by tiles of
  // its triangle, each on one thread: the same bits on any number of threads.
  if (!(kernels.onednn_grams && onednn_gram_upper(basis, gram))) {
    detail::syrk_upper_tiled(kernels.products, m, n, basis.data(), n, gram.data(), m);
  }
  if (triangles == Triangles::both) mirror_upper(gram);
}

void gram_of_stored(const StoredBf16Rows& rows, MatrixF& gram, const detail::LayerKernels& kernels,
                    Triangles triangles) {
  detail::fit_buffer(gram, rows.rows, rows.rows);
  if (!bf16_kernel_gram_upper(rows, gram)) {
    // A read met a page its file no longer backs: the reader's copy says so (or, if the file is
    // whole again, serves).
    gram_float(rows.to_float(), gram, kernels, triangles);
    return;
  }
  if (triangles == Triangles::both) mirror_upper(gram);
}

void basis_gram(const FactorSide& side, MatrixF& gram, const LayerKernels& kernels,
                Triangles triangles) {
  if (side.stored) {
    gram_of_stored(*side.stored, gram, kernels, triangles);
  } else {
    gram_float(side.basis, gram, kernels, triangles);
  }
}

bool bf16_grams_together(const FactorSide& left, const FactorSide& right, MatrixF& left_gram,
                         MatrixF& right_gram, const LayerKernels& kernels,
                         std::pair<int, int> scales) {
  auto whole = [&](const FactorSide& side) {
    return side.rows() > 0 && side.cols() > 0 && own_kernel_takes_bf16(side.rows(), side.cols());
  };
  if (!kernels.onednn_grams || scales != std::pair{0, 0} || !whole(left) || !whole(right))
    return false;
  detail::fit_buffer(left_gram, left.rows(), left.rows());
  detail::fit_buffer(right_gram, right.rows(), right.rows());
  auto side = [](const FactorSide& of, MatrixF& gram) {
    return Bf16GramSide{of.stored ? nullptr : &of.basis, of.stored ? &*of.stored : nullptr, &gram};
  };
  return bf16_kernel_gram_pair(side(left, left_gram), side(right, right_gram));
}

namespace {

/// safe_scale_exponent of the largest of the rows' largest magnitudes.
int largest_exponent(const std::vector<float>& row_largest) {
  const auto largest = std::max_element(row_largest.begin(), row_largest.end());
  return safe_scale_exponent(largest == row_largest.end() ? 0.0 : static_cast<double>(*largest));
}

}  // namespace

/// Weight magnitude (docs/input-limits.md): the metric is scale-invariant, but the float32 Gram of
/// weights with |w| ≳ 1e19 overflows (and of |w| ≲ 1e-19 underflows), which made every head "all
/// zero". A basis whose largest entry is outside 2^±kSafeScaleExponent is scaled by 2^-e (exact: a
/// power of two) so that entry lands in [1, 2); head_norm is scaled back. One factor per side, so a
/// head ~2^60 times smaller than the side's largest entry can still underflow to zero.
int unit_scale_exponent(const RowMatrixF& basis) {
  return largest_exponent(row_largest_magnitudes(basis));
}

namespace {

/// 0 when a side's rows and the rows its gains scale (FactorSide::row_gains) both lie within
/// 2^±kSafeScaleExponent: the latent path forms the rows' float32 Gram and then float32 coordinates
/// of the scaled rows. nullopt otherwise: the gains are then folded and the folded rows scaled.
std::optional<int> gains_scale_exponent(const FactorSide& side) {
  const std::optional<std::vector<float>> row_largest = basis_row_largest_magnitudes(side);
  if (!row_largest) return std::nullopt;  // an Inf or NaN in stored rows: the copy says which
  if (largest_exponent(*row_largest) != 0 ||
      safe_scale_exponent(largest_scaled_magnitude(*row_largest, side.row_gains)) != 0)
    return std::nullopt;
  return 0;
}

}  // namespace

std::optional<int> side_scale_exponent(const FactorSide& side) {
  if (!side.row_gains.empty())
    return side.rows() == 0 || side.cols() == 0 ? 0 : gains_scale_exponent(side);
  const std::optional<std::vector<float>> row_largest = basis_row_largest_magnitudes(side);
  if (!row_largest) return std::nullopt;  // an Inf or NaN in stored rows: the copy says which
  return largest_exponent(*row_largest);
}

namespace {

/// Σ x_i·y_i over `count` floats in double (each product exact), in four running sums: one chain
/// of dependent additions ran at a quarter of the speed (Eigen's expression of the casts, half).
double dot_in_double(const float* x, const float* y, Index count) {
  double sums[4] = {0, 0, 0, 0};
  Index i = 0;
  for (; i + 4 <= count; i += 4) {
    for (int lane = 0; lane < 4; ++lane)
      sums[lane] += static_cast<double>(x[i + lane]) * static_cast<double>(y[i + lane]);
  }
  for (; i < count; ++i) sums[0] += static_cast<double>(x[i]) * static_cast<double>(y[i]);
  return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

using GramBlock = Eigen::Block<const MatrixF>;

/// Asks for `count` floats from `data` on. A Gram block's columns lie a Gram's height apart, each a
/// few cache lines long, too short for the hardware prefetcher, and the blocks have left the cache
/// since the Grams were formed: the loops below ask for a block's next column while they read this
/// one (they waited on its loads).
void prefetch_floats(const float* data, Index count) {
  constexpr Index kLine = 64 / sizeof(float);
  for (Index i = 0; i < count; i += kLine) __builtin_prefetch(data + i);
}

void prefetch_column(const float* x, const float* y, Index count) {
  prefetch_floats(x, count);
  prefetch_floats(y, count);
}

/// A Gram block in double, column by column (prefetch_floats); with `upper_only`, the entries on
/// and above its diagonal only (a symmetric block, whose lower triangle is its caller's to fill).
MatrixD in_double(const GramBlock& block, bool upper_only) {
  MatrixD out(block.rows(), block.cols());
  for (Index b = 0; b < block.cols(); ++b) {
    const float* column = block.data() + b * block.outerStride();
    const Index count = upper_only ? std::min(b + 1, block.rows()) : block.rows();
    if (b + 1 < block.cols())
      prefetch_floats(column + block.outerStride(), upper_only ? count + 1 : count);
    out.col(b).head(count) = Eigen::Map<const Eigen::VectorXf>(column, count).cast<double>();
  }
  return out;
}

/// ⟨X, Y⟩_F of two equally shaped blocks, column by column; with `symmetric`, of two symmetric
/// blocks held in their upper triangles (twice the strictly upper part, plus the diagonal).
double block_inner_product(const GramBlock& x, const GramBlock& y, bool symmetric) {
  double sum = 0;
  for (Index b = 0; b < x.cols(); ++b) {
    const float* x_column = x.data() + b * x.outerStride();
    const float* y_column = y.data() + b * y.outerStride();
    if (b + 1 < x.cols())
      prefetch_column(x_column + x.outerStride(), y_column + y.outerStride(),
                      symmetric ? b + 1 : x.rows());
    if (symmetric) {
      sum += 2 * dot_in_double(x_column, y_column, b) +
             static_cast<double>(x_column[b]) * static_cast<double>(y_column[b]);
    } else {
      sum += dot_in_double(x_column, y_column, x.rows());
    }
  }
  return sum;
}

/// ⟨A_i, A_j⟩_F = ⟨L_iᵀL_j, R_iᵀR_j⟩_F (R = L when symmetric), read in place from the Grams
/// where both blocks lie off the diagonal (most pairs of MHA/GQA heads) or both on it (i = j).
double head_inner_product(const SideGram& left, const SideGram* right, Index i, Index j) {
  using Kind = SideGram::StoredBlock::Kind;
  const auto left_block = left.stored_block(i, j);
  const auto right_block = right ? right->stored_block(i, j) : left_block;
  if (left_block && right_block) {
    const Kind left_kind = left_block->kind;
    const Kind right_kind = right_block->kind;
    // ⟨Xᵀ, Yᵀ⟩ = ⟨X, Y⟩: two blocks stored the same way need no transpose.
    if (left_kind == right_kind) {
      return block_inner_product(left_block->block, right_block->block,
                                 left_kind == Kind::symmetric);
    }
    if (left_kind != Kind::symmetric && right_kind != Kind::symmetric) {
      return left_block->block.cast<double>()
          .cwiseProduct(right_block->block.transpose().cast<double>())
          .sum();
    }
  }
  // A symmetric block against another kind (GQA heads of one group), or a head that is not a
  // plain slice: copies.
  const MatrixD cross_left = left.cross(i, j);
  return right ? cross_left.cwiseProduct(right->cross(i, j)).sum() : cross_left.squaredNorm();
}

}  // namespace

MatrixD SideGram::upper_block(Index row, Index col) const {
  if (const std::optional<StoredBlock> stored = stored_at(row, col)) {
    MatrixD out = in_double(stored->block, stored->kind == StoredBlock::symmetric);
    if (stored->kind == StoredBlock::transposed) out.transposeInPlace();
    if (stored->kind == StoredBlock::symmetric)
      out.triangularView<Eigen::StrictlyLower>() = out.transpose();
    return out;
  }
  MatrixD out(k_, k_);  // the block crosses the diagonal away from it
  for (Index b = 0; b < k_; ++b) {
    for (Index a = 0; a < k_; ++a) {
      const Index i = row + a;
      const Index j = col + b;
      out(a, b) = i <= j ? gram_(i, j) : gram_(j, i);
    }
  }
  return out;
}

/// ⟨A_i, A_j⟩_F for all pairs (H × H, symmetric). The pairs, not the rows, go to the threads: a
/// layer of few heads (6 in a 128M model) has too few rows to share out evenly. A pair's blocks
/// have left the cache while the Grams were formed, so a multiply-add here costs about 8 in a
/// product (5 cycles an element on one thread; the 128M run spent 4 % of its time here, the other
/// thread waiting).
MatrixD head_inner_products(const SideGram& left, const SideGram* right, Index heads) {
  MatrixD inner(heads, heads);
  [[maybe_unused]] const Index k = left.head_cols();  // only in the OpenMP clause
  detail::ParallelFailure failure;
#pragma omp parallel for collapse(2) schedule(dynamic) if (worth_threads(8 * heads * heads * k * k))
  for (Index i = 0; i < heads; ++i) {
    for (Index j = 0; j < heads; ++j) {
      if (j < i) continue;  // the lower triangle is the upper's mirror
      failure.run([&] {
        const double value = head_inner_product(left, right, i, j);
        inner(i, j) = value;
        inner(j, i) = value;
      });
    }
  }
  failure.rethrow();
  return inner;
}

}  // namespace kvrank::detail

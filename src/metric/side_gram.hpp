// Private: one side's float32 Gram and the heads' ⟨A_i, A_j⟩_F read from the Grams (the pairwise
// path of diversity.cpp; see diversity.cpp for the cost model).
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "kvrank/base/factors.hpp"
#include "metric/contraction.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank::detail {

/// Whether a loop of about `work` flops is worth a parallel region: a fork/join costs microseconds
/// (much more on a loaded machine, where idle threads spin), small layers run faster serially.
bool worth_threads(Index work);

/// Which triangles of a Gram gram_float fills: the SYRK writes the upper one, and the mirror into
/// the lower one is a pass over all of G (4 % of a 7B layer) that a reader of the upper triangle
/// alone does without (SideGram, when every head is a plain slice).
enum class Triangles { upper, both };

/// Float32 Gram of the rows of `basis` into `gram` (resized; its buffer is reused when the size
/// matches, which spares the page faults of a fresh allocation per layer).
void gram_float(const RowMatrixF& basis, MatrixF& gram, const LayerKernels& kernels,
                Triangles triangles = Triangles::both);

/// Weight magnitude (docs/input-limits.md): the metric is scale-invariant, but the float32 Gram of
/// weights with |w| ≳ 1e19 overflows (and of |w| ≲ 1e-19 underflows), which made every head "all
/// zero". A basis whose largest entry is outside 2^±kSafeScaleExponent is scaled by 2^-e (exact: a
/// power of two) so that entry lands in [1, 2); head_norm is scaled back. One factor per side, so a
/// head ~2^60 times smaller than the side's largest entry can still underflow to zero.
int unit_scale_exponent(const RowMatrixF& basis);

/// unit_scale_exponent of a side's basis, a stored one (FactorSide::stored) read from its bits;
/// nullopt when stored rows hold an Inf or NaN or could not be read (or the kernel that reads them
/// is missing): the float32 copy then reports which (with_float_basis). For a side with its gains
/// beside its rows (FactorSide::row_gains): 0, or nullopt when the rows or the rows the gains scale
/// lie outside 2^±kSafeScaleExponent (the gains are then folded, with_float_basis).
std::optional<int> side_scale_exponent(const FactorSide& side);

/// gram_float of stored bf16 rows, on kvrank's own bf16 kernel (no float32 copy); through the
/// reader's float32 copy if a read of the rows fails.
void gram_of_stored(const StoredBf16Rows& rows, MatrixF& gram, const LayerKernels& kernels,
                    Triangles triangles);

/// The Gram of a side's basis as it is held, unscaled: gram_of_stored of stored rows, else
/// gram_float.
void basis_gram(const FactorSide& side, MatrixF& gram, const LayerKernels& kernels,
                Triangles triangles);

/// G's upper triangle mirrored into its lower one.
void mirror_upper(MatrixF& gram);

/// Both sides' Grams (their upper triangles, each buffer resized) formed together on kvrank's own
/// bf16 kernel (bf16_kernel_gram_pair: neither thread idle while the other finishes), where both
/// bases go to it whole: bf16 values (stored, or float32 ones), unscaled, each Gram large enough
/// for the kernel, and `kernels` allow it. False otherwise, or when a value or a read put a side
/// off the kernel: the caller then forms them (again) side by side.
bool bf16_grams_together(const FactorSide& left, const FactorSide& right, MatrixF& left_gram,
                         MatrixF& right_gram, const LayerKernels& kernels,
                         std::pair<int, int> scales);

/// One side's Gram and, for heads that are not a single full identity block, G·C_h.
/// `workspace` holds the Gram (a ComputeWorkspace's, kept by the caller across layers). When every
/// head is a plain slice of the basis (MHA/GQA/MQA), only G's upper triangle is formed, and every
/// read of G goes through it.
class SideGram {
 public:
  /// `scale_exponent`: side_scale_exponent(side), which the caller has already read (0 for a
  /// stored basis). `formed`: `workspace` already holds the Gram's upper triangle
  /// (bf16_grams_together).
  SideGram(const FactorSide& side, int scale_exponent, MatrixF& workspace,
           const detail::LayerKernels& kernels, bool formed = false)
      : side_(side), gram_(workspace), k_(side.head_cols), gram_exponent_(scale_exponent) {
    const Index heads = static_cast<Index>(side.heads.size());
    simple_row_.resize(heads);
    for (Index h = 0; h < heads; ++h) simple_row_[h] = identity_slice_row(side.heads[h], k_);
    const bool all_simple =
        std::all_of(simple_row_.begin(), simple_row_.end(), [](Index row) { return row >= 0; });
    const Triangles triangles = all_simple ? Triangles::upper : Triangles::both;
    if (formed) {
      if (triangles == Triangles::both) mirror_upper(gram_);
    } else if (side.stored || gram_exponent_ == 0) {
      // A stored basis is never scaled: analyze_layer copies an extreme one.
      basis_gram(side, gram_, kernels, triangles);
    } else {  // a copy: only when extreme
      gram_float(std::ldexp(1.0f, -gram_exponent_) * side.basis, gram_, kernels, triangles);
    }
    gc_.resize(heads);
    if (all_simple) return;
    detail::ParallelFailure failure;
#pragma omp parallel for schedule(dynamic)
    for (Index h = 0; h < heads; ++h) {
      if (simple_row_[h] < 0) failure.run([&] { gc_[h] = gram_times_coeffs(side.heads[h]); });
    }
    failure.rethrow();
  }

  Index head_cols() const noexcept { return k_; }
  /// The Gram is formed from the true basis (FactorSide::exponent) times 2^-exponent() (0: as is).
  int exponent() const noexcept { return side_.exponent + gram_exponent_; }

  /// L_iᵀ L_j (k × k) = C_iᵀ G C_j.
  MatrixD cross(Index i, Index j) const {
    if (simple_row_[i] >= 0 && simple_row_[j] >= 0)
      return upper_block(simple_row_[i], simple_row_[j]);
    MatrixD out = MatrixD::Zero(k_, k_);
    for (const CoeffBlock& block : side_.heads[i]) {
      const MatrixD rows = gc_rows(j, block.basis_row, block.rows());
      if (block.is_identity()) {
        out.middleRows(block.head_col, block.rows()) += rows;
      } else {
        out.middleRows(block.head_col, block.cols()).noalias() +=
            block.in_double().transpose() * rows;
      }
    }
    return out;
  }

  /// L_iᵀ L_j where it can be read from G without a copy: both heads plain slices whose block of G
  /// lies wholly on one side of the diagonal, or on it (the same rows: a symmetric block of which
  /// only the upper triangle is read).
  struct StoredBlock {
    enum Kind { as_is, transposed, symmetric };
    Eigen::Block<const MatrixF> block;
    Kind kind;
  };
  std::optional<StoredBlock> stored_block(Index i, Index j) const {
    if (simple_row_[i] < 0 || simple_row_[j] < 0) return std::nullopt;
    return stored_at(simple_row_[i], simple_row_[j]);
  }

 private:
  /// G·C_h (m × k) for a head given by its coefficient blocks.
  MatrixD gram_times_coeffs(const std::vector<CoeffBlock>& blocks) const {
    MatrixD out = MatrixD::Zero(gram_.rows(), k_);
    for (const CoeffBlock& block : blocks) {
      const auto columns = gram_.middleCols(block.basis_row, block.rows()).cast<double>();
      if (block.is_identity()) {
        out.middleCols(block.head_col, block.cols()) += columns;
      } else {
        out.middleCols(block.head_col, block.cols()).noalias() += columns * block.in_double();
      }
    }
    return out;
  }

  /// Where G's k × k block at (row, col) is held in the upper triangle: as it is, transposed, or
  /// (row = col) as a symmetric block's upper half; empty when it crosses the diagonal otherwise.
  std::optional<StoredBlock> stored_at(Index row, Index col) const {
    const MatrixF& gram = gram_;
    if (row + k_ <= col) return StoredBlock{gram.block(row, col, k_, k_), StoredBlock::as_is};
    if (col + k_ <= row) return StoredBlock{gram.block(col, row, k_, k_), StoredBlock::transposed};
    if (row == col) return StoredBlock{gram.block(row, row, k_, k_), StoredBlock::symmetric};
    return std::nullopt;
  }

  /// G's k × k block at (row, col) from its upper triangle (the lower one may be unset).
  MatrixD upper_block(Index row, Index col) const;

  /// Rows [row, row + count) of G·C_j (G mirrored: some head is not a plain slice).
  MatrixD gc_rows(Index j, Index row, Index count) const {
    if (simple_row_[j] >= 0) return gram_.block(row, simple_row_[j], count, k_).cast<double>();
    return gc_[j].middleRows(row, count);
  }

  const FactorSide& side_;
  MatrixF& gram_;
  Index k_;
  int gram_exponent_;
  std::vector<Index> simple_row_;  ///< basis row of a single-identity head, −1 otherwise
  std::vector<MatrixD> gc_;        ///< G·C_h for the other heads
};

/// ⟨A_i, A_j⟩_F for all pairs (H × H, symmetric). The pairs, not the rows, go to the threads: a
/// layer of few heads (6 in a 128M model) has too few rows to share out evenly. A pair's blocks
/// have left the cache while the Grams were formed, so a multiply-add here costs about 8 in a
/// product (5 cycles an element on one thread; the 128M run spent 4 % of its time here, the other
/// thread waiting).
MatrixD head_inner_products(const SideGram& left, const SideGram* right, Index heads);

}  // namespace kvrank::detail

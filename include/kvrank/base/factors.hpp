// Per-head bilinear forms A_h = L_h R_hᵀ, held as factors in a shared basis (docs/metric.md).
//
// Each side (L or R) of every head is a d×k matrix whose columns live in the span of a shared set
// of basis vectors. The basis is stored as the *rows* of a row-major float32 matrix `basis` (m × d)
// — exactly how projection weights lie in a checkpoint (`[out, in]`) — and head h's columns are
//   L_h = basisᵀ · C_h,   C_h (m × k) sparse, given as a list of blocks.
// Examples:
//   MHA / GQA query or key side: basis = q_proj (H·d_h × d); C_h selects rows [h·d_h, (h+1)·d_h)
//     → one identity block at basis_row = h·d_h. GQA heads sharing a KV head point at the same
//     rows, so each distinct KV block enters the Gram once.
//   LRKV key side: basis = [k_shared; k_lora_a] ((d_h + H·r) × d); C_h = identity at row 0 plus
//     block k_lora_b_hᵀ (r × d_h) at row d_h + h·r.
//   MLA key side: basis = kv_a_proj rows (latent, scaled by the RMSNorm gain, then rope rows);
//     C_h = kv_b_h,Kᵀ at row 0 (columns [0, nope)) plus identity on the rope rows (columns
//     [nope, nope+rope)).
// Because only Grams of the basis are ever formed (basis · basisᵀ, one SYRK), no d×d matrix is
// built and the cost scales with m, the size of what is cached, not with d.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kvrank/base/eigen.hpp"

namespace kvrank {

/// A basis left where the checkpoint holds it: m × n bfloat16 values, row-major and contiguous (a
/// projection's [out, in] rows as stored, at any alignment), which the bf16 Gram kernel reads in
/// place instead of through a float32 copy (layer_factors() with Bases::stored_bf16). The bytes
/// belong to the Checkpoint and stay valid until the layer's tensors are released; nothing in them
/// has been checked yet (analyze_layer checks them as it reads them).
struct StoredBf16Rows {
  std::span<const std::byte> bytes;  ///< rows · cols · 2 bytes
  Index rows = 0;
  Index cols = 0;
  /// The reader's float32 copy of the same rows, for every path but the bf16 kernel's; throws the
  /// reader's errors (a NaN or Inf naming the tensor, a file that shrank under its map).
  std::function<RowMatrixF()> to_float;
  /// The reader's conversion of rows [first, first + count) into `out` (count · cols floats), the
  /// values of to_float's rows; false where a value is NaN or Inf or the file shrank (to_float then
  /// says which). For the latent contraction, which takes coefficient rows a head at a time.
  std::function<bool(Index first, Index count, float* out)> rows_to_float;

  /// For a read of the bytes that failed: throws what to_float() says is wrong (a NaN or Inf
  /// naming the tensor, a file that shrank), so the error reads as on every other path; where it
  /// finds nothing, that the rows changed while `reader` read them.
  [[noreturn]] void throw_read_error(const char* reader) const;
};

/// One block of a sparse coefficient matrix C_h: rows [basis_row, basis_row + rows) and columns
/// [head_col, head_col + cols) of C_h hold a dense block — or the identity (then rows == cols ==
/// `identity_size`). A dense block is kept transposed, the way checkpoints hold it, and without a
/// copy: `cols` consecutive rows of a projection matrix that the heads share (query head h's rows
/// of DeepSeek's q_b_proj; row j is head column j's coefficients over the basis rows) — in float32
/// (`source`), or as the checkpoint stores them in bf16 (`stored`: analyze's latent contraction
/// reads them there; every other path asks for the float32 copy first, with_float_basis()).
struct CoeffBlock {
  Index basis_row = 0;
  Index head_col = 0;
  Index identity_size = 0;                   ///< used when `source` and `stored` are null
  std::shared_ptr<const RowMatrixF> source;  ///< rows [source_row, source_row + cols) hold Cᵀ
  Index source_row = 0;
  Index source_rows = 0;                         ///< the block's cols
  std::shared_ptr<const StoredBf16Rows> stored;  ///< instead of `source`: the rows in bf16

  bool is_identity() const noexcept { return source == nullptr && stored == nullptr; }
  bool is_stored() const noexcept { return stored != nullptr; }
  Index rows() const noexcept {
    return source ? source->cols() : stored ? stored->cols : identity_size;
  }
  Index cols() const noexcept { return is_identity() ? identity_size : source_rows; }
  /// The dense block's transpose, cols × rows (a float32 block: not identity, not stored).
  ConstRowMapF transposed() const {
    return ConstRowMapF(source->data() + source_row * source->cols(), source_rows, source->cols());
  }
  /// The block itself, rows × cols, in double (the identity for an identity block; not stored).
  MatrixD in_double() const {
    if (is_identity()) return MatrixD::Identity(identity_size, identity_size);
    return transposed().transpose().cast<double>();
  }

  static CoeffBlock identity(Index basis_row, Index size, Index head_col = 0) {
    return {basis_row, head_col, size, nullptr, 0, 0, nullptr};
  }
  /// Rows [first, first + count) of `source` as the transpose of a dense block (count × rows).
  static CoeffBlock rows_of(std::shared_ptr<const RowMatrixF> source, Index first, Index count,
                            Index basis_row, Index head_col = 0) {
    return {basis_row, head_col, 0, std::move(source), first, count, nullptr};
  }
  /// The same for rows left stored in bf16.
  static CoeffBlock stored_rows_of(std::shared_ptr<const StoredBf16Rows> stored, Index first,
                                   Index count, Index basis_row, Index head_col = 0) {
    return {basis_row, head_col, 0, nullptr, first, count, std::move(stored)};
  }
  /// A dense block given by its own transpose (cols × rows).
  static CoeffBlock dense(Index basis_row, Index head_col, RowMatrixF transposed) {
    const Index count = transposed.rows();
    return rows_of(std::make_shared<const RowMatrixF>(std::move(transposed)), 0, count, basis_row,
                   head_col);
  }
};

/// The basis row where a head's columns start when the head is a plain slice of the basis — one
/// identity block covering all `head_cols` columns (MHA/GQA/MQA) — and −1 otherwise.
inline Index identity_slice_row(const std::vector<CoeffBlock>& blocks, Index head_cols) {
  if (blocks.size() == 1 && blocks[0].is_identity() && blocks[0].head_col == 0 &&
      blocks[0].identity_size == head_cols) {
    return blocks[0].basis_row;
  }
  return -1;
}

/// Bases whose largest entry lies within 2^±kSafeScaleExponent are used as they are; others are
/// scaled by a power of two first (exact), so float32 products neither overflow nor underflow.
constexpr int kSafeScaleExponent = 32;

/// The power of two e such that `largest` · 2^-e lies in [1, 2), or 0 when `largest` is already
/// within 2^±kSafeScaleExponent (or is 0, or not finite).
inline int safe_scale_exponent(double largest) {
  if (!(largest > 0) || !std::isfinite(largest)) return 0;
  const int exponent = std::ilogb(largest);
  return std::abs(exponent) <= kSafeScaleExponent ? 0 : exponent;
}

/// One side of all heads: a shared basis and each head's coefficients.
struct FactorSide {
  RowMatrixF basis;  ///< m × n, basis vectors as rows (n = d, or T); empty when `stored` is set
  /// Set: the basis is these bf16 rows, not yet copied (`basis` is empty); see with_float_basis().
  std::optional<StoredBf16Rows> stored;
  /// The true basis is `basis` · 2^exponent: set where folding a gain into the rows would have left
  /// float32's range (norm_gains.cpp); ‖A_h‖ is scaled back, the scale-invariant metrics need not.
  int exponent = 0;
  /// Set (one factor per basis row): a norm gain kept beside the rows instead of folded into them,
  /// so that bf16 rows keep their bf16 values for kvrank's own bf16 Gram kernel. The true basis is
  /// then diag(row_gains) · basis · 2^exponent. Only the contraction's latent coordinates read the
  /// gains where they are (contraction.cpp); every other path folds them first (with_float_basis),
  /// which gives the rows a fold at load time gives, to the bit.
  std::vector<double> row_gains;
  std::vector<std::vector<CoeffBlock>> heads;  ///< C_h for h = 0..H-1
  Index head_cols = 0;                         ///< k: columns of every L_h

  Index rows() const noexcept { return stored ? stored->rows : basis.rows(); }  ///< m
  Index cols() const noexcept { return stored ? stored->cols : basis.cols(); }  ///< n
  /// Whether a head's coefficients are rows still stored bf16 (CoeffBlock::stored).
  bool has_stored_coefficients() const noexcept {
    return std::any_of(heads.begin(), heads.end(), [](const std::vector<CoeffBlock>& blocks) {
      return std::any_of(blocks.begin(), blocks.end(),
                         [](const CoeffBlock& block) { return block.is_stored(); });
    });
  }
};

/// Whether every head of `side` is a plain slice of its basis (identity_slice_row ≥ 0): MHA, GQA,
/// MQA, activations.
inline bool plain_slices(const FactorSide& side) {
  return std::all_of(side.heads.begin(), side.heads.end(), [&](const auto& blocks) {
    return identity_slice_row(blocks, side.head_cols) >= 0;
  });
}

/// The largest magnitude of each row of `rows` (over the threads: tens of MB a layer).
std::vector<float> row_largest_magnitudes(const RowMatrixF& rows);
/// The same of stored bf16 rows, read where they lie (bf16 values are exact in float32); nullopt
/// where a value is an Inf or NaN or the file shrank under the read (to_float() then says which).
std::optional<std::vector<float>> row_largest_magnitudes(const StoredBf16Rows& rows);
/// That of a side's basis as it is held: float32 rows, or stored bf16 ones.
std::optional<std::vector<float>> basis_row_largest_magnitudes(const FactorSide& side);
/// The largest magnitude of rows scaled by `factors` (row i by factors[i]), from each row's largest
/// (row_largest), in double: the product of a float and a factor does not overflow there.
double largest_scaled_magnitude(const std::vector<float>& row_largest,
                                const std::vector<double>& factors);

/// Keeps the first `count` rows of `side`'s basis (float32 or stored) and of its row gains.
void keep_first_basis_rows(FactorSide& side, Index count);

/// Row i of `rows` times factors[i], each product formed in double and rounded once to float32
/// (folding a gain into its projection's rows); the factors cover every row.
void scale_rows(RowMatrixF& rows, const std::vector<double>& factors);

/// `side` with its basis as a float32 matrix holding the true basis (up to 2^exponent): a stored
/// basis is copied (and checked) through StoredBf16Rows::to_float, row gains are folded into the
/// rows (scale_rows), and stored coefficient rows are copied the same way (once for the heads that
/// share them); any other side is returned as it is.
FactorSide with_float_basis(FactorSide side);

/// The H bilinear forms of one layer and one representation.
struct HeadFactors {
  FactorSide left;
  FactorSide right;
  /// True when A_h = L_h L_hᵀ (the `k` and `v` representations): `right` is then unused and the
  /// Gram of `left` is computed once.
  bool symmetric = false;

  Index num_heads() const noexcept { return static_cast<Index>(left.heads.size()); }
  /// Whether a side's basis is still stored bf16 (StoredBf16Rows).
  bool has_stored_basis() const noexcept {
    return left.stored.has_value() || (!symmetric && right.stored.has_value());
  }
  /// Whether a side's coefficients are still stored bf16 (CoeffBlock::stored).
  bool has_stored_coefficients() const noexcept {
    return left.has_stored_coefficients() || (!symmetric && right.has_stored_coefficients());
  }
  /// Whether a side keeps a gain beside its basis (FactorSide::row_gains).
  bool has_row_gains() const noexcept {
    return !left.row_gains.empty() || (!symmetric && !right.row_gains.empty());
  }
};

/// `side` with a stored basis copied to float32 (StoredBf16Rows::to_float) and nothing else
/// changed: row gains stay beside it, coefficient blocks where they are.
FactorSide with_basis_copied(FactorSide side);

/// `factors` with `change` (FactorSide → FactorSide) applied to each side.
template <typename Change>
HeadFactors with_each_side(const HeadFactors& factors, Change change) {
  HeadFactors copy;
  copy.symmetric = factors.symmetric;
  copy.left = change(factors.left);
  if (!factors.symmetric) copy.right = change(factors.right);
  return copy;
}

/// `factors` with every basis a float32 matrix of the true basis and every coefficient block in
/// float32 (with_float_basis).
inline HeadFactors with_float_bases(const HeadFactors& factors) {
  return with_each_side(factors, with_float_basis);
}

}  // namespace kvrank

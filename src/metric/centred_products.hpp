// Private: the H × H inner products of the contraction (contraction.cpp) summed over centred rows,
// so that J S J keeps the differences of heads that are 0.999… alike (docs/metric.md, "Precision").
//
// Why. S_ij near 1 and J S J = S less its row and column means: J S J's entries are 1 − S sized,
// and a float32 SYRK gives S to about 1e-7 absolute. At 1 − S ≈ 1e-6 (MLA keys 0.999 alike: their
// rope rows are shared) J S J was then 5 % off. So the rows are made small before the SYRK:
//   w_i = s_i M_i          (s_i ≈ 1 / ‖M_i‖, from the first chunk: any positive s is exact algebra)
//   r   = mean of w_i over the centred heads (t_i = 1; t_i = 0 for a head zero in the first chunk)
//   D   = W − t rᵀ         (rows of size ‖w_i − r‖, not ‖w_i‖)
//   E   = D Dᵀ (the float32 SYRK),  f = D r,  b = r·r
// and, for W = D + t rᵀ, W Wᵀ = E + t fᵀ + f tᵀ + b t tᵀ exactly. With Λ = 1 / ‖w_i‖,
//   J S J = J Λ E Λ J + (J Λ t)(J Λ f)ᵀ + (J Λ f)(J Λ t)ᵀ + b (J Λ t)(J Λ t)ᵀ,
// every term small and formed without subtracting numbers near 1 (centred_similarity); f and b
// need only float's relative precision, so all of it runs in float32 but the sums over chunks.
// r may differ per chunk (each chunk is its own stretch of the flattened M_i); s and t may not.
//
// r = 0 is exact algebra too (D = W, f = 0), and centring then buys little: E's float32 error is
// about ε‖d_i‖‖d_j‖, and over the heads mean ‖w_i − r‖² = mean ‖w_i‖² − ‖r‖², so where the mean
// holds at most half the heads' energy (‖r‖² ≤ ½ mean ‖w_i‖²) centring shrinks the error by at most
// 2×, one bit. So a chunk's SYRK is first taken of its rows as they are (no pass over them: the
// pass cost ~5 % of a DeepSeek-V3 run), and its scaled products kept where that holds and the rows
// were within float32's range (every head's sum of squares finite and at least 2^-80, so no term
// that underflowed weighs); else the chunk, and every one after it, is scaled and centred as above
// (alike heads are alike in every chunk: one SYRK is spent to find out).
#pragma once

#include <vector>

#include "kvrank/base/eigen.hpp"
#include "metric/blas.hpp"

namespace kvrank::detail {

/// The sums above over every chunk, in double.
struct CentredProducts {
  MatrixD e;        ///< E, H × H
  VectorD f;        ///< D r
  VectorD centred;  ///< t: 1 for a head whose rows were centred, else 0
  VectorD scale;    ///< s
  double b = 0;     ///< r·r

  /// W Wᵀ.
  MatrixD scaled_inner() const;
  /// ⟨M_i, M_j⟩ = (W Wᵀ)_ij / (s_i s_j).
  MatrixD inner() const;
};

/// Sums CentredProducts over chunks of the flattened M_h (H rows of `columns` floats each).
class CentredAccumulator {
 public:
  explicit CentredAccumulator(Index heads);
  /// Adds one chunk (H × columns, leading dimension `ld`); if it needs centring, scales and
  /// centres `rows` in place.
  void add(float* rows, Index columns, Index ld, FloatKernels kernels);
  const CentredProducts& products() const noexcept { return sums_; }

 private:
  void choose_scale(const float* rows, Index columns, Index ld);
  /// Adds `plain` (the chunk's rows' own SYRK) if the chunk needs no centring (see above).
  bool add_uncentred(const MatrixD& plain);
  void add_centred(float* rows, Index columns, Index ld, FloatKernels kernels);
  CentredProducts sums_;
  bool scaled_ = false;
  bool centring_ = false;  ///< once a chunk was centred, every later one is
};

/// J X J for a symmetric X (J = I − 11ᵀ/n): row and column means subtracted, the grand mean added
/// back, symmetrised.
MatrixD double_centred(const MatrixD& symmetric);

/// J S J over the `kept` heads (those with ⟨M_i, M_i⟩ > 0, in that order): see the file comment.
MatrixD centred_similarity(const CentredProducts& products, const std::vector<int>& kept);

}  // namespace kvrank::detail

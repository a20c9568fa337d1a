// The contraction's cost model and its memory (contraction_plan.hpp): which coordinates a
// layer's heads take, whether the contraction beats the pairwise path, and what it allocates.
#include "metric/contraction_plan.hpp"

#include <algorithm>

#include "metric/thread_pool.hpp"

namespace kvrank::detail {
namespace {

/// Small products in double (Eigen, unblocked sizes) cost about this many float32 BLAS
/// multiply-adds each; used only to compare the two paths.
constexpr double kDoubleWeight = 4.0;
/// The contraction's multiply-adds cost about this many of the pairwise path's as the model counts
/// them: taken automatically only where estimated cheaper by this much. Measured on LRKV layers
/// (bench/paths.cpp, 19 shapes, d 1024-4096, 8-32 heads, rank 8-256; Zen 4, 2 threads): the
/// pairwise path was the faster one at every estimated ratio up to 1.228 (d 1024, 16 heads, rank
/// 64: 1.6× faster; d 4096, 32 heads, rank 128 at 1.057: 1.18×), the contraction from 1.298 on
/// (d 2048, 16 heads, rank 128: 1.16×) but for a tie at d 1024. With a factor of 1 both of the
/// former took the contraction.
constexpr double kContractionWeight = 1.25;
/// A plan whose coordinates would exceed this many floats is not considered (8 GB).
constexpr double kMaxCoordinateFloats = 2e9;

double sq(double x) { return x * x; }

/// Multiply-adds of the pairwise path (diversity.cpp's SideGram) for one side.
double pairwise_side_cost(const FactorSide& side) {
  const double m = static_cast<double>(side.rows());
  const double n = static_cast<double>(side.cols());
  const double k = static_cast<double>(side.head_cols);
  const double heads = static_cast<double>(side.heads.size());
  double per_pair = 0;  // a pair's C_iᵀ (G C_j), taken as the mean over heads
  double gc = 0;        // G·C_h for the heads that need it
  for (const auto& blocks : side.heads) {
    if (identity_slice_row(blocks, side.head_cols) >= 0) {
      per_pair += sq(k);
      continue;
    }
    for (const CoeffBlock& block : blocks) {
      const double rows = static_cast<double>(block.rows());
      const double cols = static_cast<double>(block.cols());
      per_pair += kDoubleWeight * (block.is_identity() ? rows * k : cols * rows * k);
      gc += kDoubleWeight * (block.is_identity() ? m * cols : m * rows * cols);
    }
  }
  return sq(m) * n / 2 + gc + heads * (heads + 1) / 2 * per_pair / std::max(heads, 1.0);
}

/// Multiply-adds to write one side in `how` coordinates.
double coordinate_cost(const FactorSide& side, Coordinates how) {
  const double m = static_cast<double>(side.rows());
  const double n = static_cast<double>(side.cols());
  if (how == Coordinates::raw && plain_slices(side)) return 0;
  double cost = how == Coordinates::latent ? sq(m) * n / 2 + kDoubleWeight * m * m * m / 6 : 0;
  for (const auto& blocks : side.heads) {
    for (const CoeffBlock& block : blocks) {
      const double rows = static_cast<double>(block.rows());
      const double cols = static_cast<double>(block.cols());
      const double width =
          how == Coordinates::raw ? n : static_cast<double>(block.basis_row) + rows / 2;
      cost += block.is_identity() ? cols * (how == Coordinates::raw ? n : m) : cols * rows * width;
    }
  }
  return cost;
}

std::optional<ContractionPlan> costed(const HeadFactors& factors, Coordinates left,
                                      Coordinates right) {
  const FactorSide& other = factors.symmetric ? factors.left : factors.right;
  const double heads = static_cast<double>(factors.num_heads());
  const double k = static_cast<double>(factors.left.head_cols);
  const double p = static_cast<double>(coordinate_dimension(factors.left, left));
  const double q =
      static_cast<double>(coordinate_dimension(other, factors.symmetric ? left : right));
  double coordinates = coordinate_cost(factors.left, left);
  if (!factors.symmetric) coordinates += coordinate_cost(other, right);
  if (heads * k * std::max(p, q) > kMaxCoordinateFloats) return std::nullopt;
  ContractionPlan plan{left, factors.symmetric ? left : right, 0};
  // Counted in the basis's own order and at full width: the order and the narrower products of
  // latent_order.hpp make a contraction cheaper than this (a V3 layer's 72 G by 6 G). Crediting
  // them moved an LRKV layer (d 4096, 32 heads, rank 64) off the pairwise path, which the model
  // rates too dear, and made it 2.1× slower: the choice stays where it was measured to pay.
  plan.cost = coordinates + heads * p * q * k + heads * (heads + 1) / 2 * p * q;
  return plan;
}

}  // namespace

double pairwise_cost(const HeadFactors& factors) {
  return pairwise_side_cost(factors.left) +
         (factors.symmetric ? 0.0 : pairwise_side_cost(factors.right));
}

Index coordinate_dimension(const FactorSide& side, Coordinates how) {
  return how == Coordinates::latent ? side.rows() : side.cols();
}

std::optional<ContractionPlan> choose_contraction(const HeadFactors& factors, Contraction how) {
  if (how == Contraction::pairwise) return std::nullopt;
  if (how == Contraction::automatic && plain_slices(factors.left) &&
      (factors.symmetric || plain_slices(factors.right))) {
    return std::nullopt;  // plain slices of a Gram: the pairwise path is the SYRK floor
  }
  std::optional<ContractionPlan> best;
  for (Coordinates left : {Coordinates::latent, Coordinates::raw}) {
    for (Coordinates right : {Coordinates::latent, Coordinates::raw}) {
      if (factors.symmetric && right != left) continue;
      const std::optional<ContractionPlan> plan = costed(factors, left, right);
      if (plan && (!best || plan->cost < best->cost)) best = plan;
    }
  }
  if (how == Contraction::automatic && best &&
      pairwise_cost(factors) <= kContractionWeight * best->cost)
    return std::nullopt;
  return best;
}

namespace {

/// Bytes of a float buffer rows × cols that fit_buffer() allocates: none when `held` has that size.
std::uint64_t new_buffer_bytes(const RowMatrixF& held, Index rows, Index cols) {
  if (held.rows() == rows && held.cols() == cols) return 0;
  return static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(cols) * sizeof(float);
}

/// What SideCoordinates allocates for one side written in `how` coordinates.
std::uint64_t coordinate_bytes(const FactorSide& side, Coordinates how, const RowMatrixF& held) {
  if (how == Coordinates::raw && plain_slices(side)) return 0;
  const auto m = static_cast<std::uint64_t>(side.rows());
  // latent_factor: the float32 Gram, the double one (factored in place), the factor in float32;
  // bounding its LDLᵀ fallback (the Gram formed again, the decomposition, L and F in double).
  // The Gram in a new order (latent_order.hpp) is a further double copy.
  const std::uint64_t factor = how == Coordinates::latent ? m * m * (4 + 8 + 8 + 8 + 16 + 4) : 0;
  const Index heads = static_cast<Index>(side.heads.size());
  return factor + new_buffer_bytes(held, heads * side.head_cols, coordinate_dimension(side, how));
}

}  // namespace

std::uint64_t contraction_bytes(const HeadFactors& factors, const ContractionPlan& plan,
                                const ComputeWorkspace& workspace) {
  const Index heads = factors.num_heads();
  const auto k = static_cast<std::uint64_t>(factors.left.head_cols);
  const FactorSide& other = factors.symmetric ? factors.left : factors.right;
  std::uint64_t bytes = coordinate_bytes(factors.left, plan.left, workspace.left_coordinates);
  if (!factors.symmetric)
    bytes += coordinate_bytes(factors.right, plan.right, workspace.right_coordinates);
  const Index p = coordinate_dimension(factors.left, plan.left);
  const Index q = coordinate_dimension(other, factors.symmetric ? plan.left : plan.right);
  if (heads > 0 && q > 0) {
    const Index chunk =
        std::clamp<Index>(kContractionChunkFloats / (heads * q), 1, std::max<Index>(p, 1));
    bytes += new_buffer_bytes(workspace.contracted_rows, heads, chunk * q);
  }
  // The double copies of X_hᵀ (one per thread) for the heads' own products (their k × k results
  // are the eigenproblems', counted with them: head_spectra.hpp), the H × H sums.
  const auto h = static_cast<std::uint64_t>(heads);
  const auto widest = static_cast<std::uint64_t>(std::max(p, q));
  bytes += static_cast<std::uint64_t>(available_threads()) * k * widest * 8;
  return bytes + 4 * h * h * 8 * static_cast<std::uint64_t>(available_threads());
}

}  // namespace kvrank::detail

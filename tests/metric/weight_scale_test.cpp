// Weight magnitude (docs/input-limits.md): the metric is scale-invariant, whatever the magnitude of
// the weights the float32 Grams are formed from; multiples of one head have similarity exactly ≤ 1.
#include <cmath>
#include <random>
#include <vector>

#include "kvrank/metric/diversity.hpp"
#include "support/catch.hpp"

namespace kvrank {
namespace {

/// H heads of k columns over d inputs, each its own row block: C_h = identity at row h·k.
FactorSide block_side(const RowMatrixF& basis, Index heads, Index k) {
  FactorSide side;
  side.basis = basis;
  side.head_cols = k;
  for (Index h = 0; h < heads; ++h) side.heads.push_back({CoeffBlock::identity(h * k, k)});
  return side;
}

HeadFactors random_factors(bool symmetric, float scale) {
  constexpr Index kHeads = 4, kCols = 3, kInputs = 16;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  auto random_basis = [&] {
    RowMatrixF basis(kHeads * kCols, kInputs);
    for (Index i = 0; i < basis.size(); ++i) basis.data()[i] = normal(rng);
    return basis;
  };
  HeadFactors factors;
  factors.symmetric = symmetric;
  factors.left = block_side(random_basis() * scale, kHeads, kCols);
  if (!symmetric) factors.right = block_side(random_basis() * scale, kHeads, kCols);
  return factors;
}

}  // namespace

TEST_CASE("weight scale: huge or tiny weights give the unscaled metrics and true norms",
          "[weight_scale][diversity]") {
  for (const bool symmetric : {false, true}) {
    const LayerMetrics unit = analyze_layer(random_factors(symmetric, 1.0f));
    // 1e19 overflowed the float32 Gram (every head "all zero"), 1e-25 underflowed it.
    for (const float scale : {1e19f, 1e30f, 1e-25f, 0x1p100f, 0x1p-100f}) {
      INFO("symmetric " << symmetric << ", scale " << scale);
      const LayerMetrics scaled = analyze_layer(random_factors(symmetric, scale));
      CHECK(scaled.zero_heads.empty());
      CHECK(scaled.heads == unit.heads);
      CHECK(scaled.erank == Approx(unit.erank).epsilon(1e-5));
      CHECK(scaled.erank_centered == Approx(unit.erank_centered).epsilon(1e-5));
      CHECK(scaled.mean_similarity == Approx(unit.mean_similarity).epsilon(1e-5));
      // ‖A_h‖ = ‖L_h R_hᵀ‖ scales with the square of the weights.
      const double norm_scale = static_cast<double>(scale) * static_cast<double>(scale);
      for (std::size_t h = 0; h < unit.head_norm.size(); ++h) {
        CHECK(scaled.head_norm[h] / norm_scale == Approx(unit.head_norm[h]).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("weight scale: a side's exponent scales head_norm by its power of two and nothing else",
          "[weight_scale][diversity]") {
  // FactorSide::exponent is how a gain folded outside float32's range reaches the metric.
  for (const bool symmetric : {false, true}) {
    for (const Contraction how :
         {Contraction::automatic, Contraction::pairwise, Contraction::latent}) {
      const LayerMetrics unit = analyze_layer(random_factors(symmetric, 1.0f), how);
      HeadFactors shifted = random_factors(symmetric, 1.0f);
      shifted.left.exponent = 150;
      if (!symmetric) shifted.right.exponent = -40;
      const LayerMetrics scaled = analyze_layer(shifted, how);
      INFO("symmetric " << symmetric << ", contraction " << static_cast<int>(how));
      CHECK(scaled.erank == unit.erank);
      CHECK(scaled.erank_centered == unit.erank_centered);
      CHECK(scaled.mean_similarity == unit.mean_similarity);
      const int exponent = symmetric ? 300 : 110;
      for (std::size_t h = 0; h < unit.head_norm.size(); ++h)
        CHECK(scaled.head_norm[h] == std::ldexp(unit.head_norm[h], exponent));
    }
  }
}

TEST_CASE("weight scale: multiples of one head have mean similarity at most 1",
          "[weight_scale][diversity]") {
  constexpr Index kCols = 4, kInputs = 8;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  RowMatrixF head(kCols, kInputs), keys(kCols, kInputs);
  for (Index i = 0; i < head.size(); ++i) head.data()[i] = normal(rng);
  for (Index i = 0; i < keys.size(); ++i) keys.data()[i] = normal(rng);
  const std::vector<float> multiples{1.0f, 3.0f, 0.1f, 7.0f, 1e-3f, 12345.0f};
  const Index heads = static_cast<Index>(multiples.size());
  RowMatrixF queries(heads * kCols, kInputs), shared_keys(heads * kCols, kInputs);
  for (Index h = 0; h < heads; ++h) {
    queries.middleRows(h * kCols, kCols) = multiples[static_cast<std::size_t>(h)] * head;
    shared_keys.middleRows(h * kCols, kCols) = keys;
  }
  HeadFactors factors;
  factors.left = block_side(queries, heads, kCols);
  factors.right = block_side(shared_keys, heads, kCols);
  const LayerMetrics metrics = analyze_layer(factors);
  CHECK(metrics.mean_similarity <= 1.0);
  CHECK(metrics.mean_similarity == Approx(1.0).epsilon(1e-6));
  CHECK(metrics.similarity.maxCoeff() <= 1.0);
  CHECK(metrics.erank == Approx(1.0).epsilon(1e-6));
}

}  // namespace kvrank

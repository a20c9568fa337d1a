// Random per-head factors for the metric's tests (diversity_test.cpp, contraction_test.cpp,
// diff_test.cpp): explicit d × k matrices, and a side that holds each as its own rows of the
// basis; uniform random rows; LRKV- and MLA-like sides of sparse blocks, and their explicit heads.
#pragma once

#include <random>
#include <vector>

#include "kvrank/base/factors.hpp"

namespace kvrank::test {

using Heads = std::vector<MatrixD>;  // per head a d × k factor (L_h or R_h)

/// Random d × k factors with float32-representable entries (so the float32 basis holds them
/// exactly).
inline Heads random_heads(Index count, Index d, Index k, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  Heads heads;
  for (Index h = 0; h < count; ++h) {
    MatrixD m(d, k);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<double>(normal(rng));
    heads.push_back(m);
  }
  return heads;
}

/// Uniform values in [-1, 1] from the test's own generator: Eigen's Random() draws from the global
/// std::rand, whose state depends on which tests ran before in the same process.
inline RowMatrixF uniform_rows(Index rows, Index cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  RowMatrixF m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = uniform(rng);
  return m;
}

/// Each head its own basis block: basis rows = L_hᵀ stacked, C_h = identity at row h·k.
inline FactorSide side_of(const Heads& heads) {
  FactorSide side;
  const Index k = heads.front().cols();
  side.head_cols = k;
  side.basis.resize(static_cast<Index>(heads.size()) * k, heads.front().rows());
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const Index row = static_cast<Index>(h) * k;
    side.basis.middleRows(row, k) = heads[h].transpose().cast<float>();
    side.heads.push_back({CoeffBlock::identity(row, k)});
  }
  return side;
}

/// A layer of heads A_h = L_h R_hᵀ, each side its heads' own rows (side_of).
inline HeadFactors factors_of(const Heads& left, const Heads& right) {
  HeadFactors f;
  f.left = side_of(left);
  f.right = side_of(right);
  return f;
}

/// Explicit L_h = basisᵀ C_h of one side (d × k, double).
inline Heads explicit_heads(const FactorSide& side) {
  Heads out;
  const MatrixD basis_t = side.basis.cast<double>().transpose();
  for (const auto& blocks : side.heads) {
    MatrixD l = MatrixD::Zero(side.basis.cols(), side.head_cols);
    for (const CoeffBlock& b : blocks) {
      l.middleCols(b.head_col, b.cols()) +=
          basis_t.middleCols(b.basis_row, b.rows()) * b.in_double();
    }
    out.push_back(l);
  }
  return out;
}

/// LRKV/MLA-like factors: shared rows with identity blocks plus per-head dense blocks, some at a
/// column offset.
inline HeadFactors sparse_factors(Index heads, Index d, Index k, Index r, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  auto random_block = [&](Index rows, Index cols) {  // its transpose, as CoeffBlock keeps it
    RowMatrixF m(cols, rows);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(normal(rng));
    return m;
  };
  HeadFactors f;
  // Left (LRKV key side): [shared (k rows); U_h (r rows each)], C_h = I at 0 + dense at k + h·r.
  f.left.basis = uniform_rows(k + heads * r, d, rng);
  f.left.head_cols = k;
  for (Index h = 0; h < heads; ++h) {
    f.left.heads.push_back(
        {CoeffBlock::identity(0, k), CoeffBlock::dense(k + h * r, 0, random_block(r, k))});
  }
  // Right (MLA key side): latent rows, C_h = dense (latent × (k-2)) at column 0 + identity on two
  // shared rope rows at column k-2.
  const Index latent = 6;
  f.right.basis = uniform_rows(latent + 2, d, rng);
  f.right.head_cols = k;
  for (Index h = 0; h < heads; ++h) {
    f.right.heads.push_back({CoeffBlock::dense(0, 0, random_block(latent, k - 2)),
                             CoeffBlock::identity(latent, 2, k - 2)});
  }
  return f;
}

}  // namespace kvrank::test

// Tests of the contraction's centred sums (src/metric/centred_products.hpp): the inner products
// they give back, and J S J of heads so alike that a float32 SYRK of the rows loses it.
#include "metric/centred_products.hpp"

#include <random>
#include <vector>

#include "kvrank/metric/diversity.hpp"
#include "support/catch.hpp"
#include "support/random_factors.hpp"

using namespace kvrank;
using detail::CentredAccumulator;

namespace {

/// Rows common + spread · own_h, each head scaled by its own factor in [0.5, 2].
RowMatrixF alike_rows(Index heads, Index columns, double spread, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> factor(0.5, 2.0);
  VectorD common(columns);
  for (Index c = 0; c < columns; ++c) common[c] = normal(rng);
  RowMatrixF rows(heads, columns);
  for (Index h = 0; h < heads; ++h) {
    const double scale = factor(rng);
    for (Index c = 0; c < columns; ++c)
      rows(h, c) = static_cast<float>(scale * (common[c] + spread * normal(rng)));
  }
  return rows;
}

/// The sums over `rows` fed in chunks of the given widths (add() centres its chunk in place).
detail::CentredProducts sum_in_chunks(const RowMatrixF& rows, const std::vector<Index>& widths) {
  CentredAccumulator sums(rows.rows());
  Index first = 0;
  for (Index width : widths) {
    RowMatrixF chunk = rows.middleCols(first, width);
    sums.add(chunk.data(), width, chunk.cols(), detail::FloatKernels::blas);
    first += width;
  }
  return sums.products();
}

/// J S J of the rows' cosine Gram, in double from the float32 rows.
MatrixD centred_cosines(const RowMatrixF& rows) {
  const MatrixD values = rows.cast<double>();
  const MatrixD gram = values * values.transpose();
  const VectorD norms = gram.diagonal().cwiseSqrt();
  const MatrixD cosines = gram.array() / (norms * norms.transpose()).array();
  return detail::double_centred(cosines);
}

/// Whether add() centred the chunk: it then scales and centres the rows in place.
bool add_centres(CentredAccumulator& sums, RowMatrixF chunk) {
  const RowMatrixF before = chunk;
  sums.add(chunk.data(), chunk.cols(), chunk.cols(), detail::FloatKernels::blas);
  return chunk != before;
}

MatrixD double_gram(const RowMatrixF& rows) {
  const MatrixD values = rows.cast<double>();
  return values * values.transpose();
}

double relative(const MatrixD& got, const MatrixD& want) {
  return (got - want).norm() / want.norm();
}

}  // namespace

TEST_CASE("the centred sums give back the rows' inner products; zero heads stay exactly zero",
          "[diversity]") {
  std::mt19937 rng(31);
  RowMatrixF rows = alike_rows(6, 1000, 0.5, rng);
  rows.row(2).setZero();                // an all-zero head
  rows.row(4).leftCols(300).setZero();  // zero in the first chunk only: not centred
  const detail::CentredProducts sums = sum_in_chunks(rows, {300, 500, 200});
  CHECK(sums.centred[2] == 0.0);
  CHECK(sums.centred[4] == 0.0);
  const MatrixD want = rows.cast<double>() * rows.cast<double>().transpose();
  const MatrixD got = sums.inner();
  CHECK(relative(got, want) < 1e-6);
  CHECK(got.row(2).isZero(0.0));
  CHECK(got.col(2).isZero(0.0));
  CHECK(got(4, 4) > 0);
}

TEST_CASE("J S J of heads 0.9999 alike keeps their differences", "[diversity]") {
  std::mt19937 rng(32);
  // 1 − S ≈ 1e-8: a float32 SYRK's S is off by ~1e-7, J S J by far more than itself.
  const RowMatrixF rows = alike_rows(8, 5000, 1e-4, rng);
  const MatrixD want = centred_cosines(rows);
  const detail::CentredProducts sums = sum_in_chunks(rows, {1700, 1700, 1600});
  const MatrixD got = detail::centred_similarity(sums, {0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(relative(got, want) < 1e-4);
  // The case is hard: J S J from the float32 Gram of the rows (the way before) is lost.
  RowMatrixF copy = rows;
  const MatrixD plain = detail::syrk_double(detail::FloatKernels::blas, 8, 5000, copy.data(), 5000);
  const VectorD norms = plain.diagonal().cwiseSqrt();
  const MatrixD cosines = plain.array() / (norms * norms.transpose()).array();
  CHECK(relative(detail::double_centred(cosines), want) > 1e-2);
}

TEST_CASE("erank_centered of latent heads 0.999 alike matches the explicit double computation",
          "[diversity]") {
  // MLA keys: C_h = common + 1e-3 · own_h over latent rows, plus two shared rope rows.
  std::mt19937 rng(33);
  std::normal_distribution<float> normal;
  const Index heads = 8, d = 64, latent = 12, k = 6;
  HeadFactors f;
  f.symmetric = true;
  f.left.basis = RowMatrixF(latent + 2, d);
  for (Index i = 0; i < f.left.basis.size(); ++i) f.left.basis.data()[i] = normal(rng);
  f.left.head_cols = k;
  RowMatrixF common(k - 2, latent);
  for (Index i = 0; i < common.size(); ++i) common.data()[i] = normal(rng);
  for (Index h = 0; h < heads; ++h) {
    RowMatrixF own = common;
    for (Index i = 0; i < own.size(); ++i) own.data()[i] += 1e-3f * normal(rng);
    f.left.heads.push_back({CoeffBlock::dense(0, 0, own), CoeffBlock::identity(latent, 2, k - 2)});
  }
  // The explicit A_h = L_h L_hᵀ (d × d) in double, S and J S J from them.
  std::vector<MatrixD> forms;
  const MatrixD basis_t = f.left.basis.cast<double>().transpose();
  for (const auto& blocks : f.left.heads) {
    MatrixD l = MatrixD::Zero(d, k);
    for (const CoeffBlock& b : blocks)
      l.middleCols(b.head_col, b.cols()) +=
          basis_t.middleCols(b.basis_row, b.rows()) * b.in_double();
    forms.push_back(l * l.transpose());
  }
  MatrixD s(heads, heads);
  for (Index i = 0; i < heads; ++i)
    for (Index j = 0; j < heads; ++j)
      s(i, j) = forms[i].cwiseProduct(forms[j]).sum() /
                std::sqrt(forms[i].squaredNorm() * forms[j].squaredNorm());
  const LayerMetrics want = similarity_metrics(s);
  REQUIRE(want.mean_similarity > 0.99999);  // the case the float32 products lost
  const LayerMetrics got = analyze_layer(f, Contraction::latent);
  CHECK(std::abs(got.erank_centered - want.erank_centered) <= 1e-5 * want.erank_centered);
  CHECK(got.pcs_90 == want.pcs_90);
}

TEST_CASE("a chunk is centred only where the heads' mean holds over half their energy",
          "[diversity]") {
  // 64 heads common + spread · own, scaled to unit norm: ‖r‖² / mean ‖w_i‖² is then about
  // (1 + spread²/64) / (1 + spread²).
  std::mt19937 rng(34);
  const RowMatrixF apart = alike_rows(64, 2000, 1.3, rng);  // ≈ 0.38: left as it is
  const RowMatrixF close = alike_rows(64, 2000, 0.8, rng);  // ≈ 0.61: centred
  CentredAccumulator first(64);
  CHECK_FALSE(add_centres(first, apart));
  CHECK(relative(first.products().inner(), double_gram(apart)) < 1e-6);
  CentredAccumulator second(64);
  CHECK(add_centres(second, close));
  CHECK(relative(second.products().inner(), double_gram(close)) < 1e-6);
}

TEST_CASE("once a chunk is centred every later one is, and the sums still add up", "[diversity]") {
  std::mt19937 rng(35);
  RowMatrixF rows(16, 3000);
  rows << alike_rows(16, 1000, 2.0, rng), alike_rows(16, 1000, 1e-3, rng),
      alike_rows(16, 1000, 2.0, rng);
  CentredAccumulator sums(16);
  CHECK_FALSE(add_centres(sums, rows.leftCols(1000)));
  CHECK(add_centres(sums, rows.middleCols(1000, 1000)));
  CHECK(add_centres(sums, rows.rightCols(1000)));
  CHECK(relative(sums.products().inner(), double_gram(rows)) < 1e-6);
}

TEST_CASE("rows outside float32's range for their own SYRK are scaled first", "[diversity]") {
  // Unalike heads, but their squares underflow (1e-25²) or overflow (1e25²) in float32: the plain
  // SYRK would give zeros or infinities; scaled to unit norm first, the products come out right.
  for (const float size : {1e-25f, 1e25f}) {
    std::mt19937 rng(36);
    const RowMatrixF rows = size * alike_rows(8, 1000, 2.0, rng);
    CentredAccumulator sums(8);
    CHECK(add_centres(sums, rows));
    CHECK(relative(sums.products().inner(), double_gram(rows)) < 1e-6);
  }
}

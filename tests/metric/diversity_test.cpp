// Tests of the metric engine (src/metric/diversity.cpp): closed forms, invariances, the
// block-sparse factor representation, and a cross-check against the naive numpy reference
// (scripts/reference.py). The contraction path (MLA, LRKV) has its own: contraction_test.cpp.
#include "kvrank/metric/diversity.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "metric/contraction.hpp"
#include "support/catch.hpp"
#include "support/layer_metrics_check.hpp"
#include "support/random_factors.hpp"
#include "support/test_util.hpp"

using namespace kvrank;

namespace {

using test::check_close;
using test::check_same_metrics;
using test::explicit_heads;
using test::factors_of;
using test::Heads;
using test::random_heads;
using test::side_of;
using test::sparse_factors;
using test::uniform_rows;

/// One row of every side as basis rows with integer entries, for closed forms with an exact Gram.
RowMatrixF integer_rows(Index rows, Index cols, std::mt19937& rng) {
  std::uniform_int_distribution<int> digit(-3, 3);
  RowMatrixF m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(digit(rng));
  return m;
}

/// Heads as one float64 [H, d, k] NPY file for the reference cross-check.
void write_npy(const std::filesystem::path& path, const Heads& heads) {
  const Index d = heads.front().rows(), k = heads.front().cols();
  std::vector<double> values;
  for (const MatrixD& m : heads)
    for (Index a = 0; a < d; ++a)
      for (Index b = 0; b < k; ++b) values.push_back(m(a, b));
  test::write_npy(path, {static_cast<std::int64_t>(heads.size()), d, k}, values);
}

/// Runs scripts/reference.py heads on explicit factors; returns its JSON for layer 0.
nlohmann::json reference_metrics(const Heads& left, const Heads& right) {
  test::TempDir dir;
  write_npy(dir / "layer0.L.npy", left);
  write_npy(dir / "layer0.R.npy", right);
  const auto result = test::run_python_script("reference.py", "heads " + dir.path().string());
  REQUIRE(result.exit_code == 0);
  return nlohmann::json::parse(result.out)["layers"][0];
}

void check_against_reference(const LayerMetrics& m, const nlohmann::json& ref) {
  CHECK(m.heads == ref["heads"].get<int>());
  check_close(m.erank, ref["erank"], 1e-5);
  check_close(m.erank_centered, ref["erank_centered"], 1e-5);
  check_close(m.erank_pct, ref["erank_pct"], 1e-5);
  check_close(m.erank_centered_pct, ref["erank_centered_pct"], 1e-5);
  check_close(m.mean_similarity, ref["mean_similarity"], 1e-5, 1e-6);
  CHECK(m.pcs_90 == ref["pcs_90"].get<int>());
  CHECK(m.zero_heads == ref["zero_heads"].get<std::vector<int>>());
  const auto eig = ref["eigenvalues"].get<std::vector<double>>();
  const auto eig_c = ref["eigenvalues_centered"].get<std::vector<double>>();
  REQUIRE(m.eigenvalues.size() == eig.size());
  for (size_t i = 0; i < eig.size(); ++i) {
    check_close(m.eigenvalues[i], eig[i], 1e-5, 1e-6);
    check_close(m.eigenvalues_centered[i], eig_c[i], 1e-5, 1e-6);
  }
  const auto head_norm = ref["head_norm"].get<std::vector<double>>();
  const auto head_erank = ref["head_erank"].get<std::vector<double>>();
  REQUIRE(m.head_norm.size() == head_norm.size());
  for (size_t h = 0; h < head_norm.size(); ++h) {
    check_close(m.head_norm[h], head_norm[h], 1e-5);
    check_close(m.head_erank[h], head_erank[h], 1e-4);
  }
}

}  // namespace

TEST_CASE("effective_rank closed forms", "[diversity]") {
  for (int n : {1, 2, 7, 64}) {
    check_close(effective_rank(std::vector<double>(n, 0.5)), n, 1e-12);
  }
  CHECK(effective_rank({3.0, 0.0, 0.0}) == 1.0);
  CHECK(effective_rank({0.0, 0.0}) == 0.0);
  CHECK(effective_rank({}) == 0.0);
  check_close(effective_rank({1.0, -5.0, 1.0}), 2.0, 1e-12);  // negatives clipped
  // Two weights p, 1-p: exp(H(p)).
  const double p = 0.2;
  check_close(effective_rank({p, 1 - p}), std::exp(-p * std::log(p) - (1 - p) * std::log(1 - p)),
              1e-12);
}

TEST_CASE("basis_gram equals basis·basisᵀ with both triangles", "[diversity]") {
  std::mt19937 rng(1);
  const RowMatrixF basis = integer_rows(37, 53, rng);
  const MatrixD gram = basis_gram(basis);
  const MatrixD expected = basis.cast<double>() * basis.cast<double>().transpose();
  CHECK(gram == expected);  // small integers: exact in float32
  CHECK(basis_gram(RowMatrixF(0, 5)).size() == 0);
}

TEST_CASE("orthogonal heads have erank H and centred erank H-1", "[diversity]") {
  const Index heads = 8, k = 2, d = heads * k + 3;
  Heads left, right;
  for (Index h = 0; h < heads; ++h) {
    MatrixD l = MatrixD::Zero(d, k), r = MatrixD::Zero(d, k);
    l.middleRows(h * k, k) = MatrixD::Identity(k, k) * (1.0 + static_cast<double>(h));
    r.middleRows(h * k, k) = MatrixD::Identity(k, k);
    left.push_back(l);
    right.push_back(r);
  }
  const LayerMetrics m = analyze_layer(factors_of(left, right));
  CHECK(m.heads == heads);
  check_close(m.erank, heads, 1e-12);
  check_close(m.erank_centered, heads - 1, 1e-12);
  check_close(m.erank_pct, 100.0, 1e-12);
  check_close(m.erank_centered_pct, 100.0 * (heads - 1) / heads, 1e-12);
  CHECK(m.mean_similarity == 0.0);
  // J has H-1 unit eigenvalues: 90 % needs ceil(0.9·(H-1)) of them.
  CHECK(m.pcs_90 == static_cast<int>(std::ceil(0.9 * (heads - 1))));
  CHECK(m.zero_heads.empty());
  for (Index h = 0; h < heads; ++h) {
    check_close(m.head_erank[h], k, 1e-12);  // σ all equal
    check_close(m.head_norm[h], (1.0 + static_cast<double>(h)) * std::sqrt(double(k)), 1e-12);
  }
}

TEST_CASE("identical heads are exactly fully redundant", "[diversity]") {
  std::mt19937 rng(2);
  const Index heads = 6, k = 4, d = 20;
  HeadFactors f;
  f.left.basis = uniform_rows(k, d, rng);
  f.right.basis = uniform_rows(k, d, rng);
  f.left.head_cols = f.right.head_cols = k;
  for (Index h = 0; h < heads; ++h) {
    f.left.heads.push_back({CoeffBlock::identity(0, k)});
    f.right.heads.push_back({CoeffBlock::identity(0, k)});
  }
  for (bool symmetric : {false, true}) {
    f.symmetric = symmetric;  // symmetric: the MQA `k` representation
    const LayerMetrics m = analyze_layer(f);
    CHECK(m.erank == 1.0);
    CHECK(m.erank_centered == 1.0);
    CHECK(m.mean_similarity == 1.0);
    CHECK(m.pcs_90 == 1);
    CHECK(m.erank_pct == 100.0 / heads);
    for (double value : m.eigenvalues_centered) CHECK(value == 0.0);
  }
}

TEST_CASE("rank-one heads have head_erank 1", "[diversity]") {
  std::mt19937 rng(3);
  const Index k = 5, d = 12;
  // L_h = u vᵀ with integer entries: the float32 Gram is exact, so the rank is exactly one.
  const RowMatrixF u = integer_rows(1, d, rng), v = integer_rows(1, k, rng);
  HeadFactors f;
  f.left.basis = u;
  f.left.head_cols = k;
  f.left.heads.push_back({CoeffBlock::dense(0, 0, v.transpose())});
  f.right.basis = integer_rows(k, d, rng);
  f.right.head_cols = k;
  f.right.heads.push_back({CoeffBlock::identity(0, k)});
  const LayerMetrics m = analyze_layer(f);
  REQUIRE(m.head_norm[0] > 0);
  CHECK(m.head_erank[0] == 1.0);
  f.symmetric = true;
  CHECK(analyze_layer(f).head_erank[0] == 1.0);
}

TEST_CASE("similarity_metrics of a given S", "[diversity]") {
  // Two blocks of identical heads: S = blockdiag(ones(2), ones(3)) → eigenvalues 3, 2.
  MatrixD s = MatrixD::Zero(5, 5);
  s.topLeftCorner(2, 2).setOnes();
  s.bottomRightCorner(3, 3).setOnes();
  const LayerMetrics m = similarity_metrics(s);
  const double expected = effective_rank({3.0, 2.0});
  check_close(m.erank, expected, 1e-12);
  CHECK(m.eigenvalues[2] == 0.0);
  check_close(m.mean_similarity, (2.0 + 6.0) / 20.0, 1e-12);
  CHECK(m.pcs_90 == 1);  // J S J has rank one
  check_close(m.erank_centered, 1.0, 1e-9);

  const LayerMetrics one = similarity_metrics(MatrixD::Ones(1, 1));
  CHECK(one.erank == 1.0);
  CHECK(one.erank_centered == 1.0);
  CHECK(one.mean_similarity == 1.0);
  const LayerMetrics none = similarity_metrics(MatrixD(0, 0));
  CHECK(none.heads == 0);
  CHECK(none.erank == 0.0);
  CHECK(none.pcs_90 == 0);
}

TEST_CASE("metrics are invariant under the per-head gauge", "[diversity]") {
  std::mt19937 rng(4);
  const Index heads = 5, d = 16, k = 4;
  const Heads left = random_heads(heads, d, k, rng), right = random_heads(heads, d, k, rng);
  Heads left_g, right_g;
  std::normal_distribution<double> normal;
  for (Index h = 0; h < heads; ++h) {
    MatrixD g = MatrixD::Identity(k, k);
    for (Index i = 0; i < g.size(); ++i) g.data()[i] += 0.4 * normal(rng);
    left_g.push_back(left[h] * g);
    right_g.push_back(right[h] * g.inverse().transpose());
  }
  const LayerMetrics a = analyze_layer(factors_of(left, right));
  const LayerMetrics b = analyze_layer(factors_of(left_g, right_g));
  check_same_metrics(a, b, 1e-5);
  for (Index h = 0; h < heads; ++h) {
    check_close(a.head_norm[h], b.head_norm[h], 1e-5);
    check_close(a.head_erank[h], b.head_erank[h], 1e-4);
  }
  CHECK(a.similarity.isApprox(b.similarity, 1e-5));
}

TEST_CASE("permuting heads permutes S and keeps the spectrum", "[diversity]") {
  std::mt19937 rng(5);
  const Index heads = 7, d = 24, k = 3;
  const HeadFactors f = factors_of(random_heads(heads, d, k, rng), random_heads(heads, d, k, rng));
  std::vector<int> perm(heads);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  HeadFactors g = f;  // same bases, heads pointing at permuted rows
  for (Index h = 0; h < heads; ++h) {
    g.left.heads[h] = f.left.heads[perm[h]];
    g.right.heads[h] = f.right.heads[perm[h]];
  }
  const LayerMetrics a = analyze_layer(f), b = analyze_layer(g);
  check_same_metrics(a, b, 1e-12);
  for (Index i = 0; i < heads; ++i) {
    CHECK(b.head_erank[i] == a.head_erank[perm[i]]);
    for (Index j = 0; j < heads; ++j) CHECK(b.similarity(i, j) == a.similarity(perm[i], perm[j]));
  }
}

TEST_CASE("shared KV rows equal explicitly duplicated rows", "[diversity]") {
  std::mt19937 rng(6);
  const Index heads = 8, d = 32, k = 4;
  for (Index kv_heads : {Index(1), Index(2), Index(4)}) {
    const Heads q = random_heads(heads, d, k, rng);
    const Heads kv = random_heads(kv_heads, d, k, rng);
    HeadFactors shared;
    shared.left = side_of(q);
    shared.right = side_of(kv);
    shared.right.heads.clear();
    Heads duplicated;
    for (Index h = 0; h < heads; ++h) {
      const Index group = h / (heads / kv_heads);
      shared.right.heads.push_back({CoeffBlock::identity(group * k, k)});
      duplicated.push_back(kv[group]);
    }
    const LayerMetrics a = analyze_layer(shared);
    const LayerMetrics b = analyze_layer(factors_of(q, duplicated));
    check_same_metrics(a, b, 1e-5);
    // The `k` representation: at most kv_heads distinct heads, MQA exactly fully redundant.
    shared.symmetric = true;
    shared.left = shared.right;
    const LayerMetrics k_repr = analyze_layer(shared);
    CHECK(k_repr.erank <= static_cast<double>(kv_heads) + 1e-9);
    if (kv_heads == 1) CHECK(k_repr.erank == 1.0);
    if (kv_heads == 1) CHECK(k_repr.erank_centered == 1.0);
  }
}

TEST_CASE("plain slices read from the Gram's upper triangle equal the same heads split in two",
          "[diversity]") {
  // Plain-slice heads are read from G's upper triangle alone: blocks above the diagonal as they
  // are, below it transposed, on or across it element by element. Rows out of order, shared and
  // half-overlapping put pairs in every one of those places, on both sides, differently. The same
  // heads as two half-width identity blocks take the general path over the mirrored G.
  std::mt19937 rng(21);
  const Index k = 4, d = 24;
  auto side_with_rows = [&](const std::vector<Index>& rows, bool split) {
    FactorSide side;
    side.head_cols = k;
    side.basis = uniform_rows(4 * k, d, rng);
    for (Index row : rows) {
      if (split) {
        side.heads.push_back(
            {CoeffBlock::identity(row, k / 2), CoeffBlock::identity(row + k / 2, k / 2, k / 2)});
      } else {
        side.heads.push_back({CoeffBlock::identity(row, k)});
      }
    }
    return side;
  };
  const std::vector<Index> left_rows{3 * k, 0, k, k / 2, 2 * k, 0, 3 * k - 1};
  const std::vector<Index> right_rows{0, 3 * k, k / 2, k, k, 2 * k, 1};
  HeadFactors plain, split;
  plain.left = side_with_rows(left_rows, false);
  plain.right = side_with_rows(right_rows, false);
  split.left = plain.left;
  split.right = plain.right;
  split.left.heads = side_with_rows(left_rows, true).heads;
  split.right.heads = side_with_rows(right_rows, true).heads;
  const LayerMetrics a = analyze_layer(plain);
  const LayerMetrics b = analyze_layer(split);
  check_same_metrics(a, b, 1e-12);
  REQUIRE(a.similarity.rows() == b.similarity.rows());
  CHECK((a.similarity - b.similarity).cwiseAbs().maxCoeff() <= 1e-12);
  for (size_t h = 0; h < left_rows.size(); ++h) {
    check_close(a.head_norm[h], b.head_norm[h], 1e-12);
    check_close(a.head_erank[h], b.head_erank[h], 1e-9);
  }
  check_against_reference(
      a, reference_metrics(explicit_heads(plain.left), explicit_heads(plain.right)));
  // The symmetric (`k`/`v`) representation reads one side the same way.
  plain.symmetric = split.symmetric = true;
  check_same_metrics(analyze_layer(plain), analyze_layer(split), 1e-12);
}

TEST_CASE("zero heads are listed and left out of S", "[diversity]") {
  std::mt19937 rng(7);
  const Index heads = 6, d = 20, k = 3;
  Heads left = random_heads(heads, d, k, rng), right = random_heads(heads, d, k, rng);
  left[1].setZero();   // pruned query head
  right[4].setZero();  // zero key head: A_4 = 0 too
  const LayerMetrics m = analyze_layer(factors_of(left, right));
  CHECK(m.zero_heads == std::vector<int>{1, 4});
  CHECK(m.heads == heads - 2);
  CHECK(m.head_norm[1] == 0.0);
  CHECK(m.head_erank[4] == 0.0);
  CHECK(m.head_norm.size() == static_cast<size_t>(heads));
  Heads left_kept, right_kept;
  for (Index h : {0, 2, 3, 5}) {
    left_kept.push_back(left[h]);
    right_kept.push_back(right[h]);
  }
  const LayerMetrics kept = analyze_layer(factors_of(left_kept, right_kept));
  check_same_metrics(m, kept, 1e-6);
  check_close(m.erank_pct, 100.0 * kept.erank / 4, 1e-6);

  for (auto& l : left) l.setZero();
  const LayerMetrics all_zero = analyze_layer(factors_of(left, right));
  CHECK(all_zero.heads == 0);
  CHECK(all_zero.erank == 0.0);
  CHECK(all_zero.zero_heads.size() == static_cast<size_t>(heads));
}

TEST_CASE("sparse coefficient blocks equal multiplied-out factors", "[diversity]") {
  std::mt19937 rng(8);
  const HeadFactors f = sparse_factors(5, 30, 5, 2, rng);
  const Heads left = explicit_heads(f.left), right = explicit_heads(f.right);
  const LayerMetrics a = analyze_layer(f);
  // Multiplied out in double, then stored as float32 per-head bases: agreement to float32 noise.
  const LayerMetrics b = analyze_layer(factors_of(left, right));
  check_same_metrics(a, b, 1e-5);
  for (size_t h = 0; h < left.size(); ++h) {
    check_close(a.head_norm[h], b.head_norm[h], 1e-5);
    check_close(a.head_erank[h], b.head_erank[h], 1e-4);
  }
  // The reference sees the exact (double) products.
  check_against_reference(a, reference_metrics(left, right));
}

TEST_CASE("agrees with the numpy reference on random heads", "[diversity]") {
  struct Shape {
    Index heads, d, k;
  };
  std::mt19937 rng(9);
  for (Shape s : {Shape{2, 6, 2}, Shape{6, 40, 8}, Shape{12, 64, 4}, Shape{9, 16, 16}}) {
    INFO("H " << s.heads << " d " << s.d << " k " << s.k);
    Heads left = random_heads(s.heads, s.d, s.k, rng);
    const Heads right = random_heads(s.heads, s.d, s.k, rng);
    // Correlated heads, so that S is not close to the identity.
    for (Index h = 1; h < s.heads; ++h) left[h] = 0.7 * left[0] + 0.5 * left[h];
    for (auto& l : left) l = l.cast<float>().cast<double>();  // what the float32 basis holds
    check_against_reference(analyze_layer(factors_of(left, right)), reference_metrics(left, right));
    // Symmetric representation A_h = L_h L_hᵀ.
    HeadFactors sym;
    sym.left = side_of(left);
    sym.symmetric = true;
    check_against_reference(analyze_layer(sym), reference_metrics(left, left));
  }
}

TEST_CASE("set_compute_threads does not change results", "[diversity]") {
  std::mt19937 rng(10);
  const HeadFactors f = sparse_factors(7, 40, 6, 3, rng);
  set_compute_threads(1);
  const LayerMetrics one = analyze_layer(f);
  set_compute_threads(0);
  const LayerMetrics all = analyze_layer(f);
  check_same_metrics(one, all, 1e-12);
}

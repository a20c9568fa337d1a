// Tests of `kvrank diff` (analysis/diff.hpp, report/diff_report.hpp, plot/diff_heatmap.hpp): the
// per-head similarity against explicit d×d forms built here, its properties (identical → exactly
// 1, gauge invariance, a permutation seen), the pairing and the writers. The numpy cross-check on
// real checkpoints is tests/e2e/test_diff.py.
#include "kvrank/analysis/diff.hpp"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kvrank/metric/compute.hpp"
#include "kvrank/plot/diff_heatmap.hpp"
#include "support/catch.hpp"
#include "support/random_factors.hpp"
#include "support/test_util.hpp"

using namespace kvrank;

namespace {

using test::Heads;
using test::random_heads;

/// Each head its own rows of the basis (the dense layouts).
FactorSide plain_side(const Heads& heads) { return test::side_of(heads); }

/// Heads built from a shared basis by dense coefficients (the latent layouts): L_h = basisᵀ C_h.
FactorSide latent_side(Index count, Index d, Index k, Index m, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  FactorSide side;
  side.head_cols = k;
  side.basis = RowMatrixF::NullaryExpr(m, d, [&]() { return normal(rng); });
  for (Index h = 0; h < count; ++h) {
    RowMatrixF coefficients_t = RowMatrixF::NullaryExpr(k, m, [&]() { return normal(rng); });
    side.heads.push_back({CoeffBlock::dense(0, 0, std::move(coefficients_t))});
  }
  return side;
}

HeadFactors factors_of(FactorSide left, FactorSide right) {
  HeadFactors f;
  f.left = std::move(left);
  f.right = std::move(right);
  return f;
}

/// L_h = basisᵀ C_h, explicitly.
MatrixD explicit_side(const FactorSide& side, std::size_t h) {
  MatrixD l = MatrixD::Zero(side.basis.cols(), side.head_cols);
  for (const CoeffBlock& block : side.heads[h])
    l.middleCols(block.head_col, block.cols()) +=
        side.basis.cast<double>().transpose().middleCols(block.basis_row, block.rows()) *
        block.in_double();
  return l;
}

/// The d × d form A_h = L_h R_hᵀ (L_h L_hᵀ for a symmetric one).
MatrixD explicit_form(const HeadFactors& f, std::size_t h) {
  const MatrixD l = explicit_side(f.left, h);
  return l * (f.symmetric ? l : explicit_side(f.right, h)).transpose();
}

double explicit_cosine(const MatrixD& a, const MatrixD& b) {
  return a.cwiseProduct(b).sum() / (a.norm() * b.norm());
}

void check_against_explicit(const HeadFactors& a, const HeadFactors& b) {
  const std::vector<double> got = head_similarity(a, b);
  REQUIRE(got.size() == static_cast<std::size_t>(a.num_heads()));
  for (std::size_t h = 0; h < got.size(); ++h) {
    const double want = explicit_cosine(explicit_form(a, h), explicit_form(b, h));
    INFO("head " << h << " got " << got[h] << " want " << want);
    CHECK(std::abs(got[h] - want) <= 1e-9);
  }
}

}  // namespace

TEST_CASE("head similarity equals the cosine of the explicit d×d forms", "[diff]") {
  std::mt19937 rng(7);
  const Index heads = 4, d = 12, k = 3;
  SECTION("plain slices") {
    check_against_explicit(factors_of(plain_side(random_heads(heads, d, k, rng)),
                                      plain_side(random_heads(heads, d, k, rng))),
                           factors_of(plain_side(random_heads(heads, d, k, rng)),
                                      plain_side(random_heads(heads, d, k, rng))));
  }
  SECTION("latent heads against plain ones (the cross-Gram of two bases)") {
    check_against_explicit(
        factors_of(latent_side(heads, d, k, 5, rng), latent_side(heads, d, k, 7, rng)),
        factors_of(plain_side(random_heads(heads, d, k, rng)),
                   plain_side(random_heads(heads, d, k, rng))));
  }
  SECTION("symmetric forms (k, v)") {
    HeadFactors a = factors_of(plain_side(random_heads(heads, d, k, rng)), {});
    HeadFactors b = factors_of(latent_side(heads, d, k, 6, rng), {});
    a.symmetric = b.symmetric = true;
    check_against_explicit(a, b);
  }
}

TEST_CASE("a model compared with itself gives similarity exactly 1", "[diff]") {
  std::mt19937 rng(11);
  for (int latent = 0; latent < 2; ++latent) {
    const auto side = [&] {
      return latent ? latent_side(6, 10, 2, 4, rng) : plain_side(random_heads(6, 10, 2, rng));
    };
    const HeadFactors a = factors_of(side(), side());
    const HeadFactors copy = a;
    for (double value : head_similarity(a, copy)) CHECK(value == 1.0);
    // Equal on one side only: an ordinary cosine, not the 1 of equal heads.
    for (const bool keep_left : {true, false}) {
      HeadFactors half = a;
      (keep_left ? half.right : half.left) = side();
      const std::vector<double> similarity = head_similarity(a, half);
      for (std::size_t h = 0; h < similarity.size(); ++h) {
        const double want = explicit_cosine(explicit_form(a, h), explicit_form(half, h));
        CHECK(std::abs(similarity[h] - want) <= 1e-9);
        CHECK(similarity[h] < 0.999);
      }
    }
  }
}

TEST_CASE("head similarity of latent heads has the same bits on one thread and on two", "[diff]") {
  // The stacked bases' product (128 rows over 512 columns) runs over the threads: it once took the
  // BLAS there, whose split of the depth moved the last digits with the thread count.
  std::mt19937 rng(17);
  const HeadFactors a =
      factors_of(latent_side(8, 512, 4, 64, rng), latent_side(8, 512, 4, 64, rng));
  const HeadFactors b =
      factors_of(latent_side(8, 512, 4, 64, rng), latent_side(8, 512, 4, 64, rng));
  set_compute_threads(1);
  const std::vector<double> one = head_similarity(a, b);
  set_compute_threads(2);
  const std::vector<double> two = head_similarity(a, b);
  set_compute_threads(0);
  CHECK(one == two);
  for (std::size_t h = 0; h < one.size(); ++h) {
    CHECK(std::abs(one[h] - explicit_cosine(explicit_form(a, h), explicit_form(b, h))) <= 1e-9);
  }
}

TEST_CASE("head similarity is gauge-invariant and sees a permutation", "[diff]") {
  std::mt19937 rng(3);
  const Index heads = 5, d = 9, k = 3;
  const Heads q = random_heads(heads, d, k, rng);
  const Heads key = random_heads(heads, d, k, rng);
  const HeadFactors a = factors_of(plain_side(q), plain_side(key));
  // W_Q^h M_h, W_K^h M_h⁻ᵀ: every form unchanged.
  Heads q_gauged, key_gauged;
  for (Index h = 0; h < heads; ++h) {
    const MatrixD m = MatrixD::Identity(k, k) + 0.5 * random_heads(1, k, k, rng).front();
    q_gauged.push_back(q[h] * m);
    key_gauged.push_back(key[h] * m.inverse().transpose());
  }
  for (double value : head_similarity(a, factors_of(plain_side(q_gauged), plain_side(key_gauged))))
    CHECK(std::abs(value - 1.0) < 1e-5);
  // Heads 0 and 1 swapped in B: the layer's metrics cannot tell, head_similarity can.
  Heads q_swapped = q, key_swapped = key;
  std::swap(q_swapped[0], q_swapped[1]);
  std::swap(key_swapped[0], key_swapped[1]);
  const HeadFactors b = factors_of(plain_side(q_swapped), plain_side(key_swapped));
  const std::vector<double> similarity = head_similarity(a, b);
  const double cross = explicit_cosine(explicit_form(a, 0), explicit_form(a, 1));
  CHECK(std::abs(similarity[0] - cross) < 1e-9);
  CHECK(std::abs(similarity[1] - cross) < 1e-9);
  CHECK(similarity[0] < 0.9);
  for (std::size_t h = 2; h < similarity.size(); ++h) CHECK(similarity[h] == 1.0);
}

TEST_CASE("head similarity of a zero head is NaN; different shapes are refused", "[diff]") {
  std::mt19937 rng(5);
  Heads q = random_heads(3, 8, 2, rng);
  const Heads key = random_heads(3, 8, 2, rng);
  const HeadFactors a = factors_of(plain_side(q), plain_side(key));
  q[1].setZero();
  const std::vector<double> similarity =
      head_similarity(a, factors_of(plain_side(q), plain_side(key)));
  CHECK(similarity[0] == 1.0);
  CHECK(std::isnan(similarity[1]));
  const HeadFactors fewer =
      factors_of(plain_side(random_heads(2, 8, 2, rng)), plain_side(random_heads(2, 8, 2, rng)));
  CHECK(test::error_message([&] { head_similarity(a, fewer); }) ==
        "cannot compare the heads of the two models: 3 vs 2 heads");
  const HeadFactors wider =
      factors_of(plain_side(random_heads(3, 9, 2, rng)), plain_side(random_heads(3, 9, 2, rng)));
  CHECK(test::error_message([&] { head_similarity(a, wider); }).find("different widths") !=
        std::string::npos);
}

namespace {

ModelReport report_of(const std::string& repr, int heads, std::vector<int> layers) {
  ModelReport model;
  model.label = "m";
  model.family = "llama";
  model.variant = "mha";
  model.repr = repr;
  model.geometry.heads = heads;
  model.geometry.kv_heads = heads;
  model.geometry.head_dim = 4;
  model.geometry.d_model = 16;
  model.geometry.num_layers = static_cast<int>(layers.size());
  for (int layer : layers) {
    model.layers.push_back(similarity_metrics(MatrixD::Identity(heads, heads)));
    model.layers.back().layer = layer;
  }
  return model;
}

}  // namespace

TEST_CASE("diff pairs models by representation and refuses other shapes", "[diff]") {
  const std::vector<SeriesDiff> pairs =
      pair_reports({report_of("qk", 4, {0, 1}), report_of("ov", 4, {0, 1})},
                   {report_of("ov", 4, {0, 1}), report_of("qk", 4, {0, 1})}, "a.json", "b.json");
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[0].a.repr == "qk");
  CHECK(pairs[0].b.repr == "qk");
  CHECK(test::error_message([] {
          pair_reports({report_of("qk", 4, {0, 1})}, {report_of("qk", 8, {0, 1})}, "a", "b");
        }) == "the models differ in geometry: heads 4 vs 8 (diff compares models of one shape)");
  CHECK(test::error_message([] {
          pair_reports({report_of("qk", 4, {0, 1})}, {report_of("ov", 4, {0, 1})}, "a", "b");
        }).find("b: has no model of qk") == 0);
  CHECK(test::error_message([] {
          pair_reports({report_of("qk", 4, {0, 1}), report_of("qk", 4, {0, 1})},
                       {report_of("qk", 4, {0, 1})}, "a", "b");
        }).find("diff compares one model with one") != std::string::npos);
}

TEST_CASE("diff lists the heads that moved most first and writes every format", "[diff]") {
  DiffResult diff;
  diff.heads_compared = true;
  diff.series = pair_reports({report_of("qk", 3, {0, 1})}, {report_of("qk", 3, {0, 1})}, "a", "b");
  diff.series[0].head_similarity = {{1.0, 0.25, std::nan("")}, {0.5, 0.9, -0.1}};
  const std::vector<MovedHead> moved = heads_by_movement(diff);
  REQUIRE(moved.size() == 5);  // the zero head left out
  CHECK(moved[0].layer == 1);
  CHECK(moved[0].head == 2);
  CHECK(moved[1].head == 1);
  CHECK(moved[1].layer == 0);

  const nlohmann::json json = diff_to_json(diff, 2);
  CHECK(json["kind"] == "diff");
  CHECK(json["moved_heads"].size() == 2);
  CHECK(json["series"][0]["layers"][0]["head_similarity"][2].is_null());
  CHECK(json["series"][0]["layers"][1]["min_head_similarity"] == -0.1);
  CHECK(json["series"][0]["layers"][0]["change"]["erank"] == 0.0);

  const std::string csv = diff_to_csv(diff);
  CHECK(csv.find("repr,attention,layer,erank_a,erank_b,erank_change") == 0);
  CHECK(csv.find("head_similarity_2\n") != std::string::npos);
  const std::string table = diff_to_table(diff, 3);
  CHECK(table.find("heads that moved most") != std::string::npos);
  CHECK(table.find("(head 1)") != std::string::npos);

  const std::string svg = plot_head_similarity_svg(diff, "");
  std::size_t cells = 0;
  for (std::size_t at = svg.find("class=\"cell\""); at != std::string::npos;
       at = svg.find("class=\"cell\"", at + 1))
    ++cells;
  CHECK(cells == 6);
  diff.heads_compared = false;
  CHECK(diff_to_table(diff, 3).find("per-layer metric changes only") != std::string::npos);
  CHECK(test::error_message([&] { plot_head_similarity_svg(diff, ""); }).find("--figure") == 0);
}

namespace {

/// The fill of the cell of `layer`, `head` in a diff figure (its <title> names them).
std::string cell_fill(const std::string& svg, int layer, int head) {
  const std::string title =
      "<title>layer " + std::to_string(layer) + " head " + std::to_string(head) + ":";
  const std::size_t at = svg.find(title);
  if (at == std::string::npos) return "";
  const std::size_t fill = svg.rfind("fill=\"", at);
  return svg.substr(fill + 6, 7);
}

}  // namespace

TEST_CASE("diff's figure colours a cosine as the similarity heatmaps do", "[diff]") {
  DiffResult diff;
  diff.heads_compared = true;
  diff.series = pair_reports({report_of("qk", 3, {0, 1})}, {report_of("qk", 3, {0, 1})}, "a", "b");
  diff.series[0].head_similarity = {{1.0, 0.0, -0.5}, {0.5, 0.9, -1.0}};

  // By default ColorBrewer's RdBu over [-1, 1] (its end and middle colours, as ColorBrewer lists
  // them): a negative cosine is blue, distinct from 0's white, and nothing is clipped.
  const std::string svg = plot_head_similarity_svg(diff, PlotOptions{});
  CHECK(svg.find("data-colour-map=\"rdbu\"") != std::string::npos);
  CHECK(cell_fill(svg, 0, 0) == "#67001f");
  CHECK(cell_fill(svg, 0, 1) == "#f7f7f7");
  CHECK(cell_fill(svg, 1, 2) == "#053061");
  CHECK(cell_fill(svg, 0, 2) != cell_fill(svg, 0, 1));
  CHECK(svg.find("≤") == std::string::npos);
  CHECK(svg.find(">-1.0<") != std::string::npos);  // the colour bar's lowest tick

  // viridis over [0, 1], as `plot --heatmap --colour-map viridis`: a negative cosine takes 0's
  // colour, and the colour bar's lowest tick says that it stands for everything below.
  PlotOptions viridis;
  viridis.colour_map = ColourMap::viridis;
  viridis.title = "moved";
  const std::string clipped = plot_head_similarity_svg(diff, viridis);
  CHECK(cell_fill(clipped, 0, 1) == "#440154");  // viridis(0)
  CHECK(cell_fill(clipped, 0, 2) == cell_fill(clipped, 0, 1));
  CHECK(clipped.find("≤ 0.00") != std::string::npos);
  CHECK(clipped.find(">moved<") != std::string::npos);
  diff.series[0].head_similarity = {{1.0, 0.0, 0.5}, {0.5, 0.9, 0.25}};
  CHECK(plot_head_similarity_svg(diff, viridis).find("≤") == std::string::npos);
}

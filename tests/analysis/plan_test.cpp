// Tests of the planner (src/analysis/plan_*.cpp): the alignment's closed forms against explicit
// matrices and searches, gauge invariance, the partition search against enumeration, and the
// bad inputs. The comparison with the numpy reference (scripts/plan_reference.py) on random and
// real layers is tests/e2e/test_plan.py.
#include "kvrank/analysis/plan.hpp"

#include <cmath>
#include <functional>
#include <numbers>
#include <random>

#include "analysis/plan_detail.hpp"
#include "kvrank/layout/model_type.hpp"
#include "kvrank/metric/diversity.hpp"
#include "metric/blas.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

using namespace kvrank;
using detail::align_group;

namespace {

MatrixD random_matrix(Index rows, Index cols, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  MatrixD m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

MatrixD random_orthogonal(Index d, std::mt19937& rng) {
  Eigen::HouseholderQR<MatrixD> qr(random_matrix(d, d, rng));
  return qr.householderQ();
}

MatrixD plane_rotation(int d, const KeyGauge& gauge, std::mt19937& rng) {
  std::uniform_real_distribution<double> angle(0, 2 * std::numbers::pi);
  MatrixD r = MatrixD::Identity(d, d);
  for (const auto& [a, b] : gauge.planes) {
    const double t = angle(rng);
    r(a, a) = r(b, b) = std::cos(t);
    r(a, b) = -std::sin(t);
    r(b, a) = std::sin(t);
  }
  return r;
}

/// Stacked rows of the heads and their Gram.
MatrixD gram_of(const std::vector<MatrixD>& heads) {
  MatrixD stacked(Index(heads.size()) * heads[0].rows(), heads[0].cols());
  for (std::size_t h = 0; h < heads.size(); ++h)
    stacked.middleRows(Index(h) * heads[0].rows(), heads[0].rows()) = heads[h];
  return stacked * stacked.transpose();
}

double explicit_residual(const std::vector<MatrixD>& heads, const std::vector<MatrixD>& maps) {
  MatrixD mean = MatrixD::Zero(heads[0].rows(), heads[0].cols());
  for (std::size_t i = 0; i < heads.size(); ++i) mean += maps[i] * heads[i];
  mean /= static_cast<double>(heads.size());
  double sum = 0;
  for (std::size_t i = 0; i < heads.size(); ++i) sum += (maps[i] * heads[i] - mean).squaredNorm();
  return sum;
}

/// A layer's key, value and query heads, each d × width, drawn head by head.
struct Heads {
  std::vector<MatrixD> k, v, q;
};

Heads random_heads(int kv, int d, int width, std::mt19937& rng) {
  Heads heads;
  for (int h = 0; h < kv; ++h) {
    heads.k.push_back(random_matrix(d, width, rng));
    heads.v.push_back(random_matrix(d, width, rng));
    heads.q.push_back(random_matrix(d, width, rng));
  }
  return heads;
}

/// The planner's input for `heads`: one query head per key/value head.
PlanLayerGrams layer_grams(const Heads& heads) {
  PlanLayerGrams g;
  g.head_dim = static_cast<int>(heads.k.front().rows());
  for (int h = 0; h < static_cast<int>(heads.k.size()); ++h) g.kv_of_head.push_back(h);
  g.keys = gram_of(heads.k);
  g.values = gram_of(heads.v);
  g.queries = gram_of(heads.q);
  return g;
}

PlanLayerGrams random_layer(int kv, int d, int width, std::mt19937& rng,
                            std::vector<MatrixD>* keys = nullptr) {
  const Heads heads = random_heads(kv, d, width, rng);
  if (keys) *keys = heads.k;
  return layer_grams(heads);
}

}  // namespace

TEST_CASE("plan: a pair's orthogonal alignment is the nuclear-norm closed form", "[plan]") {
  std::mt19937 rng(1);
  const std::vector<MatrixD> heads{random_matrix(6, 20, rng), random_matrix(6, 20, rng)};
  const MatrixD gram = gram_of(heads);
  const detail::GroupFit fit = align_group(gram, 6, {0, 1}, KeyGauge{});
  const Eigen::JacobiSVD<MatrixD> svd(heads[1] * heads[0].transpose());
  const double closed =
      (heads[0].squaredNorm() + heads[1].squaredNorm() - 2 * svd.singularValues().sum()) / 2;
  CHECK(fit.residual == Approx(closed).epsilon(1e-10));
  CHECK(fit.residual == Approx(explicit_residual(heads, fit.rotations)).epsilon(1e-10));
  for (int trial = 0; trial < 50; ++trial)  // no orthogonal map does better
    CHECK(explicit_residual(heads, {MatrixD::Identity(6, 6), random_orthogonal(6, rng)}) >=
          fit.residual - 1e-9);
}

TEST_CASE("plan: RoPE-plane alignment commutes with RoPE and beats a grid of angles", "[plan]") {
  std::mt19937 rng(2);
  const RopeLayout rope{RopeConvention::rotate_half, 4};
  const KeyGauge gauge = key_gauge(rope, 4, true);
  REQUIRE(gauge.planes == std::vector<std::pair<int, int>>{{0, 2}, {1, 3}});
  const std::vector<MatrixD> heads{random_matrix(4, 12, rng), random_matrix(4, 12, rng)};
  const detail::GroupFit fit = align_group(gram_of(heads), 4, {0, 1}, gauge);
  const MatrixD rope_step = plane_rotation(4, gauge, rng);
  CHECK((fit.rotations[1] * rope_step - rope_step * fit.rotations[1]).norm() < 1e-12);
  CHECK((fit.rotations[1] * fit.rotations[1].transpose() - MatrixD::Identity(4, 4)).norm() < 1e-12);
  CHECK(fit.rotations[1].determinant() == Approx(1.0));
  double best_grid = INFINITY;
  for (int a = 0; a < 90; ++a)
    for (int b = 0; b < 90; ++b) {
      MatrixD r = MatrixD::Identity(4, 4);
      const double s = a * std::numbers::pi / 45, t = b * std::numbers::pi / 45;
      r(0, 0) = r(2, 2) = std::cos(s), r(0, 2) = -std::sin(s), r(2, 0) = std::sin(s);
      r(1, 1) = r(3, 3) = std::cos(t), r(1, 3) = -std::sin(t), r(3, 1) = std::sin(t);
      best_grid = std::min(best_grid, explicit_residual(heads, {MatrixD::Identity(4, 4), r}));
    }
  CHECK(fit.residual <= best_grid + 1e-9);
  CHECK(fit.residual > best_grid - 0.01 * best_grid);  // the grid is 4° fine
}

TEST_CASE("plan: partial rotary and interleaved planes", "[plan]") {
  const KeyGauge half = key_gauge({RopeConvention::rotate_half, 4}, 8, true);
  CHECK(half.planes == std::vector<std::pair<int, int>>{{0, 2}, {1, 3}});
  CHECK(half.free_entries == std::vector<int>{4, 5, 6, 7});
  const KeyGauge pairs = key_gauge({RopeConvention::interleaved, 8}, 8, true);
  CHECK(pairs.planes == std::vector<std::pair<int, int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(key_gauge_name(half, {RopeConvention::rotate_half, 4}, 8) ==
        "rope_planes(rotate_half, 4 of 8)");
  CHECK(key_gauge({RopeConvention::none, 0}, 8, true).kind == KeyGauge::Kind::orthogonal);
  CHECK(key_gauge({RopeConvention::rotate_half, 8}, 8, false).kind == KeyGauge::Kind::none);
  CHECK_THROWS_WITH(parse_rope_convention("yarn"),
                    "--rope: expected none, rotate_half or interleaved, found \"yarn\"");
}

TEST_CASE("plan: generalised Procrustes never does worse than aligning to the first", "[plan]") {
  std::mt19937 rng(3);
  std::vector<MatrixD> heads;
  for (int h = 0; h < 4; ++h) heads.push_back(random_matrix(5, 16, rng));
  const MatrixD gram = gram_of(heads);
  const detail::GroupFit fit = align_group(gram, 5, {0, 1, 2, 3}, KeyGauge{});
  std::vector<MatrixD> first{MatrixD::Identity(5, 5)};
  for (int h = 1; h < 4; ++h)
    first.push_back(detail::best_transform(heads[h] * heads[0].transpose(), KeyGauge{}));
  CHECK(fit.residual == Approx(explicit_residual(heads, fit.rotations)).epsilon(1e-9));
  CHECK(fit.residual <= explicit_residual(heads, first) + 1e-9);
}

/// Generalised Procrustes on whole d_h × d_h matrices, as plan_align.cpp first did it: the start
/// aligned to the first member, then sweeps of best transforms against the others' pooled rows
/// until one raises the energy by less than `tolerance` of Σ‖X_i‖².
std::vector<MatrixD> dense_sweeps(const std::vector<MatrixD>& heads, const KeyGauge& gauge,
                                  double tolerance) {
  const std::size_t n = heads.size();
  const Index d = heads[0].rows();
  double own = 0;
  for (const MatrixD& x : heads) own += x.squaredNorm();
  std::vector<MatrixD> maps{MatrixD::Identity(d, d)};
  for (std::size_t i = 1; i < n; ++i)
    maps.push_back(detail::best_transform(heads[i] * heads[0].transpose(), gauge));
  double residual = explicit_residual(heads, maps);
  for (int sweep = 0; sweep < 50; ++sweep) {
    std::vector<MatrixD> next = maps;
    for (std::size_t i = 0; i < n; ++i) {
      MatrixD others = MatrixD::Zero(d, heads[0].cols());
      for (std::size_t j = 0; j < n; ++j)
        if (j != i) others += next[j] * heads[j];
      next[i] = detail::best_transform(heads[i] * others.transpose(), gauge);
    }
    const double next_residual = explicit_residual(heads, next);
    if (!(next_residual < residual - tolerance * own)) break;
    maps = std::move(next);
    residual = next_residual;
  }
  return maps;
}

TEST_CASE("plan: RoPE-plane sweeps on 2 x 2 blocks are the sweeps on whole matrices", "[plan]") {
  std::mt19937 rng(11);
  for (const RopeLayout rope :
       {RopeLayout{RopeConvention::rotate_half, 6}, RopeLayout{RopeConvention::interleaved, 8}}) {
    const KeyGauge gauge = key_gauge(rope, 8, true);  // 3 planes and 2 free entries, or 4 planes
    std::vector<MatrixD> heads;
    for (int h = 0; h < 4; ++h) heads.push_back(random_matrix(8, 20, rng));
    const detail::GroupFit fit = align_group(gram_of(heads), 8, {0, 1, 2, 3}, gauge);
    const std::vector<MatrixD> want = dense_sweeps(heads, gauge, 1e-9);
    for (int h = 0; h < 4; ++h) CHECK((fit.rotations[h] - want[h]).cwiseAbs().maxCoeff() < 1e-6);
    CHECK(fit.residual == Approx(explicit_residual(heads, want)).epsilon(1e-9));
    CHECK(fit.residual == Approx(explicit_residual(heads, fit.rotations)).epsilon(1e-10));
    const MatrixD rope_step = plane_rotation(8, gauge, rng);
    for (const MatrixD& r : fit.rotations) {
      CHECK((r * r.transpose() - MatrixD::Identity(8, 8)).norm() < 1e-12);
      CHECK((r * rope_step - rope_step * r).norm() < 1e-12);
    }
  }
}

TEST_CASE("plan: partition counts and the exact search against enumeration", "[plan]") {
  CHECK(equal_partition_count(8, 2) == 105);
  CHECK(equal_partition_count(8, 4) == 35);
  CHECK(equal_partition_count(16, 2) == 2027025);
  CHECK(equal_partition_count(8, 1) == 1);
  CHECK(equal_partition_count(64, 2) == (1LL << 62));  // saturates
  std::mt19937 rng(4);
  const PlanLayerGrams g = random_layer(8, 4, 10, rng);
  const detail::GroupCost cost = [&](const std::vector<int>& group) {
    return align_group(g.keys, 4, group, KeyGauge{}).residual;
  };
  bool exact = false;
  const detail::Partition best = detail::best_partition(8, 2, cost, 1000, 0, 0, exact);
  CHECK(exact);
  double best_cost = 0;
  for (const auto& group : best) best_cost += cost(group);
  // Every pairing, listed by hand-rolled recursion: none is cheaper.
  std::function<void(std::vector<int>, double)> all = [&](std::vector<int> left, double sum) {
    if (left.empty()) {
      CHECK(sum >= best_cost - 1e-12);
      return;
    }
    for (std::size_t j = 1; j < left.size(); ++j) {
      std::vector<int> rest;
      for (std::size_t x = 1; x < left.size(); ++x)
        if (x != j) rest.push_back(left[x]);
      all(rest, sum + cost({left[0], left[j]}));
    }
  };
  all({0, 1, 2, 3, 4, 5, 6, 7}, 0);
  bool local_exact = true;
  const detail::Partition local = detail::best_partition(8, 2, cost, 0, 8, 1, local_exact);
  CHECK_FALSE(local_exact);
  double local_cost = 0;
  for (const auto& group : local) local_cost += cost(group);
  CHECK(local_cost >= best_cost - 1e-12);
  CHECK(local_cost <= best_cost * 1.05);
}

TEST_CASE("plan: errors and groups are invariant under the model's gauge", "[plan]") {
  std::mt19937 rng(5);
  const int kv = 6, d = 4, width = 12;
  auto [k, v, q] = random_heads(kv, d, width, rng);
  const RopeLayout rope{RopeConvention::rotate_half, d};
  const KeyGauge gauge = key_gauge(rope, d, true);
  auto layer_of = [](const std::vector<MatrixD>& kk, const std::vector<MatrixD>& vv,
                     const std::vector<MatrixD>& qq) {
    return layer_grams({kk, vv, qq});
  };
  PlanOptions options;
  options.kv_heads_after = 3;
  options.objective = PlanObjective::merge;
  options.refit = false;  // the aligned mean-pool (the refit's test is below)
  const PlanLayer before = plan_layer(layer_of(k, v, q), gauge, true, options);
  for (int h = 0; h < kv; ++h) {  // the gauge: RoPE planes on Q and K, any orthogonal map on V
    const MatrixD r = plane_rotation(d, gauge, rng);
    k[h] = r * k[h], q[h] = r * q[h], v[h] = random_orthogonal(d, rng) * v[h];
  }
  const PlanLayer after = plan_layer(layer_of(k, v, q), gauge, true, options);
  CHECK(after.plan.groups == before.plan.groups);
  CHECK(after.plan.key_error == Approx(before.plan.key_error).epsilon(1e-9));
  CHECK(after.plan.value_error == Approx(before.plan.value_error).epsilon(1e-9));
  CHECK(after.plan.qk_error == Approx(before.plan.qk_error).epsilon(1e-9));
  CHECK(after.erank_qk_before == Approx(before.erank_qk_before).epsilon(1e-9));
  CHECK(after.plan.erank_qk_after == Approx(before.plan.erank_qk_after).epsilon(1e-9));
  CHECK(after.contiguous.key_error == Approx(before.contiguous.key_error).epsilon(1e-9));
  CHECK(before.plan.key_error + before.plan.value_error <=
        before.contiguous.key_error + before.contiguous.value_error + 1e-12);
}

TEST_CASE("plan: identical heads merge without error", "[plan]") {
  std::mt19937 rng(6);
  std::vector<MatrixD> heads;
  const MatrixD one = random_matrix(4, 9, rng);
  for (int h = 0; h < 4; ++h) heads.push_back(random_orthogonal(4, rng) * one);
  PlanLayerGrams g;
  g.head_dim = 4;
  g.kv_of_head = {0, 1, 2, 3};
  g.keys = g.values = g.queries = gram_of(heads);
  PlanOptions options;
  options.kv_heads_after = 1;
  options.refit = false;  // the aligned mean-pool: these Grams have no outputs
  const PlanLayer layer = plan_layer(g, KeyGauge{}, true, options);
  CHECK(layer.plan.key_error < 1e-10);
  CHECK(layer.plan.value_error < 1e-10);
  CHECK(layer.plan.erank_k_after == 1.0);
}

TEST_CASE("plan: bad inputs are one-line errors", "[plan]") {
  const Checkpoint mha = Checkpoint::open(test::tiny_model("mha"));
  PlanOptions options;
  options.kv_heads_after = 3;
  CHECK_THROWS_WITH(plan_checkpoint(mha, {}, options),
                    Catch::Contains("--kv-heads 3 must divide the model's 8 key/value heads"));
  options.kv_heads_after = 4;
  const Checkpoint mla = Checkpoint::open(test::tiny_model("mla"));
  CHECK_THROWS_WITH(plan_checkpoint(mla, {}, options), Catch::Contains("shared latent"));
  CHECK_THROWS_WITH(parse_plan_objective("loss"),
                    "--objective: expected merge or qk, found \"loss\"");
  options.refit = true;
  options.align = false;
  CHECK_THROWS_WITH(plan_checkpoint(mha, {}, options), Catch::Contains("--gauge none"));
}

TEST_CASE("plan: the refit is the default, except with --gauge none", "[plan]") {
  const Checkpoint mha = Checkpoint::open(test::tiny_model("mha"));
  PlanOptions options;
  options.kv_heads_after = 4;
  options.layers = "1";
  CHECK(plan_refits(options));
  const PlanModel by_default = plan_checkpoint(mha, {}, options);
  CHECK(by_default.refit);
  CHECK_FALSE(by_default.layers[0].key_pool.empty());
  options.refit = false;
  const PlanModel mean_pool = plan_checkpoint(mha, {}, options);
  CHECK_FALSE(mean_pool.refit);
  CHECK(mean_pool.layers[0].key_pool.empty());
  CHECK(by_default.layers[0].plan.qk_error < mean_pool.layers[0].plan.qk_error);
  options.refit.reset();
  options.align = false;  // --gauge none: the plain mean-pool
  CHECK_FALSE(plan_refits(options));
  CHECK_FALSE(plan_checkpoint(mha, {}, options).refit);
}

TEST_CASE("plan: erank_qk_before is analyze's erank on the real model", "[plan]") {
  const Checkpoint mha = Checkpoint::open(test::tiny_model("mha"));
  const ModelLayout layout = detect_layout(mha);
  PlanOptions options;
  options.kv_heads_after = 4;
  options.layers = "1";
  const PlanModel plan = plan_checkpoint(mha, {}, options);
  REQUIRE(plan.layers.size() == 1);
  const LayerMetrics metrics = analyze_layer(layer_factors(mha, layout, 1, Repr::qk));
  CHECK(plan.layers[0].erank_qk_before == Approx(metrics.erank).epsilon(1e-6));
  CHECK(plan.key_gauge == "rope_planes(rotate_half)");
  CHECK(plan.layers[0].exact);
}

TEST_CASE("plan: beyond enumeration, groups of four are searched on the pairwise proxy", "[plan]") {
  std::mt19937 rng(7);
  const PlanLayerGrams g = random_layer(8, 4, 10, rng);
  PlanOptions options;
  options.kv_heads_after = 2;
  options.objective = PlanObjective::merge;
  options.refit = false;  // the aligned mean-pool: these Grams have no outputs
  const PlanLayer exact = plan_layer(g, KeyGauge{}, true, options);
  options.exact_limit = 0;
  const PlanLayer searched = plan_layer(g, KeyGauge{}, true, options);
  CHECK(exact.exact);
  CHECK_FALSE(searched.exact);
  const auto objective = [](const GroupingScore& s) { return s.key_error + s.value_error; };
  CHECK(objective(exact.plan) <= objective(searched.plan) + 1e-12);
  CHECK(objective(searched.plan) <= objective(searched.random_median));
  CHECK(searched.plan.groups.size() == 2);
}

TEST_CASE("plan: every model type has a RoPE convention or a reason to need --rope", "[plan]") {
  for (const ModelTypeInfo& type : model_types()) {
    const bool convention = model_type_rope(type.name).has_value();
    const bool reason = !unplanned_reason(type.name).empty();
    INFO("model_type " << type.name << ": add it to plan_rope.cpp's kRopeRows or kUnplanned");
    CHECK(convention != reason);
  }
  CHECK(model_type_rope("llama") == RopeConvention::rotate_half);
  CHECK(model_type_rope("cohere") == RopeConvention::interleaved);
  CHECK(model_type_rope("gpt2") == RopeConvention::none);
  CHECK(unplanned_reason("falcon") == "ALiBi or RoPE, by its config");
  CHECK_FALSE(model_type_rope("not_a_model_type"));
}

TEST_CASE("plan: a layer large enough for threads gives the numbers of one thread", "[plan]") {
  // 34 partitions of 8 heads of 32: past the size where plan_layer fits partitions on threads,
  // each into its own slot, and with RoPE planes (two-nonzero rows) and dense value maps.
  std::mt19937 rng(11);
  const int kv = 8, d = 32, width = 64;
  const PlanLayerGrams g = random_layer(kv, d, width, rng);
  const KeyGauge gauge = key_gauge({RopeConvention::rotate_half, d}, d, true);
  PlanOptions options;
  options.kv_heads_after = 2;
  options.refit = false;  // the aligned mean-pool: these Grams have no outputs
  const int threads = detail::available_threads();
  detail::set_thread_count(1);
  const PlanLayer serial = plan_layer(g, gauge, true, options);
  detail::set_thread_count(2);
  const PlanLayer threaded = plan_layer(g, gauge, true, options);
  detail::set_thread_count(threads);
  CHECK(threaded.plan.groups == serial.plan.groups);
  for (const auto& [a, b] :
       {std::pair{threaded.plan, serial.plan}, std::pair{threaded.contiguous, serial.contiguous},
        std::pair{threaded.random_median, serial.random_median}}) {
    CHECK(a.key_error == b.key_error);
    CHECK(a.value_error == b.value_error);
    CHECK(a.qk_error == b.qk_error);
    CHECK(a.erank_qk_after == b.erank_qk_after);
  }
  REQUIRE(threaded.key_rotations.size() == serial.key_rotations.size());
  for (std::size_t h = 0; h < serial.key_rotations.size(); ++h) {
    CHECK(threaded.key_rotations[h] == serial.key_rotations[h]);
    CHECK(threaded.value_rotations[h] == serial.value_rotations[h]);
  }
  // the RoPE-plane product is the dense product
  const MatrixD r = plane_rotation(d, gauge, rng);
  const MatrixD x = random_matrix(d, 5, rng);
  CHECK((detail::rotate(r, x) - r * x).cwiseAbs().maxCoeff() < 1e-12);
}

namespace {

/// `heads` with random output columns (one query head per KV head) and their Grams O_hᵀ O_h.
PlanLayerGrams with_outputs(const Heads& heads, std::vector<MatrixD>& outputs, std::mt19937& rng) {
  PlanLayerGrams g = layer_grams(heads);
  const Index d = g.head_dim, width = heads.k.front().cols();
  g.outputs.resize(Index(heads.q.size()) * d, d);
  outputs.clear();
  for (std::size_t h = 0; h < heads.q.size(); ++h) {
    outputs.push_back(random_matrix(width, d, rng));
    g.outputs.middleRows(Index(h) * d, d) = outputs.back().transpose() * outputs.back();
  }
  return g;
}

/// Σ_h ‖A_h − Â_h‖² / Σ_h ‖A_h‖² built from explicit matrices with the layer's written maps:
/// K̄_g = Σ key_pool[k] K_k, query key_rotations[k] Q_h.
double explicit_refit_qk_error(const Heads& heads, const PlanLayer& layer) {
  double error = 0, total = 0;
  for (const auto& group : layer.plan.groups) {
    MatrixD pooled = MatrixD::Zero(heads.k[0].rows(), heads.k[0].cols());
    for (int k : group) pooled += layer.key_pool[k] * heads.k[k];
    for (int k : group) {
      const MatrixD form = heads.q[k].transpose() * heads.k[k];
      error += (form - (layer.key_rotations[k] * heads.q[k]).transpose() * pooled).squaredNorm();
      total += form.squaredNorm();
    }
  }
  return error / total;
}

}  // namespace

TEST_CASE("plan: --refit's written maps give its qk_error, and a head alone is exact", "[plan]") {
  std::mt19937 rng(11);
  const int kv = 6, d = 6, width = 14;
  const Heads heads = random_heads(kv, d, width, rng);
  std::vector<MatrixD> outputs;
  const PlanLayerGrams g = with_outputs(heads, outputs, rng);
  for (const RopeLayout rope : {RopeLayout{RopeConvention::rotate_half, d},
                                RopeLayout{RopeConvention::interleaved, 4}, RopeLayout{}}) {
    const KeyGauge gauge = key_gauge(rope, d, true);
    PlanOptions options;
    options.kv_heads_after = 3;
    options.refit = true;
    const PlanLayer layer = plan_layer(g, gauge, true, options);
    CHECK(explicit_refit_qk_error(heads, layer) == Approx(layer.plan.qk_error).epsilon(1e-9));
    options.refit = false;
    CHECK(layer.plan.qk_error < plan_layer(g, gauge, true, options).plan.qk_error);
    options.refit = true;
    options.kv_heads_after = kv;  // a head pooled alone is refitted exactly
    const PlanLayer alone = plan_layer(g, gauge, true, options);
    CHECK(alone.plan.qk_error < 1e-12);
    for (int k = 0; k < kv; ++k) {  // and so are its values: O T V̄ = O V
      const MatrixD pooled = alone.value_pool[k] * heads.v[k];
      const MatrixD refitted = outputs[k] * alone.value_rotations[k].transpose() * pooled;
      CHECK((refitted - outputs[k] * heads.v[k]).norm() < 1e-9 * heads.v[k].norm());
    }
  }
}

TEST_CASE("plan: --refit is invariant under the model's gauge and needs queries", "[plan]") {
  std::mt19937 rng(12);
  const int kv = 4, d = 4, width = 10;
  Heads heads = random_heads(kv, d, width, rng);
  std::vector<MatrixD> outputs;
  const PlanLayerGrams before_grams = with_outputs(heads, outputs, rng);
  const KeyGauge gauge = key_gauge(RopeLayout{RopeConvention::rotate_half, d}, d, true);
  PlanOptions options;
  options.kv_heads_after = 2;
  options.refit = true;
  const PlanLayer before = plan_layer(before_grams, gauge, true, options);
  for (int h = 0; h < kv; ++h) {  // RoPE planes on Q and K; an orthogonal map on V (and O)
    const MatrixD r = plane_rotation(d, gauge, rng), s = random_orthogonal(d, rng);
    heads.k[h] = r * heads.k[h], heads.q[h] = r * heads.q[h], heads.v[h] = s * heads.v[h];
    outputs[h] = outputs[h] * s.transpose();
  }
  PlanLayerGrams after_grams = layer_grams(heads);
  after_grams.outputs = before_grams.outputs;
  for (int h = 0; h < kv; ++h)
    after_grams.outputs.middleRows(Index(h) * d, d) = outputs[h].transpose() * outputs[h];
  const PlanLayer after = plan_layer(after_grams, gauge, true, options);
  CHECK(after.plan.groups == before.plan.groups);
  CHECK(after.plan.qk_error == Approx(before.plan.qk_error).epsilon(1e-9));
  CHECK(after.plan.erank_qk_after == Approx(before.plan.erank_qk_after).epsilon(1e-9));
  CHECK(after.plan.erank_k_after == Approx(before.plan.erank_k_after).epsilon(1e-9));
  after_grams.outputs.resize(0, 0);
  CHECK_THROWS_WITH(plan_layer(after_grams, gauge, true, options),
                    Catch::Contains("the refit needs the layer's query and output projections"));
}

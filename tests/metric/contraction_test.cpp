// Tests of the contraction (src/metric/contraction.cpp; its plan, contraction_plan.cpp): latent and
// raw coordinates against the explicit inner products and heads' own products, the latent path
// against the pairwise one, where each is chosen, singular latent Grams; the TRMMs a slab of heads
// at a time (SideCoordinates::heads_per_slab), a head's self product over rows that narrow
// (self_product_by_runs) and the two sides' coordinates written side by side (latent_sides).
// Against the numpy reference: e2e's latent families (DeepSeek's queries take the slabs).
#include "metric/contraction.hpp"

#include <random>
#include <vector>

#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "metric/contraction_plan.hpp"
#include "support/catch.hpp"
#include "support/layer_metrics_check.hpp"
#include "support/random_factors.hpp"

using namespace kvrank;
using namespace kvrank::test;  // the shared factors and checks (tests/support)

namespace {

/// Both sides in latent coordinates (MLA's plan).
const detail::ContractionPlan kLatentPlan{detail::Coordinates::latent, detail::Coordinates::latent,
                                          0};

/// MLA's query side in small: every head one dense block over all `latent` basis rows into all of
/// its `k` columns (q_b's rows of the head, over q_a).
FactorSide whole_block_heads(Index heads, Index latent, Index d, Index k, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  FactorSide side;
  side.basis = test::uniform_rows(latent, d, rng);
  side.head_cols = k;
  for (Index h = 0; h < heads; ++h) {
    RowMatrixF transposed(k, latent);
    for (Index i = 0; i < transposed.size(); ++i) transposed.data()[i] = normal(rng);
    side.heads.push_back({CoeffBlock::dense(0, 0, std::move(transposed))});
  }
  return side;
}

/// The same heads with each block cut in two by its head columns: no longer one block a head, so
/// each half takes a TRMM of its own, a head at a time.
FactorSide halves_of(const FactorSide& whole) {
  FactorSide side = whole;
  const Index k = whole.head_cols;
  for (auto& blocks : side.heads) {
    const RowMatrixF transposed = blocks.front().transposed();
    blocks = {CoeffBlock::dense(0, 0, transposed.topRows(k / 2)),
              CoeffBlock::dense(0, k / 2, transposed.bottomRows(k - k / 2))};
  }
  return side;
}

/// ⟨A_i, A_j⟩ and the per-head L_hᵀL_h, R_hᵀR_h of a contraction, against the same from the
/// explicit (double) factors.
void check_contraction(const HeadFactors& f, const detail::ContractionPlan& plan,
                       const detail::LayerKernels& kernels = {}) {
  ComputeWorkspace workspace;
  const detail::ContractedHeads got =
      detail::contract_heads(f, plan, workspace, HeadRanks::computed, kernels);
  const Heads left = explicit_heads(f.left);
  const Heads right = f.symmetric ? left : explicit_heads(f.right);
  const Index heads = f.num_heads();
  MatrixD want(heads, heads);
  for (Index i = 0; i < heads; ++i) {
    for (Index j = 0; j < heads; ++j) {
      want(i, j) =
          ((left[i].transpose() * left[j]).cwiseProduct(right[i].transpose() * right[j])).sum();
    }
  }
  CHECK((got.inner - want).norm() <= 1e-5 * want.norm());
  REQUIRE(got.left);
  REQUIRE(static_cast<bool>(got.right) == !f.symmetric);
  for (Index h = 0; h < heads; ++h) {
    const MatrixD p = left[h].transpose() * left[h];
    CHECK((detail::self_product(*got.left, h) - p).norm() <= 1e-5 * p.norm());
    if (!f.symmetric) {
      const MatrixD q = right[h].transpose() * right[h];
      CHECK((detail::self_product(*got.right, h) - q).norm() <= 1e-5 * q.norm());
    }
  }
  const detail::ContractedHeads skipped =
      detail::contract_heads(f, plan, workspace, HeadRanks::skipped, kernels);
  CHECK_FALSE(skipped.left);
  CHECK_FALSE(skipped.right);
}

/// Two contractions of the same heads with the same bits: the inner products and each head's self
/// products on both sides (the right one where there is one).
void check_same_contraction(const detail::ContractedHeads& a, const detail::ContractedHeads& b,
                            Index heads) {
  CHECK(a.inner == b.inner);
  REQUIRE(static_cast<bool>(a.right) == static_cast<bool>(b.right));
  for (Index h = 0; h < heads; ++h) {
    INFO("head " << h);
    CHECK(detail::self_product(*a.left, h) == detail::self_product(*b.left, h));
    if (a.right) CHECK(detail::self_product(*a.right, h) == detail::self_product(*b.right, h));
  }
}

void check_paths_agree(const HeadFactors& f) {
  const LayerMetrics pairwise = analyze_layer(f, Contraction::pairwise);
  const LayerMetrics latent = analyze_layer(f, Contraction::latent);
  check_same_metrics(latent, pairwise, 1e-6);
  for (size_t h = 0; h < pairwise.head_norm.size(); ++h) {
    check_close(latent.head_norm[h], pairwise.head_norm[h], 1e-6);
    check_close(latent.head_erank[h], pairwise.head_erank[h], 1e-5);
  }
}

}  // namespace

TEST_CASE("a slab of heads' TRMM gives each head's coordinates as a head at a time does",
          "[contraction]") {
  // 11 heads: a slab of 8 and one of 3.
  std::mt19937 rng(41);
  HeadFactors slabbed;
  slabbed.symmetric = true;
  slabbed.left = whole_block_heads(11, 24, 40, 6, rng);
  HeadFactors by_head = slabbed;
  by_head.left = halves_of(slabbed.left);
  std::vector<detail::FloatKernels> kernel_kinds{detail::FloatKernels::blas};
  if (onednn_f32_supported()) kernel_kinds.push_back(detail::FloatKernels::onednn);
  for (const detail::FloatKernels products : kernel_kinds) {
    const detail::LayerKernels kernels{false, products};
    ComputeWorkspace slab_workspace, head_workspace;
    const detail::ContractedHeads a =
        detail::contract_heads(slabbed, kLatentPlan, slab_workspace, HeadRanks::computed, kernels);
    const detail::ContractedHeads b =
        detail::contract_heads(by_head, kLatentPlan, head_workspace, HeadRanks::computed, kernels);
    check_same_contraction(a, b, slabbed.num_heads());
    check_contraction(slabbed, kLatentPlan, kernels);
  }
}

TEST_CASE("a head's self product over rows that narrow has the bits of the whole depth",
          "[contraction]") {
  // 12 rows 40 wide, 2 columns of padding: 7 rows whole, 3 zero past column 9, 2 past column 4
  // (MLA's keys: the nope rows whole, the rope rows as wide as the rope).
  const Index k = 12, dim = 40, ld = 42;
  const std::vector<detail::ColumnRun> runs{{0, 7, 40}, {7, 3, 9}, {10, 2, 4}};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  RowMatrixF rows = RowMatrixF::Zero(k, ld);
  for (const detail::ColumnRun& run : runs)
    for (Index r = run.first; r < run.first + run.count; ++r)
      for (Index c = 0; c < run.width; ++c) rows(r, c) = normal(rng);
  const MatrixD got = detail::self_product_by_runs(k, dim, rows.data(), ld, runs);
  const MatrixD whole = detail::syrk_in_double(k, dim, rows.data(), ld);
  const MatrixD values = rows.leftCols(dim).cast<double>();
  const MatrixD want = values * values.transpose();
  CHECK((got - want).norm() <= 1e-13 * want.norm());
  if (detail::syrk_in_double_path() == detail::DoubleSyrkPath::kernel) CHECK(got == whole);
  // Runs out of row order take the whole depth, the same numbers.
  const std::vector<detail::ColumnRun> unordered{{0, 7, 40}, {10, 2, 4}, {7, 3, 9}};
  CHECK(detail::self_product_by_runs(k, dim, rows.data(), ld, unordered) == whole);
  // Rows that widen: each run's rows against the narrower ones before them, as deep as the run.
  const RowMatrixF widening = rows.colwise().reverse();  // the rows in reverse order
  const std::vector<detail::ColumnRun> widening_runs{{0, 2, 4}, {2, 3, 9}, {5, 7, 40}};
  const MatrixD widened = detail::self_product_by_runs(k, dim, widening.data(), ld, widening_runs);
  const MatrixD widening_values = widening.leftCols(dim).cast<double>();
  const MatrixD widening_want = widening_values * widening_values.transpose();
  CHECK((widened - widening_want).norm() <= 1e-13 * widening_want.norm());
  if (detail::syrk_in_double_path() == detail::DoubleSyrkPath::kernel)
    CHECK(widened == detail::syrk_in_double(k, dim, widening.data(), ld));
}

TEST_CASE("the two sides' coordinates written side by side give the bits of one after the other",
          "[contraction]") {
  // On two threads the smaller side's Gram and factor are formed while the larger side's Cholesky
  // factor runs, and its heads (a task each: blocks in halves) written until that factor is done;
  // the rest of them after the larger side's slabs. On the calling thread alone, one side after
  // the other.
  // Each order of sizes, so that each side is the larger once. (A build without OpenMP has one
  // thread: there both runs take the second way, and only the explicit products check anything.)
  for (const bool queries_larger : {true, false}) {
    INFO((queries_larger ? "queries" : "keys") << " larger");
    std::mt19937 rng(5);
    HeadFactors factors;
    factors.symmetric = false;
    const FactorSide larger = whole_block_heads(64, 400, 420, 8, rng);
    const FactorSide smaller = halves_of(whole_block_heads(64, 200, 420, 8, rng));
    factors.left = queries_larger ? larger : smaller;
    factors.right = queries_larger ? smaller : larger;
    const detail::LayerKernels kernels{false, detail::FloatKernels::blas};
    ComputeWorkspace threaded_workspace, serial_workspace;
    const detail::ContractedHeads threaded = detail::contract_heads(
        factors, kLatentPlan, threaded_workspace, HeadRanks::computed, kernels);
    const detail::ContractedHeads serial = [&] {
      const CallingThreadOnly one_thread;
      return detail::contract_heads(factors, kLatentPlan, serial_workspace, HeadRanks::computed,
                                    kernels);
    }();
    REQUIRE(threaded.right);
    check_same_contraction(threaded, serial, factors.num_heads());
    check_contraction(factors, kLatentPlan, kernels);
  }
}

TEST_CASE("latent and raw coordinates contract to the explicit inner products", "[contraction]") {
  std::mt19937 rng(11);
  const HeadFactors f = sparse_factors(6, 40, 5, 3, rng);
  using detail::Coordinates;
  for (Coordinates left : {Coordinates::latent, Coordinates::raw}) {
    for (Coordinates right : {Coordinates::latent, Coordinates::raw}) {
      INFO("left " << (left == Coordinates::latent) << " right " << (right == Coordinates::latent));
      check_contraction(f, {left, right, 0});
    }
  }
  HeadFactors sym = f;
  sym.symmetric = true;
  check_contraction(sym, kLatentPlan);
  check_contraction(sym, {Coordinates::raw, Coordinates::raw, 0});
  // Simple (slice) heads on one side, as o_proj is for MLA's ov.
  HeadFactors mixed = f;
  mixed.left = side_of(random_heads(6, 40, 5, rng));
  check_contraction(mixed, {Coordinates::raw, Coordinates::latent, 0});
}

TEST_CASE("the latent contraction gives the pairwise metrics", "[contraction]") {
  std::mt19937 rng(12);
  HeadFactors f = sparse_factors(7, 48, 6, 2, rng);
  check_paths_agree(f);
  f.symmetric = true;
  check_paths_agree(f);
}

TEST_CASE("skipping the heads' own ranks leaves every other number as it was", "[contraction]") {
  std::mt19937 rng(26);
  const HeadFactors latent = sparse_factors(7, 48, 6, 2, rng);
  const HeadFactors dense = factors_of(random_heads(6, 40, 5, rng), random_heads(6, 40, 5, rng));
  for (const Contraction how : {Contraction::pairwise, Contraction::latent}) {
    for (const HeadFactors* f : {&latent, &dense}) {
      ComputeWorkspace workspace;
      const LayerMetrics with = analyze_layer(*f, workspace, how, HeadRanks::computed);
      const LayerMetrics without = analyze_layer(*f, workspace, how, HeadRanks::skipped);
      REQUIRE(with.head_erank.size() == static_cast<std::size_t>(f->num_heads()));
      CHECK(without.head_erank.empty());
      // The same products in the same order: everything else equal bit for bit.
      LayerMetrics expected = with;
      expected.head_erank.clear();
      test::require_same_layer(expected, without, true);
    }
  }
}

TEST_CASE("the contraction is chosen for latent heads and not for plain slices", "[contraction]") {
  // MLA-like: 16 heads, each a dense 128 × 32 block on a 128-row latent of d = 256, both sides.
  std::mt19937 rng(14);
  std::normal_distribution<double> normal;
  HeadFactors f;
  for (FactorSide* side : {&f.left, &f.right}) {
    side->basis = uniform_rows(128, 256, rng);
    side->head_cols = 32;
    for (int h = 0; h < 16; ++h) {
      MatrixD block(128, 32);
      for (Index i = 0; i < block.size(); ++i) block.data()[i] = normal(rng);
      side->heads.push_back({CoeffBlock::dense(0, 0, block.transpose().cast<float>())});
    }
  }
  CHECK(detail::choose_contraction(f, Contraction::automatic).has_value());
  CHECK_FALSE(detail::choose_contraction(f, Contraction::pairwise).has_value());
  const HeadFactors slices = factors_of(random_heads(4, 64, 8, rng), random_heads(4, 64, 8, rng));
  CHECK_FALSE(detail::choose_contraction(slices, Contraction::automatic).has_value());
  CHECK(detail::choose_contraction(slices, Contraction::latent).has_value());
}

TEST_CASE("an LRKV layer takes the contraction only where it was measured to pay",
          "[contraction]") {
  // Queries the plain rows of q_proj, keys LRKV's [k_shared; k_lora_a] (sparse_factors' left
  // side). The model rates the contraction cheaper at both shapes (estimates 1.23× and 1.38×); on
  // bench/paths.cpp's measurements only the second pays (contraction_plan.cpp, kContractionWeight).
  std::mt19937 rng(15);
  auto lrkv = [&](Index heads, Index d, Index k, Index r) {
    HeadFactors f;
    f.left = side_of(random_heads(heads, d, k, rng));
    f.right = sparse_factors(heads, d, k, r, rng).left;
    return f;
  };
  const HeadFactors pairwise_faster = lrkv(16, 1024, 64, 64);  // 1.6× faster
  const double estimated = detail::pairwise_cost(pairwise_faster) /
                           detail::choose_contraction(pairwise_faster, Contraction::latent)->cost;
  CHECK(estimated > 1.0);
  CHECK_FALSE(detail::choose_contraction(pairwise_faster, Contraction::automatic).has_value());
  const HeadFactors latent_faster = lrkv(8, 1024, 128, 32);  // 1.2× faster
  CHECK(detail::choose_contraction(latent_faster, Contraction::automatic).has_value());
}

TEST_CASE("rank-deficient latent Grams contract exactly", "[contraction]") {
  std::mt19937 rng(13);
  // More basis rows than columns (latent larger than d), and a zero row (a zero RMSNorm gain):
  // the Grams are singular, Cholesky fails in round-off and the pivoted LDLᵀ takes over.
  HeadFactors f = sparse_factors(5, 12, 4, 3, rng);
  REQUIRE(f.left.basis.rows() > f.left.basis.cols());
  f.right.basis.row(1).setZero();
  check_contraction(f, kLatentPlan);
  check_paths_agree(f);
  f.symmetric = true;
  check_contraction(f, kLatentPlan);
  check_paths_agree(f);
}

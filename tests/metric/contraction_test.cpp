// Tests of the latent coordinates' TRMMs a slab of heads at a time (src/metric/contraction.cpp,
// SideCoordinates::heads_per_slab), of a head's self product over rows that narrow
// (self_product_by_runs) and of the two sides' factors formed side by side (latent_factors). That
// the contraction gives the explicit inner products and the pairwise path's metrics is tested in
// diversity_test.cpp, and against the numpy reference in e2e's latent families (DeepSeek's queries
// take the slabs).
#include "metric/contraction.hpp"

#include <random>
#include <vector>

#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "metric/contraction_plan.hpp"
#include "support/catch.hpp"
#include "support/random_factors.hpp"

using namespace kvrank;

namespace {

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

/// L_hᵀL_h = C_hᵀ B Bᵀ C_h in double.
MatrixD explicit_self_product(const FactorSide& side, Index h) {
  const MatrixD basis = side.basis.cast<double>();
  const MatrixD coefficients = side.heads[h].front().in_double();
  const MatrixD l = basis.transpose() * coefficients;
  return l.transpose() * l;
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
  const detail::ContractionPlan plan{detail::Coordinates::latent, detail::Coordinates::latent, 0};
  std::vector<detail::FloatKernels> kernel_kinds{detail::FloatKernels::blas};
  if (onednn_f32_supported()) kernel_kinds.push_back(detail::FloatKernels::onednn);
  for (const detail::FloatKernels products : kernel_kinds) {
    const detail::LayerKernels kernels{false, products};
    ComputeWorkspace slab_workspace, head_workspace;
    const detail::ContractedHeads a =
        detail::contract_heads(slabbed, plan, slab_workspace, HeadRanks::computed, kernels);
    const detail::ContractedHeads b =
        detail::contract_heads(by_head, plan, head_workspace, HeadRanks::computed, kernels);
    CHECK(a.inner == b.inner);
    for (Index h = 0; h < slabbed.num_heads(); ++h) {
      INFO("head " << h);
      const MatrixD got = detail::self_product(*a.left, h);
      CHECK(got == detail::self_product(*b.left, h));
      const MatrixD want = explicit_self_product(slabbed.left, h);
      CHECK((got - want).norm() <= 1e-5 * want.norm());
    }
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
  // Runs out of row order (a wide run after a narrow one) take the whole depth, the same numbers.
  const std::vector<detail::ColumnRun> unordered{{0, 7, 40}, {10, 2, 4}, {7, 3, 9}};
  CHECK(detail::self_product_by_runs(k, dim, rows.data(), ld, unordered) == whole);
}

TEST_CASE("the two sides' latent factors formed side by side give the bits of one after the other",
          "[contraction]") {
  // Queries of 24 latent rows, keys of 10: on two threads the keys' Gram and factor are formed
  // while the queries' Cholesky factor runs; on the calling thread alone, one after the other.
  std::mt19937 rng(5);
  HeadFactors factors;
  factors.symmetric = false;
  factors.left = whole_block_heads(6, 24, 40, 4, rng);
  factors.right = whole_block_heads(6, 10, 40, 4, rng);
  const detail::ContractionPlan plan{detail::Coordinates::latent, detail::Coordinates::latent, 0};
  const detail::LayerKernels kernels{false, detail::FloatKernels::blas};
  ComputeWorkspace threaded_workspace, serial_workspace;
  const detail::ContractedHeads threaded =
      detail::contract_heads(factors, plan, threaded_workspace, HeadRanks::computed, kernels);
  const detail::ContractedHeads serial = [&] {
    const CallingThreadOnly one_thread;
    return detail::contract_heads(factors, plan, serial_workspace, HeadRanks::computed, kernels);
  }();
  CHECK(threaded.inner == serial.inner);
  for (Index h = 0; h < factors.num_heads(); ++h) {
    INFO("head " << h);
    CHECK(detail::self_product(*threaded.left, h) == detail::self_product(*serial.left, h));
    const MatrixD left = detail::self_product(*threaded.left, h);
    const MatrixD right = detail::self_product(*threaded.right, h);
    const MatrixD want_left = explicit_self_product(factors.left, h);
    const MatrixD want_right = explicit_self_product(factors.right, h);
    CHECK((left - want_left).norm() <= 1e-5 * want_left.norm());
    CHECK((right - want_right).norm() <= 1e-5 * want_right.norm());
  }
}

// kvrank_bench_paths — the two ways analyze_layer forms an LRKV layer's inner products, side by
// side (docs/performance.md, "How the cost is kept down"): the pairwise path (each side's Gram,
// then C_iᵀ G C_j for every pair of heads, in double) and the latent contraction (contraction.cpp),
// with the path the cost model picks (choose_contraction) and its estimates, so that the model can
// be checked where LRKV checkpoints lie. A layer as the LRKV layout builds it (factors.hpp):
// queries the plain rows of q_proj (H·d_h × d); keys the basis [k_shared; k_lora_a] ((d_h + H·r) ×
// d), head h an identity on k_shared's rows and k_lora_b_hᵀ (r × d_h) on its own r rows. Random
// normal values, JSON's work (the heads' own ranks too); each time the fastest of --rounds (after
// one untimed call), the two paths interleaved, on --threads (default: all).
//
//   kvrank_bench_paths --rounds 3
//   kvrank_bench_paths --d 4096 --heads 32 --head-dim 128 --rank 64
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_flags.hpp"
#include "kvrank/base/factors.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/diversity.hpp"
#include "metric/contraction_plan.hpp"

namespace {

using kvrank::CoeffBlock;
using kvrank::Contraction;
using kvrank::Index;
using kvrank::RowMatrixF;

struct Shape {
  Index d, heads, head_dim, rank;
};

/// rows × cols normal values from `rng`.
RowMatrixF normal_rows(Index rows, Index cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RowMatrixF m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

/// An LRKV layer's query and key sides (see the file comment).
kvrank::HeadFactors lrkv_layer(const Shape& shape) {
  std::mt19937 rng(7);
  kvrank::HeadFactors f;
  f.left.basis = normal_rows(shape.heads * shape.head_dim, shape.d, rng);
  f.left.head_cols = shape.head_dim;
  for (Index h = 0; h < shape.heads; ++h)
    f.left.heads.push_back({CoeffBlock::identity(h * shape.head_dim, shape.head_dim)});
  f.right.basis = normal_rows(shape.head_dim + shape.heads * shape.rank, shape.d, rng);
  f.right.head_cols = shape.head_dim;
  for (Index h = 0; h < shape.heads; ++h) {
    f.right.heads.push_back({CoeffBlock::identity(0, shape.head_dim),
                             CoeffBlock::dense(shape.head_dim + h * shape.rank, 0,
                                               normal_rows(shape.head_dim, shape.rank, rng))});
  }
  return f;
}

/// Seconds of one analyze_layer of `f` by `how`.
double timed(const kvrank::HeadFactors& f, Contraction how) {
  const auto start = std::chrono::steady_clock::now();
  static_cast<void>(kvrank::analyze_layer(f, how));
  return kvrank_bench::seconds_since(start);
}

/// One shape's line: both paths' fastest of `rounds`, the model's choice and estimates.
void run(const Shape& shape, long rounds) {
  const kvrank::HeadFactors f = lrkv_layer(shape);
  const auto plan = kvrank::detail::choose_contraction(f, Contraction::latent);
  const bool automatic = kvrank::detail::choose_contraction(f, Contraction::automatic).has_value();
  timed(f, Contraction::pairwise);
  timed(f, Contraction::latent);
  double pairwise = 1e30, latent = 1e30;
  for (long r = 0; r < rounds; ++r) {
    pairwise = std::min(pairwise, timed(f, Contraction::pairwise));
    latent = std::min(latent, timed(f, Contraction::latent));
  }
  const bool latent_faster = latent < pairwise;
  std::printf(
      "d %5ld  heads %3ld  d_h %4ld  rank %4ld | pairwise %7.3f s  latent %7.3f s (%.2fx) "
      "| model picks %-8s (pairwise %.3g, latent %.3g multiply-adds: %.3fx)%s\n",
      static_cast<long>(shape.d), static_cast<long>(shape.heads), static_cast<long>(shape.head_dim),
      static_cast<long>(shape.rank), pairwise, latent, pairwise / latent,
      automatic ? "latent" : "pairwise", kvrank::detail::pairwise_cost(f), plan ? plan->cost : 0.0,
      plan ? kvrank::detail::pairwise_cost(f) / plan->cost : 0.0,
      automatic == latent_faster ? "" : "  <- the slower path");
}

}  // namespace

int main(int argc, char** argv) {
  kvrank_bench::set_threads(kvrank_bench::parse_flag(argc, argv, "--threads", 0));
  const long rounds = kvrank_bench::parse_flag(argc, argv, "--rounds", 3);
  const long d = kvrank_bench::parse_flag(argc, argv, "--d", 0);
  if (d > 0) {
    run({d, kvrank_bench::parse_flag(argc, argv, "--heads", 32),
         kvrank_bench::parse_flag(argc, argv, "--head-dim", 128),
         kvrank_bench::parse_flag(argc, argv, "--rank", 64)},
        rounds);
    return 0;
  }
  for (const Shape& shape : std::vector<Shape>{{1024, 16, 64, 8},
                                               {1024, 16, 64, 32},
                                               {2048, 16, 128, 16},
                                               {2048, 16, 128, 64},
                                               {2048, 32, 64, 32},
                                               {4096, 32, 128, 16},
                                               {4096, 32, 128, 64},
                                               {4096, 32, 128, 128}}) {
    run(shape, rounds);
  }
  return 0;
}

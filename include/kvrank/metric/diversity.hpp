// Head diversity: the metric of docs/metric.md, computed from factor Grams without any d×d matrix.
//
//   A_h = L_h R_hᵀ                         per-head bilinear form (see factors.hpp)
//   ⟨A_i, A_j⟩_F = Σ_ab (L_iᵀL_j)_ab (R_iᵀR_j)_ab
//   S_ij = ⟨A_i, A_j⟩_F / (‖A_i‖_F ‖A_j‖_F)          H×H cosine Gram
//   erank(S) = exp(−Σ p_i ln p_i),  p = max(λ(S), 0) / Σ max(λ, 0)
//   erank_centered = erank(J S J),  J = I − 11ᵀ/H     (1.0 when trace(J S J) ≤ 1e-12·H)
//
// Usage:
//   HeadFactors f = layer_factors(ckpt, layout, layer, Repr::qk);  // layout.hpp, or by hand
//   LayerMetrics m = analyze_layer(f);  // m.erank, m.erank_centered, m.similarity, ...
//   (a loop over layers passes one ComputeWorkspace to each call: compute.hpp)
// (this example is compiled and run by tests/header_examples_test.cpp)
//
// Grams of the bases are float32 SYRKs (OpenBLAS when available), or bf16 matmuls with float32
// accumulation when the rows are bf16 (gram_backend.hpp); everything after that — the H×H
// similarity, the d_h×d_h blocks for per-head singular values, all eigenproblems — is in double.
//
// Where the definition leaves a choice (docs/metric.md §4):
//  - eigenvalues ≤ n·ε·λ_max (of S, of J S J scaled by S's λ_max, and of the per-head σ²) are
//    round-off and set to 0: identical heads give erank exactly 1.0, a rank-one head exactly 1;
//  - S_ii is exactly 1 and S_ij = ⟨A_i,A_j⟩ / sqrt(⟨A_i,A_i⟩⟨A_j,A_j⟩);
//  - no head kept (all zero): heads 0, every metric 0, pcs_90 0; one head kept: erank 1,
//    erank_centered 1, mean_similarity 1.
#pragma once

#include <vector>

#include "kvrank/base/eigen.hpp"
#include "kvrank/base/factors.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/head_pairs.hpp"

namespace kvrank {

/// Metrics of one layer (one representation). Field names match the JSON schema of
/// docs/result-format.md.
struct LayerMetrics {
  int layer = 0;
  int heads = 0;  ///< heads kept in S (zero heads excluded)
  double erank = 0;
  double erank_centered = 0;
  double erank_pct = 0;
  double erank_centered_pct = 0;
  double mean_similarity = 0;
  int pcs_90 = 1;
  std::vector<double> eigenvalues;           ///< of S, descending, clipped at 0
  std::vector<double> eigenvalues_centered;  ///< of J S J, descending, clipped at 0
  std::vector<double> head_erank;            ///< per head (all H, zero heads → 0); empty when
                                             ///< not asked for (HeadRanks::skipped)
  std::vector<double> head_norm;             ///< ‖A_h‖_F per head (all H)
  std::vector<int> zero_heads;               ///< heads with ‖A_h‖_F = 0, left out of S
  MatrixD similarity;                        ///< S over the kept heads
  /// `analyze --pairs K` (head_pairs.hpp): the K most similar pairs and each head's nearest
  /// neighbour (all H); empty when not asked for.
  std::vector<HeadPair> similar_pairs;
  std::vector<NearestHead> nearest_heads;
};

/// Roy–Vetterli / uncentred effective rank of non-negative weights: exp(entropy of w/Σw), with
/// 0·ln 0 = 0. Negative entries are clipped to 0. Returns 0 for an all-zero input.
double effective_rank(const std::vector<double>& weights);

/// Metrics of a cosine Gram S (H×H, symmetric, unit diagonal): everything in LayerMetrics except
/// the per-head fields and `layer`.
LayerMetrics similarity_metrics(const MatrixD& similarity);

/// How ⟨A_i, A_j⟩_F is formed. Both ways give the same metric (to float32 round-off):
///  - pairwise: C_iᵀ G C_j from each side's basis Gram G — for heads that are slices of a basis
///    (MHA/GQA/MQA) this is just the two SYRKs;
///  - latent: each head contracted to one matrix in its sides' coordinates (the Cholesky factor of
///    G, or the basis columns), the H×H matrix one SYRK over those — far cheaper for heads built
///    from a shared latent (MLA, LRKV);
///  - automatic: latent when some heads are not plain slices and it is estimated cheaper.
enum class Contraction { automatic, pairwise, latent };

/// Whether analyze_layer computes each head's own effective rank (LayerMetrics::head_erank). It
/// takes an eigenproblem per head (d_h × d_h; for MLA also each head's self products), about a
/// third of a small model's time, and only the JSON result holds it: a table or CSV skips it.
enum class HeadRanks { computed, skipped };

/// The full pipeline for one layer: Grams, S, metrics, per-head effective ranks and norms.
LayerMetrics analyze_layer(const HeadFactors& factors, Contraction how = Contraction::automatic);

/// The same, with the Gram buffers of `workspace` (compute.hpp): a loop over layers passes the
/// same workspace to each, so that layers of one shape reuse one allocation.
LayerMetrics analyze_layer(const HeadFactors& factors, ComputeWorkspace& workspace,
                           Contraction how = Contraction::automatic,
                           HeadRanks head_ranks = HeadRanks::computed);

/// G = basis · basisᵀ (m×m) in float32 through SYRK, returned in double (both triangles filled).
MatrixD basis_gram(const RowMatrixF& basis);

}  // namespace kvrank

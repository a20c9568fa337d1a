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

#include <optional>
#include <string>
#include <vector>

#include "kvrank/base/eigen.hpp"
#include "kvrank/base/factors.hpp"

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
  std::vector<double> head_erank;            ///< per head (all H, zero heads → 0)
  std::vector<double> head_norm;             ///< ‖A_h‖_F per head (all H)
  std::vector<int> zero_heads;               ///< heads with ‖A_h‖_F = 0, left out of S
  MatrixD similarity;                        ///< S over the kept heads
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

/// The full pipeline for one layer: Grams, S, metrics, per-head effective ranks and norms.
LayerMetrics analyze_layer(const HeadFactors& factors, Contraction how = Contraction::automatic);

/// G = basis · basisᵀ (m×m) in float32 through SYRK, returned in double (both triangles filled).
MatrixD basis_gram(const RowMatrixF& basis);

/// Sets the number of threads used by the BLAS and by kvrank's own loops (0 = all cores).
void set_compute_threads(int threads);

/// More threads than 4 × the processors only cost memory and start-up (100000 crashed OpenMP, 64
/// under a memory limit hung it): refused (kvrank::Error naming the limit) before any thread
/// exists, like a negative count.
void check_thread_count(int threads);

/// What runs the products, for `-v`: the BLAS and the kernels it picked for this CPU, and what
/// runs on oneDNN (gram_backend_description()).
std::string compute_backend_description();

/// A one-line advice when OpenBLAS did not recognise this CPU and runs its generic (Prescott)
/// kernels although the CPU has AVX2 — Debian 12's OpenBLAS 0.3.21 on CPUs newer than it (5th
/// generation Xeon, AMD Zen 5): every product is then several times slower than it could be
/// (docs/performance.md), and only the OPENBLAS_CORETYPE variable, read when OpenBLAS is loaded,
/// can change that. nullopt otherwise, and when kvrank runs its float32 products on oneDNN's own
/// kernels instead (float_products_on_onednn(), gram_backend.hpp).
std::optional<std::string> generic_blas_kernels_advice();

}  // namespace kvrank

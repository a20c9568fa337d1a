// The metric (docs/metric.md) from factor Grams (see diversity.hpp for the formulas).
//
// Cost model. For one side (L or R) with basis B (m × n) the only large operation is the Gram
// G = B·Bᵀ, one float32 SYRK. Everything else reads G:
//   L_iᵀL_j = C_iᵀ G C_j,
// computed block-sparsely. A head whose coefficients are one identity block (MHA/GQA/MQA heads, the
// common case) is a plain slice of G, so its cross blocks cost a k×k read each. Other heads (LRKV,
// MLA) get G·C_j formed once per head, after which every pair costs only C_iᵀ·(G·C_j) over the
// rows C_i actually touches.
//
// Conventions where the definition of the metric leaves a choice (docs/metric.md §4):
//   - round-off: eigenvalues ≤ n·ε·λ_max of an n×n problem (ε = double epsilon) are the
//     eigensolver's noise and are taken as 0 — for S and J S J (scaled by S's λ_max) and for the
//     per-head σ² — so that identical heads give exactly erank 1.0 and a rank-one head exactly 1;
//   - precision: Grams are float32 (docs/metric.md), so S is accurate to about 1e-6 relative; the
//     per-head σ of a rank-deficient head carry that float32 noise;
//   - no head kept (all heads zero): heads 0, every metric 0, pcs_90 0;
//   - one head kept: erank 1, erank_centered 1 (degenerate rule), mean_similarity 1.
#include "kvrank/metric/diversity.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/pages.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/memory_limit.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "metric/blas.hpp"
#include "metric/contraction.hpp"
#include "metric/head_spectra.hpp"
#include "metric/side_gram.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank {
namespace {

using detail::eigen_tasks;
using detail::gram_float;
using detail::head_inner_products;
using detail::side_by_side;
using detail::side_scale_exponent;
using detail::SideGram;
using detail::worth_threads;
using detail::zero_round_off;

/// Eigenvalues of a symmetric matrix, descending.
std::vector<double> descending_eigenvalues(const MatrixD& symmetric) {
  std::vector<double> values = detail::symmetric_eigenvalues(symmetric);  // ascending
  std::reverse(values.begin(), values.end());
  return values;
}

void check_side(const FactorSide& side, Index heads, const char* name) {
  if (static_cast<Index>(side.heads.size()) != heads) {
    throw std::invalid_argument(std::string("diversity: ") + name + " side has " +
                                std::to_string(side.heads.size()) + " heads, expected " +
                                std::to_string(heads));
  }
  for (const auto& blocks : side.heads) {
    for (const CoeffBlock& block : blocks) {
      if (block.basis_row < 0 || block.basis_row + block.rows() > side.rows() ||
          block.head_col < 0 || block.head_col + block.cols() > side.head_cols) {
        throw std::invalid_argument(std::string("diversity: a coefficient block of the ") + name +
                                    " side lies outside its basis or head columns");
      }
    }
  }
}

/// Whether the two sides' Grams are better formed at the same time, each SYRK on one thread, than
/// one after the other on all threads. A SYRK of a few hundred rows scales poorly over threads (the
/// 128M shape's 768 × 768: 1.36× on 2), two independent ones scale fully; so on two threads
/// whenever the sides are of similar size, and on more only when the SYRKs are too small for the
/// BLAS's own threads (which side by side would leave idle).
bool grams_side_by_side(const FactorSide& left, const FactorSide& right) {
  const int threads = detail::available_threads();
  if (threads < 2 || !detail::blas_nests_in_openmp()) return false;
  auto work = [](const FactorSide& side) { return side.rows() * side.rows() * side.cols(); };
  const Index larger = std::max(work(left), work(right));
  const Index smaller = std::min(work(left), work(right));
  constexpr Index kSmallSyrk = Index(1) << 30;  // below it a SYRK gains little from more threads
  return worth_threads(smaller) && 2 * smaller >= larger && (threads == 2 || larger < kSmallSyrk);
}

/// pcs_90: the smallest k whose top-k values hold ≥ 90 % of the sum.
int components_for_90(const std::vector<double>& descending) {
  const double total = std::accumulate(descending.begin(), descending.end(), 0.0);
  if (!(total > 0)) return 1;
  double running = 0;
  for (size_t i = 0; i < descending.size(); ++i) {
    running += descending[i];
    if (running >= 0.9 * total) return static_cast<int>(i + 1);
  }
  return static_cast<int>(descending.size());
}

/// Whether kvrank's own bf16 kernel takes the Gram of every stored basis of `factors` (the basis is
/// then never copied to float32).
bool stored_bases_served(const HeadFactors& factors) {
  auto served = [](const FactorSide& side) {
    return !side.stored || own_kernel_takes_bf16(side.rows(), side.cols());
  };
  return served(factors.left) && (factors.symmetric || served(factors.right));
}

/// Whether `plan` reads every side's basis as it is held — its row gains beside it
/// (FactorSide::row_gains), its bf16 rows where they lie (FactorSide::stored): only the latent
/// coordinates do (contraction.cpp's true_gram).
bool bases_read_in_place(const HeadFactors& factors, const detail::ContractionPlan& plan) {
  auto read = [](const FactorSide& side, detail::Coordinates how) {
    return (side.row_gains.empty() && !side.stored) || how == detail::Coordinates::latent;
  };
  return read(factors.left, plan.left) && (factors.symmetric || read(factors.right, plan.right));
}

/// The kernels of gram_backend.hpp's backend in force, where memory is no concern.
detail::LayerKernels backend_kernels() {
  auto kind = [](bool onednn) {
    return onednn ? detail::FloatKernels::onednn : detail::FloatKernels::blas;
  };
  return {true, kind(float_products_on_onednn()), kind(latent_products_on_onednn())};
}

/// The small allocations of a layer besides the sized ones (H × H matrices, eigensolver
/// workspaces).
constexpr std::uint64_t kLayerSlack = 16 * kMiB;

/// Bytes of buffers a Gram of `basis` allocates beyond `held`, on the BLAS and on the faster
/// kernels.
struct GramBytes {
  std::uint64_t own = 0;      ///< the Gram, a scaled copy of the basis, G·C_h for the other heads
  std::uint64_t kernels = 0;  ///< the bf16 Gram's buffers (or oneDNN's float32 tiles)
};

/// `own_bf16`: the bf16 Grams run on kvrank's own kernel and no float32 product on oneDNN.
GramBytes gram_bytes(const FactorSide& side, int scale_exponent, const MatrixF& held,
                     std::uint64_t threads, bool own_bf16) {
  const auto m = static_cast<std::uint64_t>(side.rows());
  const auto n = static_cast<std::uint64_t>(side.cols());
  GramBytes bytes;
  if (held.rows() != side.rows() || held.cols() != side.rows()) bytes.own = m * m * 4;
  if (scale_exponent != 0) bytes.own += m * n * 4;
  for (const auto& blocks : side.heads) {
    if (identity_slice_row(blocks, side.head_cols) < 0)
      bytes.own += m * static_cast<std::uint64_t>(side.head_cols) * 8;
  }
  // kvrank's own bf16 kernel packs the basis into panels and writes the Gram in place; oneDNN's
  // threads each form their column tiles in a buffer of their own, from a bf16 copy
  // (gram_backend.cpp).
  bytes.kernels = own_bf16 ? detail::bf16_kernel_buffer_bytes(side.rows(), side.cols())
                           : m * n * 2 + threads * std::min<std::uint64_t>(256, m) * m * 4;
  return bytes;
}

/// Whether every side of `factors` is a basis left stored as bf16 (FactorSide::stored) whose heads
/// are plain slices of it: the pairwise path then runs no float32 product, only bf16 Grams.
bool only_stored_slices(const HeadFactors& factors) {
  auto stored_slices = [](const FactorSide& side) { return side.stored && plain_slices(side); };
  return stored_slices(factors.left) && (factors.symmetric || stored_slices(factors.right));
}

/// What runs a layer's float32 products: the backend in force (gram_backend.hpp), as long as the
/// room under a memory limit holds what the layer allocates and what the faster kernels (the bf16
/// Grams, oneDNN) may take; else the BLAS
/// (whose buffers were mapped with the threads, compute.hpp). Throws kvrank::Error, naming the need
/// and the limit, when not even the BLAS path fits: no library meets the limit in the middle of a
/// product (memory_limit.hpp).
detail::LayerKernels layer_kernels(const HeadFactors& factors,
                                   const std::optional<detail::ContractionPlan>& plan,
                                   std::pair<int, int> scales, const ComputeWorkspace& workspace) {
  const auto heads = static_cast<std::uint64_t>(factors.num_heads());
  const auto k = static_cast<std::uint64_t>(factors.left.head_cols);
  const auto threads = static_cast<std::uint64_t>(detail::available_threads());
  // Per thread, the per-head eigenproblems' d_h × d_h matrices (head_spectra.hpp).
  std::uint64_t own =
      kLayerSlack + 4 * heads * heads * 8 + threads * detail::kEigenMatrices * k * k * 8;
  // Where oneDNN runs none of the layer's products, nothing for what it takes itself (kernels,
  // scratchpads).
  const bool latent_on_onednn = plan && latent_products_on_onednn();
  const bool own_bf16 = bf16_grams_on_own_kernel() && !latent_on_onednn &&
                        (!float_products_on_onednn() || (!plan && only_stored_slices(factors)));
  std::uint64_t kernels =
      own_bf16 ? 0 : detail::kOnednnReserve + threads * detail::kOnednnPerThread;
  const GramBytes left =
      gram_bytes(factors.left, scales.first, workspace.left_gram, threads, own_bf16);
  const GramBytes right = factors.symmetric ? GramBytes{}
                                            : gram_bytes(factors.right, scales.second,
                                                         workspace.right_gram, threads, own_bf16);
  if (plan) {
    own += detail::contraction_bytes(factors, *plan, workspace);
  } else {
    own += left.own + right.own;
  }
  kernels += left.kernels + right.kernels;
  const GramBackend backend = gram_backend();
  const bool kernels_wanted =
      float_products_on_onednn() || latent_on_onednn ||
      (bf16_gram_supported() && backend != GramBackend::f32 && backend != GramBackend::onednn_f32);
  if (kernels_wanted && memory_fits(own + kernels)) return backend_kernels();
  require_memory(own, "one layer's products (" + std::to_string(heads) + " heads of width " +
                          std::to_string(k) + " over " + std::to_string(factors.left.cols()) +
                          " columns)");
  if (!kernels_wanted) return backend_kernels();
  return {false, detail::FloatKernels::blas};  // the BLAS's buffers are mapped already
}

/// The power-of-two scales of the two sides' bases (side_scale_exponent), the sides read at once on
/// two threads where their Grams will be; nullopt when a stored basis (FactorSide::stored), which
/// kvrank's own bf16 kernel takes, cannot be used as it is: it holds an Inf or NaN, or it needs
/// scaling; or when row gains (FactorSide::row_gains) cannot stay beside their rows.
std::optional<std::pair<int, int>> side_scales(const HeadFactors& factors) {
  std::optional<int> left = 0;
  std::optional<int> right = 0;
  auto scan_left = [&] { left = side_scale_exponent(factors.left); };
  auto scan_right = [&] { right = side_scale_exponent(factors.right); };
  if (factors.symmetric) {
    scan_left();
  } else if (grams_side_by_side(factors.left, factors.right)) {
    side_by_side(scan_left, scan_right);  // a side each: one scan is too small for the pool
  } else {
    scan_left();
    scan_right();
  }
  if (!left || !right) return std::nullopt;
  if (factors.has_stored_basis() && (*left != 0 || *right != 0)) return std::nullopt;
  return std::pair{*left, *right};
}

/// The pairwise path's Grams (`right` only when not symmetric): two similar sides formed together
/// on kvrank's own bf16 kernel or side by side (grams_side_by_side), others one after the other.
void form_side_grams(const HeadFactors& factors, std::pair<int, int> scales,
                     ComputeWorkspace& workspace, const detail::LayerKernels& kernels,
                     std::optional<SideGram>& left, std::optional<SideGram>& right) {
  auto form_left = [&] { left.emplace(factors.left, scales.first, workspace.left_gram, kernels); };
  auto form_right = [&] {
    right.emplace(factors.right, scales.second, workspace.right_gram, kernels);
  };
  if (factors.symmetric) {
    form_left();
  } else if (!grams_side_by_side(factors.left, factors.right)) {
    form_left();
    form_right();
  } else if (detail::bf16_grams_together(factors.left, factors.right, workspace.left_gram,
                                         workspace.right_gram, kernels, scales)) {
    left.emplace(factors.left, 0, workspace.left_gram, kernels, true);
    right.emplace(factors.right, 0, workspace.right_gram, kernels, true);
  } else {
    side_by_side(form_left, form_right);
  }
}

}  // namespace

double effective_rank(const std::vector<double>& weights) {
  double total = 0;
  for (double w : weights) total += std::max(w, 0.0);
  if (!(total > 0)) return 0.0;
  double entropy = 0;
  for (double w : weights) {
    if (w <= 0) continue;
    const double p = w / total;
    entropy -= p * std::log(p);
  }
  return std::exp(entropy);
}

namespace {

/// The metrics of S, with its J S J given (formed from S, or more precisely from the contraction's
/// centred products).
LayerMetrics metrics_of(const MatrixD& similarity, const MatrixD& centered) {
  LayerMetrics m;
  const Index heads = similarity.rows();
  m.heads = static_cast<int>(heads);
  m.similarity = similarity;
  if (heads == 0) {
    m.pcs_90 = 0;
    return m;
  }
  const double h = static_cast<double>(heads);

  m.eigenvalues = descending_eigenvalues(similarity);
  const double lambda_max = m.eigenvalues.front();
  zero_round_off(m.eigenvalues, lambda_max);
  m.erank = effective_rank(m.eigenvalues);

  // The centring's round-off is relative to S, so the noise floor is S's λ_max, not J S J's.
  m.eigenvalues_centered = descending_eigenvalues(centered);
  zero_round_off(m.eigenvalues_centered, lambda_max);
  const bool degenerate = centered.trace() <= 1e-12 * h;
  m.erank_centered = degenerate ? 1.0 : effective_rank(m.eigenvalues_centered);
  if (m.erank_centered == 0.0) m.erank_centered = 1.0;  // all of J S J is round-off
  m.pcs_90 = degenerate ? 1 : components_for_90(m.eigenvalues_centered);

  m.erank_pct = 100.0 * m.erank / h;
  m.erank_centered_pct = 100.0 * m.erank_centered / h;
  if (heads == 1) {
    m.mean_similarity = 1.0;
  } else {
    m.mean_similarity = (similarity.sum() - similarity.trace()) / (h * (h - 1));
  }
  return m;
}

}  // namespace

LayerMetrics similarity_metrics(const MatrixD& similarity) {
  // J S J without forming J: subtract row and column means, add back the grand mean.
  return metrics_of(similarity, detail::double_centred(similarity));
}

MatrixD basis_gram(const RowMatrixF& basis) {
  MatrixF gram;
  gram_float(basis, gram, backend_kernels());
  return gram.cast<double>();
}

LayerMetrics analyze_layer(const HeadFactors& factors, Contraction how) {
  ComputeWorkspace workspace;
  return analyze_layer(factors, workspace, how);
}

LayerMetrics analyze_layer(const HeadFactors& factors, ComputeWorkspace& workspace, Contraction how,
                           HeadRanks head_ranks) {
  const Index heads = factors.num_heads();
  check_side(factors.left, heads, "left");
  if (!factors.symmetric) {
    check_side(factors.right, heads, "right");
    if (factors.left.head_cols != factors.right.head_cols) {
      throw std::invalid_argument("diversity: left and right head widths differ");
    }
  }

  const bool with_ranks = head_ranks == HeadRanks::computed;
  std::vector<double> head_erank(with_ranks ? heads : 0, 0.0);
  std::vector<double> head_norm(heads, 0.0);
  // `self(h)` gives head h's L_hᵀL_h and R_hᵀR_h (null when symmetric) for its singular values;
  // ‖A_h‖ scales by 2^norm_exponent when the bases were scaled before their Grams.
  auto per_head = [&](const MatrixD& inner, int norm_exponent, const auto& self) {
    std::vector<Index> ranked;  // the heads whose head_erank is asked for and not 0
    for (Index h = 0; h < heads; ++h) {
      head_norm[h] = std::ldexp(std::sqrt(std::max(inner(h, h), 0.0)), norm_exponent);
      if (with_ranks && inner(h, h) > 0) ranked.push_back(h);
    }
    const auto count = static_cast<Index>(ranked.size());
    const std::vector<std::pair<Index, Index>> tasks = eigen_tasks(count);
    [[maybe_unused]] const Index k = factors.left.head_cols;  // only in the OpenMP clause
    detail::ParallelFailure failure;
#pragma omp parallel for schedule(dynamic) if (worth_threads(count * k * k * k) && \
                                               detail::blas_nests_in_openmp())
    for (std::size_t task = 0; task < tasks.size(); ++task) {
      failure.run([&] {
        const auto [first, last] = tasks[task];
        std::vector<detail::SelfProducts> products;
        for (Index i = first; i < last; ++i) products.push_back(self(ranked[i]));
        const std::vector<std::vector<double>> sigmas = detail::head_singular_values(products);
        for (Index i = first; i < last; ++i)
          head_erank[ranked[i]] = effective_rank(sigmas[i - first]);
      });
    }
    failure.rethrow();
  };

  // A basis left stored as bf16 is read in place by kvrank's own bf16 kernel; any other path takes
  // the reader's float32 copy, which also names what is wrong with it (an Inf or NaN).
  // Stored rows that kvrank's own bf16 kernel does not take are copied to float32, and the rest
  // goes on as for a checkpoint of float32 rows (its gains beside them).
  if (factors.has_stored_basis() && !stored_bases_served(factors))
    return analyze_layer(with_each_side(factors, with_basis_copied), workspace, how, head_ranks);
  const std::optional<std::pair<int, int>> scales = side_scales(factors);
  if (!scales) return analyze_layer(with_float_bases(factors), workspace, how, head_ranks);
  const bool extreme_scale = *scales != std::pair{0, 0};
  MatrixD inner;
  std::optional<detail::CentredProducts> centred_products;  // the contraction's, for J S J
  std::optional<detail::ContractionPlan> plan;
  if (!extreme_scale) plan = detail::choose_contraction(factors, how);
  // Coefficient rows left stored as bf16 (MLA's q_b, kv_b) are read by the contraction only; the
  // pairwise path takes the reader's float32 copy.
  if (factors.has_stored_coefficients() && !plan)
    return analyze_layer(with_float_bases(factors), workspace, how, head_ranks);
  // Gains beside their rows and stored rows under a contraction are read by the latent coordinates
  // only; any other path folds and copies them (before this layer's memory is sized for a path it
  // would not take).
  if ((factors.has_row_gains() || (plan && factors.has_stored_basis())) &&
      !(plan && bases_read_in_place(factors, *plan)))
    return analyze_layer(with_float_bases(factors), workspace, how, head_ranks);
  const detail::LayerKernels kernels = layer_kernels(factors, plan, *scales, workspace);
  if (factors.has_stored_basis() && !kernels.onednn_grams)
    return analyze_layer(with_float_bases(factors), workspace, how, head_ranks);
  if (plan) {
    const detail::ContractedHeads contracted =
        detail::contract_heads(factors, *plan, workspace, head_ranks, kernels);
    inner = contracted.inner;
    centred_products = contracted.centred;
    const FactorSide& right = factors.symmetric ? factors.left : factors.right;
    per_head(inner, factors.left.exponent + right.exponent, [&](Index h) {
      return std::pair{detail::self_product(*contracted.left, h),
                       contracted.right
                           ? std::optional<MatrixD>(detail::self_product(*contracted.right, h))
                           : std::nullopt};
    });
  } else {
    std::optional<SideGram> left;
    std::optional<SideGram> right;
    form_side_grams(factors, *scales, workspace, kernels, left, right);
    inner = head_inner_products(*left, right ? &*right : nullptr, heads);
    const int norm_exponent = left->exponent() + (right ? right->exponent() : left->exponent());
    per_head(inner, norm_exponent, [&](Index h) {
      return std::pair{left->cross(h, h),
                       right ? std::optional<MatrixD>(right->cross(h, h)) : std::nullopt};
    });
  }

  std::vector<int> kept;
  std::vector<int> zero_heads;
  for (Index h = 0; h < heads; ++h) {
    (inner(h, h) > 0 ? kept : zero_heads).push_back(static_cast<int>(h));
  }
  const Index n = static_cast<Index>(kept.size());
  MatrixD similarity(n, n);
  for (Index a = 0; a < n; ++a) {
    for (Index b = 0; b < n; ++b) {
      const double ii = inner(kept[a], kept[a]);
      const double jj = inner(kept[b], kept[b]);
      // sqrt(ii·jj) rather than sqrt(ii)·sqrt(jj): identical heads then give exactly 1. Clamped:
      // round-off must not take multiples of one head past Cauchy–Schwarz (mean similarity > 1).
      similarity(a, b) =
          a == b ? 1.0 : std::clamp(inner(kept[a], kept[b]) / std::sqrt(ii * jj), -1.0, 1.0);
    }
  }

  LayerMetrics metrics =
      centred_products ? metrics_of(similarity, detail::centred_similarity(*centred_products, kept))
                       : similarity_metrics(similarity);
  metrics.head_erank = std::move(head_erank);
  metrics.head_norm = std::move(head_norm);
  metrics.zero_heads = std::move(zero_heads);
  return metrics;
}

}  // namespace kvrank

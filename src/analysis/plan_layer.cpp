// One layer's plan from its cross-Grams (plan.hpp; definitions in docs/plan.md).
//
// With the key fit of a group g (members i, transforms R_i, n members) and C_ij = K_i K_jᵀ:
//   K̄_g K̄_g'ᵀ = Σ_{i∈g, j∈g'} R_i C_ij R_jᵀ / (n n'),   K̄_g K_iᵀ = Σ_{j∈g} R_j C_ji / n.
// Query head h (reading KV head k, P_h = Q_h Q_hᵀ) has A_h = Q_hᵀ K_k and, merged,
// Â_h = (R_k Q_h)ᵀ K̄_g, so with P_k = Σ_{h→k} P_h
//   Σ_{h→k} ‖A_h − Â_h‖² = ⟨P_k, C_kk⟩ + tr(R_k P_k R_kᵀ K̄K̄ᵀ) − 2 tr(P_k R_kᵀ K̄ K_kᵀ)
// and ⟨Â_h, Â_h'⟩ = ⟨R_k Q_h Q_h'ᵀ R_k'ᵀ, K̄_g K̄_g'ᵀ⟩, the cosine Gram of docs/metric.md for
// erank_qk_after. Every product is d_h × d_h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "analysis/plan_detail.hpp"
#include "analysis/plan_refit.hpp"
#include "kvrank/metric/diversity.hpp"
#include "metric/blas.hpp"
#include "metric/side_gram.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank {
namespace {

using detail::GroupFit;
using detail::head_block;
using detail::Partition;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The effective rank of the forms whose inner products are `inner` (zero forms left out).
double erank_of_inner(const MatrixD& inner) {
  std::vector<Index> kept;
  for (Index i = 0; i < inner.rows(); ++i)
    if (inner(i, i) > 0) kept.push_back(i);
  if (kept.empty()) return 0;
  const Index n = static_cast<Index>(kept.size());
  MatrixD similarity(n, n);
  for (Index a = 0; a < n; ++a)
    for (Index b = 0; b < n; ++b)
      similarity(a, b) = a == b ? 1.0
                                : inner(kept[a], kept[b]) /
                                      std::sqrt(inner(kept[a], kept[a]) * inner(kept[b], kept[b]));
  return similarity_metrics(similarity).erank;
}

template <class X, class Y>
double frobenius_inner(const X& x, const Y& y) {
  return x.cwiseProduct(y).sum();
}

/// The layer's fixed quantities: norms and the per-KV-head query Grams P_k.
struct LayerTotals {
  double keys = 0, values = 0, forms = 0;
  std::vector<MatrixD> query_sum;  ///< P_k per KV head (empty without queries)
};

LayerTotals layer_totals(const PlanLayerGrams& g) {
  LayerTotals totals;
  const int d = g.head_dim;
  for (int k = 0; k < g.kv_heads(); ++k) {
    totals.keys += head_block(g.keys, d, k, k).trace();
    totals.values += head_block(g.values, d, k, k).trace();
  }
  if (g.queries.size() == 0) return totals;
  totals.query_sum.assign(g.kv_heads(), MatrixD::Zero(d, d));
  for (std::size_t h = 0; h < g.kv_of_head.size(); ++h) {
    const int hh = static_cast<int>(h);
    totals.query_sum[g.kv_of_head[h]] += head_block(g.queries, d, hh, hh);
  }
  for (int k = 0; k < g.kv_heads(); ++k)
    totals.forms += frobenius_inner(totals.query_sum[k], head_block(g.keys, d, k, k));
  return totals;
}

/// Σ over the group's KV heads of Σ_{h→k} ‖A_h − Â_h‖² (see the file comment).
double qk_residual(const PlanLayerGrams& g, const LayerTotals& totals,
                   const std::vector<int>& members, const GroupFit& keys) {
  const int d = g.head_dim;
  const std::size_t n = members.size();
  // cross[i] = K̄ K_iᵀ = Σ_j R_j C_ji / n, and K̄ K̄ᵀ = Σ_i cross[i] R_iᵀ / n = (Σ_i R_i cross[i]ᵀ)ᵀ /
  // n.
  std::vector<MatrixD> cross(n, MatrixD::Zero(d, d));
  MatrixD pooled_t = MatrixD::Zero(d, d);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j)
      cross[i] += detail::rotate(keys.rotations[j], head_block(g.keys, d, members[j], members[i]));
    cross[i] /= static_cast<double>(n);
    pooled_t += detail::rotate(keys.rotations[i], cross[i].transpose());
  }
  const MatrixD pooled = pooled_t.transpose() / static_cast<double>(n);
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // With P symmetric: tr(R P Rᵀ K̄K̄ᵀ) = ⟨R (R P)ᵀ, K̄K̄ᵀ⟩ (K̄K̄ᵀ symmetric), tr(P Rᵀ X) = ⟨R P, X⟩.
    const MatrixD& p = totals.query_sum[members[i]];
    const MatrixD& r = keys.rotations[i];
    const MatrixD rp = detail::rotate(r, p);
    sum += frobenius_inner(p, head_block(g.keys, d, members[i], members[i])) +
           frobenius_inner(detail::rotate(r, rp.transpose()), pooled) -
           2 * frobenius_inner(rp, cross[i]);
  }
  return std::max(0.0, sum);
}

/// Per KV head, the transform of the group fits (identity where a head is not in `partition`).
struct PartitionFit {
  std::vector<MatrixD> keys, values;
  double key_residual = 0, value_residual = 0, qk_residual = 0;
  std::vector<MatrixD> key_pool, value_pool;  ///< --refit (then keys, values: the query and
                                              ///< output maps, and qk_residual the refit's)
};

/// --refit: the conversion becomes the refit's (plan_refit.hpp); key/value residuals are kept.
void apply_refit(const PlanLayerGrams& g, const LayerTotals& totals, const Partition& partition,
                 const KeyGauge& key_gauge, PartitionFit& fit) {
  detail::Refit refit = detail::refit_partition(g, totals.query_sum, partition, key_gauge);
  fit.qk_residual = refit.qk_residual;
  fit.keys = std::move(refit.query_maps);
  fit.values.clear();
  for (const MatrixD& t : refit.output_maps) fit.values.push_back(t.transpose());  // O → O Rᵀ
  fit.key_pool = std::move(refit.key_pool);
  fit.value_pool = std::move(refit.value_pool);
}

PartitionFit fit_partition(const PlanLayerGrams& g, const LayerTotals& totals,
                           const Partition& partition, const KeyGauge& key_gauge,
                           const KeyGauge& value_gauge) {
  PartitionFit fit;
  fit.keys.assign(g.kv_heads(), MatrixD::Identity(g.head_dim, g.head_dim));
  fit.values = fit.keys;
  for (const auto& group : partition) {
    const GroupFit keys = detail::align_group(g.keys, g.head_dim, group, key_gauge);
    const GroupFit values = detail::align_group(g.values, g.head_dim, group, value_gauge);
    fit.key_residual += keys.residual;
    fit.value_residual += values.residual;
    if (!totals.query_sum.empty()) fit.qk_residual += qk_residual(g, totals, group, keys);
    for (std::size_t i = 0; i < group.size(); ++i) {
      fit.keys[group[i]] = keys.rotations[i];
      fit.values[group[i]] = values.rotations[i];
    }
  }
  return fit;
}

/// Each head's transform as row pairs (plan_detail.hpp), found once for all its blocks.
std::vector<detail::RowPairs> pairs_of(const std::vector<MatrixD>& rotations) {
  std::vector<detail::RowPairs> pairs;
  pairs.reserve(rotations.size());
  for (const MatrixD& r : rotations) pairs.push_back(detail::row_pairs(r));
  return pairs;
}

/// K̄_a K̄_bᵀ = Σ_{i∈a} R_i (Σ_{j∈b} C_ij R_jᵀ) / (n_a n_b) for every pair of groups, each block
/// d_h × d_h, formed block by block from the Gram (a rotated copy of the whole d × d Gram, as
/// first written, cost more in memory traffic than in arithmetic); the blocks below the diagonal
/// are the transposes of those above.
MatrixD pooled_key_gram(const PlanLayerGrams& g, const Partition& partition,
                        const std::vector<MatrixD>& rotations) {
  const int d = g.head_dim;
  const std::vector<detail::RowPairs> pairs = pairs_of(rotations);
  const int groups = static_cast<int>(partition.size());
  MatrixD pooled(Index(groups) * d, Index(groups) * d);
  MatrixD right(d, d);
  for (int a = 0; a < groups; ++a)
    for (int b = a; b < groups; ++b) {
      MatrixD sum = MatrixD::Zero(d, d);
      for (int i : partition[a]) {
        right.setZero();
        for (int j : partition[b])
          right += detail::rotate_columns(head_block(g.keys, d, i, j), rotations[j], pairs[j]);
        sum += detail::rotate(rotations[i], pairs[i], right);
      }
      sum /= static_cast<double>(partition[a].size() * partition[b].size());
      if (a != b) head_block(pooled, d, b, a) = sum.transpose();
      head_block(pooled, d, a, b) = std::move(sum);
    }
  return pooled;
}

/// erank of the converted layer's qk forms (queries rotated with their KV head's transform):
/// ⟨R_k Q_h Q_jᵀ R_lᵀ, K̄_g K̄_g'ᵀ⟩ block by block, as in pooled_key_gram.
double erank_qk(const PlanLayerGrams& g, const Partition& partition,
                const std::vector<MatrixD>& rotations, const MatrixD& pooled) {
  const int d = g.head_dim;
  std::vector<int> group_of(g.kv_heads());
  for (std::size_t a = 0; a < partition.size(); ++a)
    for (int k : partition[a]) group_of[k] = static_cast<int>(a);
  const std::vector<detail::RowPairs> pairs = pairs_of(rotations);
  const int heads = static_cast<int>(g.kv_of_head.size());
  MatrixD inner(heads, heads);
  for (int h = 0; h < heads; ++h)
    for (int j = h; j < heads; ++j) {
      const int kh = g.kv_of_head[h], kj = g.kv_of_head[j];
      const MatrixD left = detail::rotate(rotations[kh], pairs[kh], head_block(g.queries, d, h, j));
      inner(h, j) = inner(j, h) =
          frobenius_inner(detail::rotate_columns(left, rotations[kj], pairs[kj]),
                          head_block(pooled, d, group_of[kh], group_of[kj]));
    }
  return erank_of_inner(inner);
}

double erank_k(const MatrixD& pooled, int head_dim, int groups) {
  MatrixD inner(groups, groups);
  for (int a = 0; a < groups; ++a)
    for (int b = 0; b < groups; ++b) inner(a, b) = head_block(pooled, head_dim, a, b).squaredNorm();
  return erank_of_inner(inner);
}

double ratio(double residual, double total) { return total > 0 ? residual / total : 0.0; }

GroupingScore score_partition(const PlanLayerGrams& g, const LayerTotals& totals,
                              const Partition& partition, const PartitionFit& fit) {
  GroupingScore score;
  score.groups = partition;
  score.key_error = ratio(fit.key_residual, totals.keys);
  score.value_error = ratio(fit.value_residual, totals.values);
  const MatrixD pooled = fit.key_pool.empty()
                             ? pooled_key_gram(g, partition, fit.keys)
                             : detail::refit_pooled_keys(g, partition, fit.key_pool);
  score.erank_k_after = erank_k(pooled, g.head_dim, static_cast<int>(partition.size()));
  if (totals.query_sum.empty()) {
    score.qk_error = score.erank_qk_after = kNaN;
  } else {
    score.qk_error = ratio(fit.qk_residual, totals.forms);
    score.erank_qk_after = erank_qk(g, partition, fit.keys, pooled);
  }
  return score;
}

double median(std::vector<double> values) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

GroupingScore median_score(const std::vector<GroupingScore>& scores) {
  auto field = [&](double GroupingScore::*member) {
    std::vector<double> values;
    for (const auto& score : scores) values.push_back(score.*member);
    return median(values);
  };
  GroupingScore m;
  m.key_error = field(&GroupingScore::key_error);
  m.value_error = field(&GroupingScore::value_error);
  m.qk_error = field(&GroupingScore::qk_error);
  m.erank_qk_after = field(&GroupingScore::erank_qk_after);
  m.erank_k_after = field(&GroupingScore::erank_k_after);
  return m;
}

/// Smallest r whose r largest of `eigenvalues` (clipped at 0, round-off zeroed) hold ≥ energy.
int energy_rank(std::vector<double> eigenvalues, double energy) {
  std::sort(eigenvalues.rbegin(), eigenvalues.rend());
  const double largest = eigenvalues.empty() ? 0.0 : std::max(eigenvalues.front(), 0.0);
  const double floor =
      static_cast<double>(eigenvalues.size()) * std::numeric_limits<double>::epsilon() * largest;
  double total = 0;
  for (double& value : eigenvalues) total += value = value > floor ? value : 0.0;
  double sum = 0;
  for (std::size_t r = 0; r < eigenvalues.size(); ++r) {
    sum += eigenvalues[r];
    if (sum >= energy * total) return static_cast<int>(r + 1);
  }
  return static_cast<int>(eigenvalues.size());
}

/// latent_rank and latent_rank_forms (docs/plan.md): the energy rule on the stacked [K; V]
/// Gram, and on D^½ G D^½ with D = blockdiag(P_k / ΣA, O_k / ΣB), the nonzero spectrum of
/// Σ A_hᵀA_h / ΣA + Σ B_hᵀB_h / ΣB.
void latent_ranks(const PlanLayerGrams& g, const LayerTotals& totals, double energy,
                  PlanLayer& out) {
  if (g.keys_values.size() == 0) return;
  out.latent_rank = energy_rank(detail::symmetric_eigenvalues(g.keys_values), energy);
  if (totals.query_sum.empty() || g.outputs.size() == 0) return;
  const int d = g.head_dim;
  const int kv = g.kv_heads();
  std::vector<MatrixD> output_sum(kv, MatrixD::Zero(d, d));
  for (std::size_t h = 0; h < g.kv_of_head.size(); ++h)
    output_sum[g.kv_of_head[h]] += g.outputs.middleRows(Index(h) * d, d);
  double outputs_total = 0;
  for (int k = 0; k < kv; ++k)
    outputs_total += frobenius_inner(output_sum[k], head_block(g.values, d, k, k));
  if (!(totals.forms > 0) || !(outputs_total > 0)) return;
  MatrixD root = MatrixD::Zero(2 * Index(kv) * d, 2 * Index(kv) * d);
  for (int k = 0; k < kv; ++k) {
    head_block(root, d, k, k) = detail::psd_root(totals.query_sum[k] / totals.forms);
    head_block(root, d, kv + k, kv + k) = detail::psd_root(output_sum[k] / outputs_total);
  }
  const MatrixD scaled = root * g.keys_values * root;
  out.latent_rank_forms = energy_rank(detail::symmetric_eigenvalues(scaled), energy);
}

}  // namespace

namespace {

/// Eigen's products run on the calling thread alone while it lives: compiled with OpenMP, Eigen
/// forks every product above 50 000 multiply-adds, and a fork per d_h × d_h product cost more
/// than it saved (a 7B layer's plan took twice the CPU time). The threads it held go to the
/// planner's own loop over partitions.
class SerialProducts {
 public:
  SerialProducts() : held_(detail::hold_calling_thread()) {}
  ~SerialProducts() { detail::release_calling_thread(held_); }
  SerialProducts(const SerialProducts&) = delete;
  SerialProducts& operator=(const SerialProducts&) = delete;
  int threads() const { return held_.openmp; }

 private:
  detail::HeldThreads held_;
};

}  // namespace

PlanLayer plan_layer(const PlanLayerGrams& grams, const KeyGauge& keys, bool align_values,
                     const PlanOptions& options) {
  const SerialProducts serial;
  const int kv = grams.kv_heads();
  const int size = kv / options.kv_heads_after;
  KeyGauge values;
  if (!align_values) values.kind = KeyGauge::Kind::none;
  const LayerTotals totals = layer_totals(grams);
  const bool qk = options.objective == PlanObjective::qk && !totals.query_sum.empty();
  const detail::GroupCost cost = [&](const std::vector<int>& group) {
    if (qk && plan_refits(options))  // the objective is the qk_error of the conversion written
      return ratio(detail::refit_qk_residual(grams, totals.query_sum, group, keys), totals.forms);
    const GroupFit k = detail::align_group(grams.keys, grams.head_dim, group, keys);
    if (qk) return ratio(qk_residual(grams, totals, group, k), totals.forms);
    const GroupFit v = detail::align_group(grams.values, grams.head_dim, group, values);
    return ratio(k.residual, totals.keys) + ratio(v.residual, totals.values);
  };
  // Beyond enumeration, groups of more than two are searched on a pairwise proxy: each member
  // pair aligned on its own, (2/n) Σ_{i<j} cost({i, j}) — for `merge` a lower bound of the
  // group's residual (pairwise-best transforms need not agree) — so that a local search over
  // 32 heads costs H²/2 pair alignments instead of a Procrustes fit per visited group. The
  // reported errors are always those of the Procrustes fit of the chosen groups.
  const bool pairwise = size > 2 && equal_partition_count(kv, size) > options.exact_limit;
  std::map<std::pair<int, int>, double> pairs;
  const detail::GroupCost proxy = [&](const std::vector<int>& group) {
    double sum = 0;
    for (std::size_t i = 0; i < group.size(); ++i)
      for (std::size_t j = i + 1; j < group.size(); ++j) {
        const auto key = std::make_pair(group[i], group[j]);
        auto found = pairs.find(key);
        if (found == pairs.end()) found = pairs.emplace(key, cost({group[i], group[j]})).first;
        sum += found->second;
      }
    return 2 * sum / static_cast<double>(group.size());
  };
  PlanLayer layer;
  layer.layer = grams.layer;
  const Partition best =
      detail::best_partition(kv, size, pairwise ? proxy : cost, options.exact_limit,
                             options.restarts, options.seed, layer.exact);
  // The plan, the contiguous partition and the random ones are fitted and scored independently:
  // the Procrustes fits of the random baseline are most of a large layer's time, so they share
  // the threads (each result lands in its own slot: the same numbers on any thread count).
  std::vector<Partition> scored{best, detail::contiguous_partition(kv, size)};
  for (Partition& partition :
       detail::random_partitions(kv, size, options.random_partitions, options.seed + 1))
    scored.push_back(std::move(partition));
  std::vector<GroupingScore> scores(scored.size());
  const Index n = static_cast<Index>(scored.size());
  [[maybe_unused]] const Index work =
      n * kv * Index(grams.head_dim) * grams.head_dim * grams.head_dim;
  detail::ParallelFailure failure;
#pragma omp parallel for schedule(dynamic) \
    num_threads(serial.threads()) if (detail::worth_threads(work))
  for (Index i = 0; i < n; ++i)
    failure.run([&] {
      PartitionFit fit = fit_partition(grams, totals, scored[i], keys, values);
      if (plan_refits(options)) apply_refit(grams, totals, scored[i], keys, fit);
      scores[i] = score_partition(grams, totals, scored[i], fit);
      if (i == 0) {
        layer.key_rotations = std::move(fit.keys);
        layer.value_rotations = std::move(fit.values);
        layer.key_pool = std::move(fit.key_pool);
        layer.value_pool = std::move(fit.value_pool);
      }
    });
  failure.rethrow();
  layer.plan = std::move(scores[0]);
  layer.contiguous = std::move(scores[1]);
  layer.random_median = median_score({scores.begin() + 2, scores.end()});
  if (!totals.query_sum.empty()) {
    const Partition singletons = detail::contiguous_partition(kv, 1);
    const std::vector<MatrixD> identity(kv, MatrixD::Identity(grams.head_dim, grams.head_dim));
    layer.erank_qk_before = erank_qk(grams, singletons, identity, grams.keys);
  } else {
    layer.erank_qk_before = kNaN;
  }
  if (options.latent_energy) latent_ranks(grams, totals, *options.latent_energy, layer);
  return layer;
}

}  // namespace kvrank

// The refit conversion of `kvrank plan --refit` (plan_refit.hpp; docs/plan.md, "Refit").
//
// Keys, one RoPE plane (a, b) at a time: write a head's plane as the complex vector
// k = K[a] + i K[b] (one entry per model dimension) and a query's as q likewise. The plane's
// share of the attention form at relative rotation θ is Re(e^{iθ} q̄ kᵀ), whose square averaged
// over θ is ½ ‖q‖² ‖k‖² — planes of different frequencies do not interact on average. A query
// map that commutes with RoPE is a complex scalar per plane (a scaled rotation), so replacing
// the members' k_i by c_i k̄ costs ½ Σ_i w_i² ‖k_i − c_i k̄‖², w_i² = Σ_{h→i} ‖q_h‖²: the best k̄
// is the top right singular vector of the matrix with rows w_i k_i (from the n × n Hermitian
// Gram w_i w_j ⟨k_i, k_j⟩), and c_i = ⟨k_i, k̄⟩ / ‖k̄‖².
// Values (and keys without RoPE, or the entries partial rotary leaves alone): the output form of
// query head h is O_h V_i; with a shared V̄ and any map T_i, Σ_i ‖L_i (V_i − T_i V̄)‖² (L_i² =
// Σ_{h→i} O_hᵀ O_h) is least when V̄'s rows span the top d_h eigenvectors of Σ_i V_iᵀ L_i² V_i,
// found from the (n·d_h)² Gram of the stacked L_i V_i; T_i = V_i V̄ᵀ (V̄ V̄ᵀ)⁺.
// Scale and phase of K̄, V̄ do not change the converted model (the maps absorb them); they are
// fixed so that the written heads have the members' mean energy per plane (keys) or per row.
#include "analysis/plan_refit.hpp"

#include <Eigen/Eigenvalues>
#include <cmath>
#include <complex>

#include "kvrank/base/error.hpp"
#include "metric/blas.hpp"

namespace kvrank::detail {
namespace {

using Complex = std::complex<double>;
using MatrixC = Eigen::Matrix<Complex, Eigen::Dynamic, Eigen::Dynamic>;

/// ⟨x, y⟩ = Σ x ȳ of the planes (a, b) of two heads X, Y, from C = X Yᵀ.
Complex plane_inner(const MatrixD& c, int a, int b) {
  return {c(a, a) + c(b, b), c(b, a) - c(a, b)};
}

/// The pseudo-inverse of a positive semi-definite matrix (eigenvalues below round-off dropped).
MatrixD psd_pseudo_inverse(const MatrixD& m) {
  if (m.rows() == 0) return m;
  VectorD values;
  MatrixD vectors;
  top_symmetric_eigenpairs(m, static_cast<int>(m.rows()), values, vectors);
  const double floor = values.cwiseAbs().maxCoeff() * 1e-12 * static_cast<double>(m.rows());
  VectorD inverse = VectorD::Zero(values.size());
  for (Index i = 0; i < values.size(); ++i)
    if (values(i) > floor) inverse(i) = 1 / values(i);
  return vectors * inverse.asDiagonal() * vectors.transpose();
}

/// Rows a, b of each member's key pool: the weighted complex rank-one fit (file comment), with
/// the members' mean energy of the plane and ⟨k̄, k_first⟩ real and positive.
void pool_plane(const MatrixD& gram, int d, const std::vector<int>& members,
                const std::vector<MatrixD>& query_sum, int a, int b, std::vector<MatrixD>& pool) {
  const Index n = static_cast<Index>(members.size());
  MatrixC inner(n, n);
  VectorD weight(n);
  double energy = 0;
  for (Index i = 0; i < n; ++i) {
    const MatrixD& p = query_sum[members[i]];
    weight(i) = std::sqrt(std::max(0.0, p(a, a) + p(b, b)));
    for (Index j = 0; j < n; ++j)
      inner(i, j) = plane_inner(head_block(gram, d, members[i], members[j]), a, b);
    energy += inner(i, i).real() / static_cast<double>(n);
  }
  const MatrixC weighted = weight.asDiagonal() * inner * weight.asDiagonal();
  const Eigen::SelfAdjointEigenSolver<MatrixC> solver(weighted);
  const double top = solver.eigenvalues()(n - 1);
  if (!(energy > 0) || !(top > 0)) return;  // the plane stays zero: no form passes through it
  Eigen::VectorXcd coefficient(n);
  for (Index i = 0; i < n; ++i)
    coefficient(i) = std::conj(solver.eigenvectors()(i, n - 1)) * weight(i) / std::sqrt(top);
  Complex first = 0;  // ⟨k̄, k_first⟩
  for (Index i = 0; i < n; ++i) first += coefficient(i) * inner(i, 0);
  if (std::abs(first) > 0) coefficient *= std::conj(first) / std::abs(first);
  coefficient *= std::sqrt(energy);
  for (Index i = 0; i < n; ++i) {
    pool[i](a, a) = pool[i](b, b) = coefficient(i).real();
    pool[i](a, b) = -coefficient(i).imag();
    pool[i](b, a) = coefficient(i).imag();
  }
}

/// The pool on `entries` (rows and columns): row r of X̄ = s λ_r^{-½} u_rᵀ [L_1 X_1; …; L_n X_n],
/// u_r, λ_r the top eigenpairs of the stacked Gram, s² the members' mean energy per entry.
void pool_subspace(const MatrixD& gram, int d, const std::vector<int>& members,
                   const std::vector<MatrixD>& weights, const std::vector<int>& entries,
                   std::vector<MatrixD>& pool) {
  const Index n = static_cast<Index>(members.size()), f = static_cast<Index>(entries.size());
  std::vector<MatrixD> root(n);
  double energy = 0;
  for (Index i = 0; i < n; ++i) {
    root[i] = psd_root(submatrix(weights[members[i]], entries));
    energy += submatrix(head_block(gram, d, members[i], members[i]), entries).trace();
  }
  MatrixD stacked(n * f, n * f);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      stacked.block(i * f, j * f, f, f) =
          root[i] * submatrix(head_block(gram, d, members[i], members[j]), entries) * root[j];
  // Only the top f eigenpairs are used: LAPACK computes just those (most of the refit's time).
  VectorD values;
  MatrixD vectors;
  top_symmetric_eigenpairs(stacked, static_cast<int>(f), values, vectors);
  const double top = values(f - 1);
  for (Index r = 0; r < f; ++r) {
    const Index column = f - 1 - r;
    const double lambda = values(column);
    if (!(lambda > top * 1e-12 * static_cast<double>(n * f))) continue;  // no such direction
    // An eigenvector's sign is the solver's choice (LAPACK's and Eigen's differ): its largest entry
    // is made positive so that the written rows do not depend on which one ran.
    Index peak = 0;
    vectors.col(column).cwiseAbs().maxCoeff(&peak);
    const double sign = vectors(peak, column) < 0 ? -1.0 : 1.0;
    const double scale = sign * std::sqrt(energy / static_cast<double>(n * f) / lambda);
    for (Index i = 0; i < n; ++i) {
      const VectorD row = root[i] * vectors.col(column).segment(i * f, f);
      for (Index c = 0; c < f; ++c) pool[i](entries[r], entries[c]) = scale * row(c);
    }
  }
}

/// K̄ K_iᵀ per member and K̄ K̄ᵀ of a group pooled with `pool` (one coefficient per member).
struct GroupCross {
  std::vector<MatrixD> cross;
  MatrixD pooled;
};

GroupCross group_cross(const MatrixD& gram, int d, const std::vector<int>& members,
                       const std::vector<MatrixD>& pool) {
  const std::size_t n = members.size();
  GroupCross out{std::vector<MatrixD>(n, MatrixD::Zero(d, d)), MatrixD::Zero(d, d)};
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j)
      out.cross[i] += rotate(pool[j], head_block(gram, d, members[j], members[i]));
    out.pooled += rotate_columns(out.cross[i], pool[i]);
  }
  return out;
}

/// M with query M Q: per RoPE plane the scaled rotation with K_p ≈ M_pᵀ K̄_p, elsewhere the
/// least-squares map M_fᵀ = K_f K̄_fᵀ (K̄_f K̄_fᵀ)⁺. `cross` = K̄ K_iᵀ, `pooled` = K̄ K̄ᵀ.
MatrixD query_map(const MatrixD& cross, const MatrixD& pooled, const KeyGauge& gauge,
                  const std::vector<int>& entries) {
  MatrixD m = MatrixD::Zero(cross.rows(), cross.cols());
  for (const auto& [a, b] : gauge.planes) {
    const double norm = pooled(a, a) + pooled(b, b);
    if (!(norm > 0)) continue;
    const Complex c = plane_inner(cross.transpose(), a, b) / norm;  // K_p ≈ c K̄_p
    m(a, a) = m(b, b) = c.real();
    m(a, b) = c.imag();
    m(b, a) = -c.imag();
  }
  if (entries.empty()) return m;
  const MatrixD fitted = psd_pseudo_inverse(submatrix(pooled, entries)) * submatrix(cross, entries);
  for (std::size_t r = 0; r < entries.size(); ++r)
    for (std::size_t c = 0; c < entries.size(); ++c) m(entries[r], entries[c]) = fitted(r, c);
  return m;
}

/// Σ_{h→i} ‖A_h − Â_h‖² of one member: ⟨P, C_ii⟩ + tr(M P Mᵀ K̄K̄ᵀ) − 2 tr(P Mᵀ K̄ K_iᵀ).
double form_residual(const MatrixD& p, const MatrixD& own, const MatrixD& m, const MatrixD& cross,
                     const MatrixD& pooled) {
  const MatrixD mp = rotate(m, p);
  return p.cwiseProduct(own).sum() + rotate(m, mp.transpose()).cwiseProduct(pooled).sum() -
         2 * mp.cwiseProduct(cross).sum();
}

}  // namespace

namespace {

void check_refit_inputs(const PlanLayerGrams& grams, const std::vector<MatrixD>& query_sum,
                        const KeyGauge& keys) {
  if (keys.kind == KeyGauge::Kind::none)
    throw Error("", "--refit " + std::string(kRefitNeedsAlignment));
  if (query_sum.empty() || grams.outputs.size() == 0)
    throw Error("",
                "the refit needs the layer's query and output projections (--no-refit: the "
                "mean-pool needs neither)");
}

std::vector<int> all_entries(int d) {
  std::vector<int> all(d);
  for (int e = 0; e < d; ++e) all[e] = e;
  return all;
}

/// The entries whose keys take a least-squares map: partial rotary's free ones, or all.
std::vector<int> key_entries(const KeyGauge& keys, int d) {
  return keys.kind == KeyGauge::Kind::rope_planes ? keys.free_entries : all_entries(d);
}

/// One group's key pool (per member, in the group's order).
std::vector<MatrixD> key_pool_of(const PlanLayerGrams& grams, const std::vector<MatrixD>& query_sum,
                                 const std::vector<int>& group, const KeyGauge& keys) {
  const int d = grams.head_dim;
  std::vector<MatrixD> pool(group.size(), MatrixD::Zero(d, d));
  for (const auto& [a, b] : keys.planes) pool_plane(grams.keys, d, group, query_sum, a, b, pool);
  const std::vector<int> entries = key_entries(keys, d);
  if (!entries.empty()) pool_subspace(grams.keys, d, group, query_sum, entries, pool);
  return pool;
}

}  // namespace

double refit_qk_residual(const PlanLayerGrams& grams, const std::vector<MatrixD>& query_sum,
                         const std::vector<int>& group, const KeyGauge& keys) {
  check_refit_inputs(grams, query_sum, keys);
  const int d = grams.head_dim;
  const std::vector<MatrixD> pool = key_pool_of(grams, query_sum, group, keys);
  const GroupCross k = group_cross(grams.keys, d, group, pool);
  const std::vector<int> entries = key_entries(keys, d);
  double sum = 0;
  for (std::size_t i = 0; i < group.size(); ++i)
    sum += form_residual(query_sum[group[i]], head_block(grams.keys, d, group[i], group[i]),
                         query_map(k.cross[i], k.pooled, keys, entries), k.cross[i], k.pooled);
  return std::max(0.0, sum);
}

Refit refit_partition(const PlanLayerGrams& grams, const std::vector<MatrixD>& query_sum,
                      const Partition& partition, const KeyGauge& keys) {
  check_refit_inputs(grams, query_sum, keys);
  const int d = grams.head_dim, kv = grams.kv_heads();
  std::vector<MatrixD> output_sum(kv, MatrixD::Zero(d, d));
  for (std::size_t h = 0; h < grams.kv_of_head.size(); ++h)
    output_sum[grams.kv_of_head[h]] += grams.outputs.middleRows(Index(h) * d, d);
  const std::vector<int> entries = key_entries(keys, d);
  Refit refit;
  refit.key_pool.assign(kv, MatrixD::Zero(d, d));
  refit.value_pool = refit.query_maps = refit.output_maps = refit.key_pool;
  for (const auto& group : partition) {
    const std::vector<MatrixD> key_pool = key_pool_of(grams, query_sum, group, keys);
    std::vector<MatrixD> value_pool(group.size(), MatrixD::Zero(d, d));
    pool_subspace(grams.values, d, group, output_sum, all_entries(d), value_pool);
    const GroupCross k = group_cross(grams.keys, d, group, key_pool);
    const GroupCross v = group_cross(grams.values, d, group, value_pool);
    const MatrixD value_inverse = psd_pseudo_inverse(v.pooled);
    for (std::size_t i = 0; i < group.size(); ++i) {
      const int head = group[i];
      refit.key_pool[head] = key_pool[i];
      refit.value_pool[head] = value_pool[i];
      refit.query_maps[head] = query_map(k.cross[i], k.pooled, keys, entries);
      refit.output_maps[head] = (value_inverse * v.cross[i]).transpose();  // V_i V̄ᵀ (V̄V̄ᵀ)⁺
      refit.qk_residual += form_residual(query_sum[head], head_block(grams.keys, d, head, head),
                                         refit.query_maps[head], k.cross[i], k.pooled);
    }
  }
  refit.qk_residual = std::max(0.0, refit.qk_residual);
  return refit;
}

MatrixD refit_pooled_keys(const PlanLayerGrams& grams, const Partition& partition,
                          const std::vector<MatrixD>& key_pool) {
  const int d = grams.head_dim;
  const Index groups = static_cast<Index>(partition.size());
  MatrixD pooled = MatrixD::Zero(groups * d, groups * d);
  for (Index a = 0; a < groups; ++a) {
    MatrixD rows = MatrixD::Zero(d, grams.keys.cols());  // K̄_a Kᵀ
    for (int i : partition[a]) rows += rotate(key_pool[i], grams.keys.middleRows(Index(i) * d, d));
    for (Index b = 0; b < groups; ++b)
      for (int j : partition[b])
        head_block(pooled, d, int(a), int(b)) +=
            rotate_columns(rows.middleCols(Index(j) * d, d), key_pool[j]);
  }
  return pooled;
}

}  // namespace kvrank::detail

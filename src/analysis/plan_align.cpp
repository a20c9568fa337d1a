// Aligning heads before they are mean-pooled (docs/plan.md): the gauge a model leaves free, and
// the transforms within it that bring a group's heads closest together.
//
// For a group X_1 … X_n (d_h × d rows of one projection) and transforms R_i of the gauge,
//   Σ_i ‖R_i X_i − X̄‖²_F = Σ_i ‖X_i‖² − (1/n) Σ_ij tr(R_i C_ij R_jᵀ),   C_ij = X_i X_jᵀ,
// so only the d_h × d_h cross-Grams C_ij are read. With all R_j but R_i fixed, the best R_i
// maximises tr(R_i N_i), N_i = Σ_{j≠i} C_ij R_jᵀ: for O(d_h) the polar factor of N_iᵀ (the
// maximum is the nuclear norm), per RoPE plane the 2 × 2 rotation by atan2(N_ab − N_ba, N_aa +
// N_bb) (only rotations commute with RoPE, not reflections). A pair is one such step (R_1 = I),
// exact; larger groups repeat the step over members (generalised Procrustes), which never raises
// the residual but may stop at a local optimum.
#include <Eigen/Eigenvalues>
#include <cmath>

#include "analysis/plan_detail.hpp"
#include "kvrank/base/error.hpp"
#include "metric/blas.hpp"

namespace kvrank {
namespace {

constexpr int kMaxSweeps = 50;
constexpr double kSweepTolerance = 1e-9;

/// The orthogonal R maximising tr(R M): with M = U Σ Wᵀ, R = W Uᵀ.
MatrixD polar_transform(const MatrixD& m) {
  MatrixD u, w;
  detail::singular_vectors(m, u, w);
  return w * u.transpose();
}

}  // namespace

std::string_view rope_convention_name(RopeConvention convention) noexcept {
  switch (convention) {
    case RopeConvention::rotate_half:
      return "rotate_half";
    case RopeConvention::interleaved:
      return "interleaved";
    case RopeConvention::none:
      break;
  }
  return "none";
}

RopeConvention parse_rope_convention(std::string_view name) {
  for (auto convention :
       {RopeConvention::none, RopeConvention::rotate_half, RopeConvention::interleaved})
    if (name == rope_convention_name(convention)) return convention;
  throw Error("", "unknown RoPE convention '" + std::string(name) +
                      "' (expected rotate_half, interleaved or none)");
}

KeyGauge key_gauge(const RopeLayout& rope, int head_dim, bool align) {
  KeyGauge gauge;
  if (!align) {
    gauge.kind = KeyGauge::Kind::none;
    return gauge;
  }
  if (rope.convention == RopeConvention::none || rope.rotary_dims == 0) return gauge;
  gauge.kind = KeyGauge::Kind::rope_planes;
  const int half = rope.rotary_dims / 2;
  for (int f = 0; f < half; ++f) {
    if (rope.convention == RopeConvention::rotate_half)
      gauge.planes.emplace_back(f, f + half);
    else
      gauge.planes.emplace_back(2 * f, 2 * f + 1);
  }
  for (int e = rope.rotary_dims; e < head_dim; ++e) gauge.free_entries.push_back(e);
  return gauge;
}

std::string key_gauge_name(const KeyGauge& gauge, const RopeLayout& rope, int head_dim) {
  if (gauge.kind == KeyGauge::Kind::none) return "none";
  if (gauge.kind == KeyGauge::Kind::orthogonal) return "orthogonal";
  std::string name = "rope_planes(" + std::string(rope_convention_name(rope.convention));
  if (rope.rotary_dims < head_dim)
    name += ", " + std::to_string(rope.rotary_dims) + " of " + std::to_string(head_dim);
  return name + ")";
}

namespace detail {

MatrixD psd_root(const MatrixD& m) {
  Eigen::SelfAdjointEigenSolver<MatrixD> solver(m);
  const VectorD root = solver.eigenvalues().cwiseMax(0.0).cwiseSqrt();
  return solver.eigenvectors() * root.asDiagonal() * solver.eigenvectors().transpose();
}

MatrixD best_transform(const MatrixD& m, const KeyGauge& gauge) {
  const Index d = m.rows();
  if (gauge.kind == KeyGauge::Kind::none) return MatrixD::Identity(d, d);
  if (gauge.kind == KeyGauge::Kind::orthogonal) return polar_transform(m);
  MatrixD r = MatrixD::Zero(d, d);
  for (const auto& [a, b] : gauge.planes) {
    const double angle = std::atan2(m(a, b) - m(b, a), m(a, a) + m(b, b));
    const double c = std::cos(angle);
    const double s = std::sin(angle);
    r(a, a) = c;
    r(a, b) = -s;
    r(b, a) = s;
    r(b, b) = c;
  }
  if (!gauge.free_entries.empty()) {
    const Index n = static_cast<Index>(gauge.free_entries.size());
    MatrixD sub(n, n);
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < n; ++j) sub(i, j) = m(gauge.free_entries[i], gauge.free_entries[j]);
    const MatrixD free = polar_transform(sub);
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < n; ++j) r(gauge.free_entries[i], gauge.free_entries[j]) = free(i, j);
  }
  return r;
}

namespace {

/// (1/n) Σ_ij tr(R_i C_ij R_jᵀ) = n ‖X̄‖². Every R is orthogonal, so the diagonal terms are
/// tr(C_ii), and tr(R_i C_ij R_jᵀ) = ⟨C_ij, R_iᵀ R_j⟩ is the same for (j, i): one d_h³ product per
/// pair instead of two per ordered pair.
double pooled_energy(const MatrixD& gram, int head_dim, const std::vector<int>& members,
                     const std::vector<MatrixD>& rotations) {
  double sum = 0;
  const std::size_t n = members.size();
  for (std::size_t i = 0; i < n; ++i) {
    sum += head_block(gram, head_dim, members[i], members[i]).trace();
    for (std::size_t j = i + 1; j < n; ++j) {
      // ⟨C_ij, R_iᵀ R_j⟩ = ⟨R_i C_ij, R_j⟩
      const MatrixD rotated =
          rotate(rotations[i], head_block(gram, head_dim, members[i], members[j]));
      sum += 2 * rotated.cwiseProduct(rotations[j]).sum();
    }
  }
  return sum / static_cast<double>(n);
}

/// N_i = Σ_{j≠i} C_ij R_jᵀ = (Σ_{j≠i} R_j C_ji)ᵀ (the Gram is symmetric).
MatrixD others_sum(const MatrixD& gram, int head_dim, const std::vector<int>& members,
                   const std::vector<MatrixD>& rotations, std::size_t i) {
  MatrixD sum = MatrixD::Zero(head_dim, head_dim);
  for (std::size_t j = 0; j < members.size(); ++j)
    if (j != i) sum += rotate(rotations[j], head_block(gram, head_dim, members[j], members[i]));
  return sum.transpose();
}

}  // namespace

GroupFit align_group(const MatrixD& gram, int head_dim, const std::vector<int>& members,
                     const KeyGauge& gauge) {
  const std::size_t n = members.size();
  GroupFit fit;
  fit.rotations.assign(n, MatrixD::Identity(head_dim, head_dim));
  double own = 0;
  for (int member : members) own += head_block(gram, head_dim, member, member).trace();
  if (gauge.kind != KeyGauge::Kind::none) {
    // Start: every member aligned to the first (for a pair, the optimum).
    for (std::size_t i = 1; i < n; ++i)
      fit.rotations[i] = best_transform(head_block(gram, head_dim, members[i], members[0]), gauge);
    double energy = pooled_energy(gram, head_dim, members, fit.rotations);
    for (int sweep = 0; n > 2 && sweep < kMaxSweeps; ++sweep) {
      std::vector<MatrixD> next = fit.rotations;
      for (std::size_t i = 0; i < n; ++i)
        next[i] = best_transform(others_sum(gram, head_dim, members, next, i), gauge);
      const double next_energy = pooled_energy(gram, head_dim, members, next);
      if (!(next_energy > energy + kSweepTolerance * std::max(own, 1e-300))) break;
      fit.rotations = std::move(next);
      energy = next_energy;
    }
  }
  fit.residual = std::max(0.0, own - pooled_energy(gram, head_dim, members, fit.rotations));
  return fit;
}

}  // namespace detail
}  // namespace kvrank

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
  return detail::product(w, u.transpose());
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

/// The generalised Procrustes state of one group: its transforms R_i and the products
/// T_ij = R_i C_ij (i ≠ j) that both the sweeps and the energy read. A sweep replaces each R_i in
/// turn and then recomputes the n − 1 products of its row, so the energy after a sweep costs no
/// further product (n(n − 1) products per sweep instead of n(n − 1) + n(n − 1)/2, the same
/// numbers bit for bit: every product and sum is formed as before).
class GroupAlignment {
 public:
  GroupAlignment(const MatrixD& gram, int head_dim, const std::vector<int>& members)
      : gram_(gram), head_dim_(head_dim), members_(members) {
    const std::size_t n = members.size();
    rotations.assign(n, MatrixD::Identity(head_dim, head_dim));
    products_.assign(n * n, MatrixD());
  }

  /// C_ij.
  auto block(std::size_t i, std::size_t j) const {
    return head_block(gram_, head_dim_, members_[i], members_[j]);
  }

  /// T_ij for j in [first, last), j ≠ i, from the current R_i.
  void refresh(std::size_t i, std::size_t first, std::size_t last) {
    for (std::size_t j = first; j < last; ++j)
      if (j != i) stored(i, j) = rotate(rotations[i], block(i, j));
  }

  /// (1/n) Σ_ij tr(R_i C_ij R_jᵀ) = n ‖X̄‖². Every R is orthogonal, so the diagonal terms are
  /// tr(C_ii), and tr(R_i C_ij R_jᵀ) = ⟨R_i C_ij, R_j⟩ is the same for (j, i): the upper products.
  double energy() const {
    double sum = 0;
    const std::size_t n = members_.size();
    for (std::size_t i = 0; i < n; ++i) {
      sum += block(i, i).trace();
      for (std::size_t j = i + 1; j < n; ++j)
        sum += 2 * products_[i * n + j].cwiseProduct(rotations[j]).sum();
    }
    return sum / static_cast<double>(n);
  }

  /// N_i = Σ_{j≠i} C_ij R_jᵀ = (Σ_{j≠i} R_j C_ji)ᵀ (the Gram is symmetric).
  MatrixD others_sum(std::size_t i) const {
    MatrixD sum = MatrixD::Zero(head_dim_, head_dim_);
    for (std::size_t j = 0; j < members_.size(); ++j)
      if (j != i) sum += products_[j * members_.size() + i];
    return sum.transpose();
  }

  std::vector<MatrixD> rotations;

 private:
  MatrixD& stored(std::size_t i, std::size_t j) { return products_[i * members_.size() + j]; }

  const MatrixD& gram_;
  int head_dim_;
  const std::vector<int>& members_;
  std::vector<MatrixD> products_;  ///< T_ij at i · n + j
};

}  // namespace

GroupFit align_group(const MatrixD& gram, int head_dim, const std::vector<int>& members,
                     const KeyGauge& gauge) {
  const std::size_t n = members.size();
  GroupAlignment group(gram, head_dim, members);
  double own = 0;
  for (int member : members) own += head_block(gram, head_dim, member, member).trace();
  if (gauge.kind == KeyGauge::Kind::none) {
    for (std::size_t i = 0; i < n; ++i) group.refresh(i, i + 1, n);
    const double residual = std::max(0.0, own - group.energy());  // before the move below
    return {std::move(group.rotations), residual};
  }
  // Start: every member aligned to the first (for a pair, the optimum).
  for (std::size_t i = 1; i < n; ++i)
    group.rotations[i] = best_transform(head_block(gram, head_dim, members[i], members[0]), gauge);
  for (std::size_t i = 0; i < n; ++i) group.refresh(i, i + 1, n);
  double energy = group.energy();
  if (n > 2)  // the sweeps read the lower products too
    for (std::size_t i = 1; i < n; ++i) group.refresh(i, 0, i);
  std::vector<MatrixD> accepted = group.rotations;
  for (int sweep = 0; n > 2 && sweep < kMaxSweeps; ++sweep) {
    for (std::size_t i = 0; i < n; ++i) {
      group.rotations[i] = best_transform(group.others_sum(i), gauge);
      group.refresh(i, 0, n);
    }
    const double next_energy = group.energy();
    if (!(next_energy > energy + kSweepTolerance * std::max(own, 1e-300))) break;
    accepted = group.rotations;
    energy = next_energy;
  }
  return {std::move(accepted), std::max(0.0, own - energy)};
}

}  // namespace detail
}  // namespace kvrank

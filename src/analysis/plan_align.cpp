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
#include "kvrank/base/name_table.hpp"
#include "metric/blas.hpp"

namespace kvrank {
namespace {

// The sweeps stop when one raises the energy by less than a tolerance relative to Σ_i ‖X_i‖².
// Sweeps on dense transforms (values; keys without RoPE) cost n SVDs of d_h × d_h each, most of a
// large layer's plan, and stop at 1e-7 (or earlier where the sweeps still to come are estimated to
// add less, procrustes_sweeps): the errors then lie within 2.1e-7 relative of fully converged
// sweeps on a 7B-shaped layer (docs/plan.md "Cost"), far below what the float32 Grams carry, for
// over a third fewer sweeps than at 1e-9. RoPE-plane sweeps are 2 × 2 products and stop at 1e-9.
constexpr int kMaxSweeps = 50;
constexpr double kDenseSweepTolerance = 1e-7;
constexpr double kPlaneSweepTolerance = 1e-9;

constexpr std::array<Named<RopeConvention>, 3> kRopeConventions{
    {{RopeConvention::none, "none"},
     {RopeConvention::rotate_half, "rotate_half"},
     {RopeConvention::interleaved, "interleaved"}}};
static_assert(in_enum_order(kRopeConventions));

/// The orthogonal R maximising tr(R M): with M = U Σ Wᵀ, R = W Uᵀ.
MatrixD polar_transform(const MatrixD& m) {
  MatrixD u, w;
  detail::singular_vectors(m, u, w);
  return detail::product(w, u.transpose());
}

}  // namespace

std::string_view rope_convention_name(RopeConvention convention) noexcept {
  return name_of(kRopeConventions, convention);
}

std::vector<std::string> rope_convention_names() { return names_of(kRopeConventions); }

RopeConvention parse_rope_convention(std::string_view name) {
  if (const auto convention = value_named(kRopeConventions, name)) return *convention;
  throw Error("", "--rope: " + expected_name(kRopeConventions, name));
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
    const MatrixD free = polar_transform(submatrix(m, gauge.free_entries));
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
  static constexpr double kTolerance = kDenseSweepTolerance;
  static constexpr bool kPredictStop = true;

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

  /// (1/n) Σ_{i≠j} tr(R_i C_ij R_jᵀ): the energy n ‖X̄‖² but for its diagonal terms, which are
  /// tr(C_ii) (every R is orthogonal); tr(R_i C_ij R_jᵀ) = ⟨R_i C_ij, R_j⟩ is the same for (j, i):
  /// the upper products.
  double cross_energy() const {
    double sum = 0;
    const std::size_t n = members_.size();
    for (std::size_t i = 0; i < n; ++i) {
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

  /// The start: every member aligned to the first (for a pair, the optimum).
  void start(const KeyGauge& gauge) {
    for (std::size_t i = 1; i < members_.size(); ++i)
      rotations[i] = best_transform(block(i, 0), gauge);
  }

  /// One step of a sweep: R_i the best transform against the others' sum.
  void update(std::size_t i, const KeyGauge& gauge) {
    rotations[i] = best_transform(others_sum(i), gauge);
  }

  std::vector<MatrixD> full_rotations() const { return rotations; }

  std::vector<MatrixD> rotations;

 private:
  MatrixD& stored(std::size_t i, std::size_t j) { return products_[i * members_.size() + j]; }

  const MatrixD& gram_;
  int head_dim_;
  const std::vector<int>& members_;
  std::vector<MatrixD> products_;  ///< T_ij at i · n + j
};

/// The same state where the gauge is RoPE planes: R_i is block diagonal (a 2 × 2 rotation per
/// plane, an orthogonal block on the free entries), so tr(R_i C_ij R_jᵀ) and the best R_i read
/// only the matching diagonal blocks of C_ij. The sweeps run on those blocks (2 × 2 products, one
/// free-block product) instead of d_h × d_h products of matrices that are almost all zeros;
/// every number read is formed from the same entries as a full product would.
class PlaneAlignment {
 public:
  static constexpr double kTolerance = kPlaneSweepTolerance;
  static constexpr bool kPredictStop = false;

  PlaneAlignment(const MatrixD& gram, int head_dim, const std::vector<int>& members,
                 const KeyGauge& gauge)
      : n_(members.size()), planes_(gauge.planes.size()), free_(gauge.free_entries) {
    const Index k = static_cast<Index>(free_.size());
    blocks_.resize(n_ * n_ * planes_);
    free_blocks_.assign(n_ * n_, MatrixD(k, k));
    for (std::size_t i = 0; i < n_; ++i)
      for (std::size_t j = 0; j < n_; ++j) {
        const auto c = head_block(gram, head_dim, members[i], members[j]);
        for (std::size_t p = 0; p < planes_; ++p) {
          const auto [a, b] = gauge.planes[p];
          blocks_[(i * n_ + j) * planes_ + p] << c(a, a), c(a, b), c(b, a), c(b, b);
        }
        for (Index x = 0; x < k; ++x)
          for (Index y = 0; y < k; ++y) free_blocks_[i * n_ + j](x, y) = c(free_[x], free_[y]);
      }
    rotations.planes.assign(n_ * planes_, Eigen::Matrix2d::Identity());
    rotations.free.assign(n_, MatrixD::Identity(k, k));
    products_ = {std::vector<Eigen::Matrix2d>(n_ * n_ * planes_),
                 std::vector<MatrixD>(n_ * n_, MatrixD(k, k))};
  }

  void start(const KeyGauge&) {
    for (std::size_t i = 1; i < n_; ++i) set_best(i, i * n_, free_blocks_[i * n_]);
  }

  void refresh(std::size_t i, std::size_t first, std::size_t last) {
    for (std::size_t j = first; j < last; ++j) {
      if (j == i) continue;
      for (std::size_t p = 0; p < planes_; ++p)
        products_.planes[(i * n_ + j) * planes_ + p] =
            rotations.planes[i * planes_ + p] * blocks_[(i * n_ + j) * planes_ + p];
      if (!free_.empty())
        products_.free[i * n_ + j] = product(rotations.free[i], free_blocks_[i * n_ + j]);
    }
  }

  /// (1/n) Σ_ij tr(R_i C_ij R_jᵀ) without the diagonal terms Σ_i tr(C_ii) (added by the caller).
  double cross_energy() const {
    double sum = 0;
    for (std::size_t i = 0; i < n_; ++i)
      for (std::size_t j = i + 1; j < n_; ++j) {
        for (std::size_t p = 0; p < planes_; ++p)
          sum += 2 * products_.planes[(i * n_ + j) * planes_ + p]
                         .cwiseProduct(rotations.planes[j * planes_ + p])
                         .sum();
        if (!free_.empty())
          sum += 2 * products_.free[i * n_ + j].cwiseProduct(rotations.free[j]).sum();
      }
    return sum / static_cast<double>(n_);
  }

  void update(std::size_t i, const KeyGauge&) {
    // N_i = (Σ_{j≠i} T_ji)ᵀ per block, as GroupAlignment::others_sum.
    std::vector<Eigen::Matrix2d> sums(planes_, Eigen::Matrix2d::Zero());
    MatrixD free_sum = MatrixD::Zero(Index(free_.size()), Index(free_.size()));
    for (std::size_t j = 0; j < n_; ++j) {
      if (j == i) continue;
      for (std::size_t p = 0; p < planes_; ++p)
        sums[p] += products_.planes[(j * n_ + i) * planes_ + p];
      if (!free_.empty()) free_sum += products_.free[j * n_ + i];
    }
    for (auto& sum : sums) sum.transposeInPlace();
    set_best(i, sums, free_sum.transpose());
  }

  struct Transforms {
    std::vector<Eigen::Matrix2d> planes;  ///< per member, per plane
    std::vector<MatrixD> free;            ///< per member
  } rotations;

  std::vector<MatrixD> full_rotations(const KeyGauge& gauge, int head_dim) const {
    std::vector<MatrixD> out(n_, MatrixD::Zero(head_dim, head_dim));
    for (std::size_t i = 0; i < n_; ++i) {
      for (std::size_t p = 0; p < planes_; ++p) {
        const auto [a, b] = gauge.planes[p];
        const Eigen::Matrix2d& r = rotations.planes[i * planes_ + p];
        out[i](a, a) = r(0, 0), out[i](a, b) = r(0, 1), out[i](b, a) = r(1, 0),
                  out[i](b, b) = r(1, 1);
      }
      for (std::size_t x = 0; x < free_.size(); ++x)
        for (std::size_t y = 0; y < free_.size(); ++y)
          out[i](free_[x], free_[y]) = rotations.free[i](Index(x), Index(y));
    }
    return out;
  }

 private:
  /// The rotation maximising tr(R m) on each plane (see best_transform), the polar factor on the
  /// free block.
  void set_best(std::size_t i, std::size_t first_block, const MatrixD& free_m) {
    std::vector<Eigen::Matrix2d> m(blocks_.begin() + Index(first_block * planes_),
                                   blocks_.begin() + Index((first_block + 1) * planes_));
    set_best(i, m, free_m);
  }
  void set_best(std::size_t i, const std::vector<Eigen::Matrix2d>& m, const MatrixD& free_m) {
    for (std::size_t p = 0; p < planes_; ++p) {
      const double angle = std::atan2(m[p](0, 1) - m[p](1, 0), m[p](0, 0) + m[p](1, 1));
      const double c = std::cos(angle), s = std::sin(angle);
      rotations.planes[i * planes_ + p] << c, -s, s, c;
    }
    if (!free_.empty()) rotations.free[i] = polar_transform(free_m);
  }

  std::size_t n_, planes_;
  const std::vector<int>& free_;
  std::vector<Eigen::Matrix2d> blocks_;  ///< C_ij on plane p at (i · n + j) · planes + p
  std::vector<MatrixD> free_blocks_;     ///< C_ij on the free entries at i · n + j
  Transforms products_;                  ///< T_ij = R_i C_ij, laid out as blocks_ and free_blocks_
};

/// Generalised Procrustes sweeps from the start until a sweep raises the energy by less than the
/// tolerance; `group` keeps the last accepted transforms. Returns (1/n) Σ_ij tr(R_i C_ij R_jᵀ).
template <class Group>
double procrustes_sweeps(Group& group, std::size_t n, double traces, const KeyGauge& gauge) {
  group.start(gauge);
  for (std::size_t i = 0; i < n; ++i) group.refresh(i, i + 1, n);
  double energy = traces / static_cast<double>(n) + group.cross_energy();
  if (n <= 2) return energy;
  for (std::size_t i = 1; i < n; ++i) group.refresh(i, 0, i);  // the sweeps read these too
  auto accepted = group.rotations;
  const double tolerance = Group::kTolerance * std::max(traces, 1e-300);
  double gain = 0;  // the last accepted sweep's rise in energy
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    for (std::size_t i = 0; i < n; ++i) {
      group.update(i, gauge);
      group.refresh(i, 0, n);
    }
    const double next_energy = traces / static_cast<double>(n) + group.cross_energy();
    const double next_gain = next_energy - energy;
    if (!(next_gain > tolerance)) break;
    accepted = group.rotations;
    energy = next_energy;
    // The sweeps converge linearly: those still to come would add about g ρ / (1 − ρ), g this
    // sweep's gain and ρ its ratio to the last one. Where that is below the tolerance the sweep
    // that would only confirm it is skipped (dense sweeps: n SVDs each).
    if (Group::kPredictStop && gain > 0 && next_gain < gain &&
        next_gain * next_gain / (gain - next_gain) < tolerance)
      break;
    gain = next_gain;
  }
  group.rotations = std::move(accepted);
  return energy;
}

}  // namespace

GroupFit align_group(const MatrixD& gram, int head_dim, const std::vector<int>& members,
                     const KeyGauge& gauge) {
  const std::size_t n = members.size();
  double own = 0;  // Σ_i ‖X_i‖² = Σ_i tr(C_ii)
  for (int member : members) own += head_block(gram, head_dim, member, member).trace();
  if (gauge.kind == KeyGauge::Kind::rope_planes) {
    PlaneAlignment group(gram, head_dim, members, gauge);
    const double energy = procrustes_sweeps(group, n, own, gauge);
    return {group.full_rotations(gauge, head_dim), std::max(0.0, own - energy)};
  }
  GroupAlignment group(gram, head_dim, members);
  if (gauge.kind == KeyGauge::Kind::none) {
    for (std::size_t i = 0; i < n; ++i) group.refresh(i, i + 1, n);
    const double energy = own / static_cast<double>(n) + group.cross_energy();
    return {std::move(group.rotations), std::max(0.0, own - energy)};
  }
  const double energy = procrustes_sweeps(group, n, own, gauge);
  return {std::move(group.rotations), std::max(0.0, own - energy)};
}

}  // namespace detail
}  // namespace kvrank

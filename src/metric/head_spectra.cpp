// The heads' singular values for head_erank (head_spectra.hpp).
#include "metric/head_spectra.hpp"

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <limits>

#include "metric/blas.hpp"

namespace kvrank::detail {

void zero_round_off(std::vector<double>& values, double scale) {
  const double noise = static_cast<double>(values.size()) * std::numeric_limits<double>::epsilon() *
                       std::max(scale, 0.0);
  for (double& value : values) {
    if (value <= noise) value = 0.0;
  }
}

namespace {

/// Symmetric square root of a positive semi-definite matrix (negative round-off clipped).
MatrixD psd_sqrt(const MatrixD& psd) {
  Eigen::SelfAdjointEigenSolver<MatrixD> solver(psd);
  const VectorD roots = solver.eigenvalues().cwiseMax(0.0).cwiseSqrt();
  return solver.eigenvectors() * roots.asDiagonal() * solver.eigenvectors().transpose();
}

/// σ(A_h) from the ascending eigenvalues of P·Q (`squares`: they are σ², A = L Rᵀ) or of P (A =
/// L Lᵀ, positive semi-definite: they are σ), round-off below the largest set to 0.
std::vector<double> sigma_from(std::vector<double> ascending, bool squares) {
  std::reverse(ascending.begin(), ascending.end());
  zero_round_off(ascending, ascending.empty() ? 0.0 : ascending.front());
  if (squares) {
    for (double& value : ascending) value = std::sqrt(value);
  }
  return ascending;
}

/// Singular values of A = L Rᵀ from P = LᵀL and Q = RᵀR: σ² = λ(Fᵀ Q F) for any F with P = F Fᵀ
/// (Cholesky when P is positive definite — LAPACK dsygv — else P's symmetric square root).
/// Without Q, A = L Lᵀ is positive semi-definite and σ = λ(P).
std::vector<double> singular_values(const MatrixD& p, const MatrixD* q) {
  if (!q) return sigma_from(symmetric_eigenvalues(p), false);
  std::optional<std::vector<double>> values = congruent_eigenvalues(p, *q);
  if (!values) {
    const MatrixD root = psd_sqrt(p);
    values = symmetric_eigenvalues(root * (*q) * root);
  }
  return sigma_from(std::move(*values), true);
}

/// A call of the lane solver costs about the same for 1 and for 8 heads (0.2 ms a head of 8 at
/// order 128, one thread): for 3 heads and more it beats LAPACK's 0.55 ms a head.
constexpr std::size_t kLanesPayFrom = 3;

}  // namespace

std::vector<std::vector<double>> head_singular_values(const std::vector<SelfProducts>& heads) {
  std::vector<std::optional<std::vector<double>>> values(heads.size());
  if (eigen_lanes_supported() && heads.size() >= kLanesPayFrom) {
    std::vector<EigenProblem> problems;
    for (const auto& [p, q] : heads) problems.push_back({&p, q ? &*q : nullptr});
    values = lane_eigenvalues(problems);
  }
  std::vector<std::vector<double>> sigmas;
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const auto& [p, q] = heads[h];
    sigmas.push_back(values[h] ? sigma_from(std::move(*values[h]), q.has_value())
                               : singular_values(p, q ? &*q : nullptr));
  }
  return sigmas;
}

std::vector<std::pair<Index, Index>> eigen_tasks(Index count) {
  std::vector<std::pair<Index, Index>> tasks;
  for (Index first = 0; first < count; first += kEigenLanes) {
    const Index last = std::min(count, first + kEigenLanes);
    if (last - first >= static_cast<Index>(kLanesPayFrom)) {
      tasks.emplace_back(first, last);
    } else {
      for (Index i = first; i < last; ++i) tasks.emplace_back(i, i + 1);
    }
  }
  return tasks;
}

}  // namespace kvrank::detail

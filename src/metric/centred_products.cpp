// The centred sums of centred_products.hpp (the algebra is there).
#include "metric/centred_products.hpp"

#include <algorithm>
#include <cmath>

#include "metric/side_gram.hpp"

namespace kvrank::detail {
namespace {

/// Columns of a chunk scaled and centred together: the heads' stretches of them stay in cache
/// between the mean and the subtraction.
constexpr Index kColumnBlock = 256;

/// Per block of columns: f (column 0), b (column 1, row 0), kept apart so that the sums do not
/// depend on the threads.
using BlockSums = MatrixD;

}  // namespace

MatrixD double_centred(const MatrixD& symmetric) {
  if (symmetric.size() == 0) return symmetric;  // no mean to take
  const VectorD row_means = symmetric.rowwise().mean();
  const double grand_mean = row_means.mean();
  MatrixD centred = symmetric;
  centred.colwise() -= row_means;
  centred.rowwise() -= row_means.transpose();
  centred.array() += grand_mean;
  return 0.5 * (centred + centred.transpose());
}

MatrixD CentredProducts::scaled_inner() const {
  const MatrixD out =
      e + centred * f.transpose() + f * centred.transpose() + b * centred * centred.transpose();
  return 0.5 * (out + out.transpose());
}

MatrixD CentredProducts::inner() const {
  MatrixD out = scaled_inner();
  out.array() /= (scale * scale.transpose()).array();
  return out;
}

CentredAccumulator::CentredAccumulator(Index heads) {
  sums_.e = MatrixD::Zero(heads, heads);
  sums_.f = VectorD::Zero(heads);
  sums_.centred = VectorD::Zero(heads);
  sums_.scale = VectorD::Ones(heads);
}

void CentredAccumulator::choose_scale(const float* rows, Index columns, Index ld) {
  // A read of the first chunk (64 MB for V3), the other thread otherwise waiting.
#pragma omp parallel for schedule(static) if (worth_threads(sums_.scale.size() * columns))
  for (Index i = 0; i < sums_.scale.size(); ++i) {
    // In double: a float32 sum of squares of rows near 1e-25 or 1e25 underflows or overflows.
    const double square =
        Eigen::Map<const Eigen::VectorXf>(rows + i * ld, columns).cast<double>().squaredNorm();
    if (square > 0) sums_.scale[i] = 1.0 / std::sqrt(square), sums_.centred[i] = 1.0;
  }
  scaled_ = true;
}

void CentredAccumulator::add(float* rows, Index columns, Index ld, FloatKernels kernels) {
  const Index heads = sums_.scale.size();
  if (heads == 0 || columns == 0) return;
  if (!centring_ && add_uncentred(syrk_double(kernels, heads, columns, rows, ld))) return;
  centring_ = true;
  add_centred(rows, columns, ld, kernels);
}

bool CentredAccumulator::add_uncentred(const MatrixD& plain) {
  // Below it, terms of up to 2^-126 (float32's smallest normal) that underflowed, summed over any
  // chunk (< 2^17 columns), are below 2^-24 of the sum of squares.
  const double smallest_square = std::ldexp(1.0, -80);
  if (!plain.allFinite() || !(plain.diagonal().minCoeff() >= smallest_square)) return false;
  const VectorD scale =
      scaled_ ? sums_.scale : VectorD(plain.diagonal().cwiseSqrt().cwiseInverse());
  const MatrixD scaled = scale.asDiagonal() * plain * scale.asDiagonal();  // W Wᵀ
  // Every head is centred here (t = 1: the first chunk took this path too, or this is it). Loops,
  // not Eigen's reductions, which drew GCC's maybe-uninitialized here under -O3.
  const Index heads = scaled.rows();
  double energy = 0, sum = 0;  // Σ_i ‖w_i‖², Σ_ij ⟨w_i, w_j⟩
  for (Index j = 0; j < heads; ++j) {
    energy += scaled(j, j);
    for (Index i = 0; i < heads; ++i) sum += scaled(i, j);
  }
  const auto count = static_cast<double>(heads);
  const double mean_energy = energy / count;         // mean ‖w_i‖²
  const double mean_square = sum / (count * count);  // ‖r‖²
  if (mean_square > 0.5 * mean_energy) return false;
  if (!scaled_) {
    sums_.scale = scale;
    sums_.centred.setOnes();
    scaled_ = true;
  }
  sums_.e += scaled;
  return true;
}

void CentredAccumulator::add_centred(float* rows, Index columns, Index ld, FloatKernels kernels) {
  const Index heads = sums_.scale.size();
  if (!scaled_) choose_scale(rows, columns, ld);
  const Eigen::ArrayXf s = sums_.scale.cast<float>();
  const Eigen::ArrayXf t = sums_.centred.cast<float>();
  const float count = t.sum();
  const Index blocks = (columns + kColumnBlock - 1) / kColumnBlock;
  BlockSums parts = BlockSums::Zero(heads, 2 * blocks);
#pragma omp parallel for schedule(static) if (worth_threads(heads * columns))
  for (Index block = 0; block < blocks; ++block) {
    const Index first = block * kColumnBlock;
    const Index width = std::min(kColumnBlock, columns - first);
    auto head = [&](Index i) { return Eigen::Map<Eigen::ArrayXf>(rows + i * ld + first, width); };
    Eigen::ArrayXf mean = Eigen::ArrayXf::Zero(width);
    for (Index i = 0; i < heads; ++i)
      if (t[i] != 0) mean += s[i] * head(i);
    if (count > 0) mean /= count;
    parts(0, 2 * block + 1) = mean.matrix().cast<double>().squaredNorm();
    for (Index i = 0; i < heads; ++i) {
      if (t[i] != 0) {
        head(i) = s[i] * head(i) - mean;
      } else {
        head(i) *= s[i];
      }
      parts(i, 2 * block) = (head(i) * mean).sum();
    }
  }
  for (Index block = 0; block < blocks; ++block) {
    sums_.f += parts.col(2 * block);
    sums_.b += parts(0, 2 * block + 1);
  }
  sums_.e += syrk_double(kernels, heads, columns, rows, ld);
}

MatrixD centred_similarity(const CentredProducts& products, const std::vector<int>& kept) {
  const auto n = static_cast<Index>(kept.size());
  const MatrixD scaled = products.scaled_inner();
  VectorD unit(n), centred(n), along(n);  // Λ, Λ t, Λ f
  for (Index p = 0; p < n; ++p) {
    const int i = kept[p];
    unit[p] = 1.0 / std::sqrt(scaled(i, i));
    centred[p] = unit[p] * products.centred[i];
    along[p] = unit[p] * products.f[i];
  }
  MatrixD small(n, n);
  for (Index p = 0; p < n; ++p)
    for (Index q = 0; q < n; ++q) small(p, q) = products.e(kept[p], kept[q]) * unit[p] * unit[q];
  if (n > 0) {
    centred.array() -= centred.mean();  // J Λ t
    along.array() -= along.mean();      // J Λ f
  }
  MatrixD out = double_centred(small);
  out += centred * along.transpose() + along * centred.transpose() +
         products.b * centred * centred.transpose();
  return 0.5 * (out + out.transpose());
}

}  // namespace kvrank::detail

// align_group with the "none" gauge (`kvrank plan --gauge none`): the members are pooled as they
// are, so every map is the identity and the residual is the plain spread around the mean,
// Σ_i ‖X_i − X̄‖²_F, computed here from the heads themselves. An e2e run of --gauge none once
// crashed in this path; no unit test ran it.
#include <random>

#include "analysis/plan_detail.hpp"
#include "kvrank/analysis/plan.hpp"
#include "support/catch.hpp"

using namespace kvrank;

namespace {

/// `count` heads of d × width: a shared part plus each head's own, so that the spread is neither
/// zero nor the heads' whole energy.
std::vector<MatrixD> related_heads(int count, int d, int width, std::mt19937& rng) {
  std::normal_distribution<double> normal;
  const auto random = [&] {
    MatrixD m(d, width);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
    return m;
  };
  const MatrixD shared = random();
  std::vector<MatrixD> heads;
  for (int h = 0; h < count; ++h) heads.push_back(shared + 0.5 * random());
  return heads;
}

/// The Gram of the heads' stacked rows (head i's rows are block i).
MatrixD stacked_gram(const std::vector<MatrixD>& heads) {
  const Index d = heads.front().rows();
  MatrixD stacked(Index(heads.size()) * d, heads.front().cols());
  for (std::size_t h = 0; h < heads.size(); ++h) stacked.middleRows(Index(h) * d, d) = heads[h];
  return stacked * stacked.transpose();
}

/// Σ_i ‖X_i − X̄‖²_F over the members, directly.
double spread(const std::vector<MatrixD>& heads, const std::vector<int>& members) {
  MatrixD mean = MatrixD::Zero(heads.front().rows(), heads.front().cols());
  for (int member : members) mean += heads[member];
  mean /= static_cast<double>(members.size());
  double sum = 0;
  for (int member : members) sum += (heads[member] - mean).squaredNorm();
  return sum;
}

}  // namespace

TEST_CASE("plan: the none gauge pools the heads as they are", "[plan]") {
  std::mt19937 rng(11);
  const int d = 5;
  const std::vector<MatrixD> heads = related_heads(6, d, 14, rng);
  const MatrixD gram = stacked_gram(heads);
  KeyGauge none;
  none.kind = KeyGauge::Kind::none;
  const std::vector<int> members =
      GENERATE(std::vector<int>{3}, std::vector<int>{0, 1}, std::vector<int>{4, 1},
               std::vector<int>{0, 2, 5}, std::vector<int>{1, 2, 3, 4});
  const detail::GroupFit fit = detail::align_group(gram, d, members, none);
  REQUIRE(fit.rotations.size() == members.size());
  for (const MatrixD& rotation : fit.rotations)
    CHECK((rotation - MatrixD::Identity(d, d)).norm() == 0);
  const double direct = spread(heads, members);
  CHECK(fit.residual == Approx(direct).epsilon(1e-10).margin(1e-12));
  if (members.size() > 1) {  // an aligned pool does at least as well
    KeyGauge orthogonal;
    CHECK(detail::align_group(gram, d, members, orthogonal).residual <= fit.residual + 1e-9);
    CHECK(direct > 0);
  }
}

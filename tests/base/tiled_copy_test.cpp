// copy_in_tiles and transposed (base/tiled_copy.hpp): every entry in its place, whatever the sizes
// (tiles cut at the edges), on one thread and over the threads, and from a column-major double
// matrix into a row-major float one.
#include "base/tiled_copy.hpp"

#include <random>

#include "support/catch.hpp"

using namespace kvrank;

namespace {

RowMatrixF random_rows(Index rows, Index cols, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  RowMatrixF out(rows, cols);
  for (Index i = 0; i < out.size(); ++i) out.data()[i] = uniform(rng);
  return out;
}

}  // namespace

TEST_CASE("tiled copy: a transpose puts every entry in its place", "[tiled_copy]") {
  std::mt19937 rng(5);
  // Small (one thread), cut at the edges, and large enough for the threads (over 2^20 entries),
  // with rows 64 KB apart (the case that fell in one cache set).
  for (const auto& [rows, cols] :
       {std::pair<Index, Index>{1, 1}, {3, 130}, {129, 65}, {1000, 1100}, {70, 16384}}) {
    INFO(rows << " x " << cols);
    const RowMatrixF matrix = random_rows(rows, cols, rng);
    const RowMatrixF out = detail::transposed(matrix);
    REQUIRE((out.rows() == cols && out.cols() == rows));
    CHECK(out == RowMatrixF(matrix.transpose()));
  }
}

TEST_CASE("tiled copy: column-major double into row-major float", "[tiled_copy]") {
  std::mt19937 rng(6);
  const MatrixD matrix = random_rows(1030, 1031, rng).cast<double>() * (1.0 + 1e-9);
  RowMatrixF out(matrix.rows(), matrix.cols());
  detail::copy_in_tiles(matrix, out);
  CHECK(out == matrix.cast<float>());
}

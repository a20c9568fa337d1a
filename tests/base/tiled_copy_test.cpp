// copy_in_tiles and transposed (base/tiled_copy.hpp): every entry in its place, whatever the sizes
// (tiles cut at the edges), on one thread and over the threads, and from a column-major double
// matrix into a row-major float one.
#include "base/tiled_copy.hpp"

#include <random>

#include "support/catch.hpp"
#include "support/random_factors.hpp"

using namespace kvrank;

using test::uniform_rows;

TEST_CASE("tiled copy: a transpose puts every entry in its place", "[tiled_copy]") {
  std::mt19937 rng(5);
  // Small (one thread), cut at the edges, and large enough for the threads (over 2^20 entries),
  // with rows 64 KB apart (the case that fell in one cache set).
  for (const auto& [rows, cols] :
       {std::pair<Index, Index>{1, 1}, {3, 130}, {129, 65}, {1000, 1100}, {70, 16384}}) {
    INFO(rows << " x " << cols);
    const RowMatrixF matrix = uniform_rows(rows, cols, rng);
    const RowMatrixF out = detail::transposed(matrix);
    REQUIRE((out.rows() == cols && out.cols() == rows));
    CHECK(out == RowMatrixF(matrix.transpose()));
  }
}

TEST_CASE("tiled copy: column-major double into row-major float", "[tiled_copy]") {
  std::mt19937 rng(6);
  const MatrixD matrix = uniform_rows(1030, 1031, rng).cast<double>() * (1.0 + 1e-9);
  RowMatrixF out(matrix.rows(), matrix.cols());
  detail::copy_in_tiles(matrix, out);
  CHECK(out == matrix.cast<float>());
}

// Private: copies between matrices of opposite storage orders (a transpose in memory), in tiles.
#pragma once

#include <algorithm>

#include "kvrank/base/eigen.hpp"

namespace kvrank::detail {

/// Whether a pass over `count` values (a copy, a pack into another layout) is worth a parallel
/// region: below about a million, starting the threads costs more than they save.
inline bool copy_worth_threads(Index count) noexcept { return count >= (Index(1) << 20); }

/// out(i, j) = in(i, j) (converted to out's scalar) for `in` stored column by column (a
/// column-major matrix, or a row-major one's transpose) and a row-major `out` of the same size: a
/// transpose in memory, over the threads. Each 64 × 64 tile goes through a buffer: read along in's
/// columns, written along out's rows, so that every cache line of either is used whole when it is
/// touched. Element by element, every access a row apart missed the cache (18 ms serially for V3's
/// 1536² latent factor); in 64 × 64 tiles without the buffer, rows 64 KB apart (V3's o_proj, 7168 ×
/// 16384) fell in one cache set and evicted each other: 1.6 s for the two of a diff's layer.
template <typename In, typename Out>
void copy_in_tiles(const In& in, Out& out) {
  static_assert(Out::IsRowMajor, "copy_in_tiles writes a row-major matrix");
  using Scalar = typename Out::Scalar;
  const Index rows = in.rows();
  const Index cols = in.cols();
  constexpr Index kTile = 64;
#pragma omp parallel for schedule(static) if (copy_worth_threads(rows * cols))
  for (Index i0 = 0; i0 < rows; i0 += kTile) {
    Scalar tile[kTile * kTile];
    const Index height = std::min(kTile, rows - i0);
    for (Index j0 = 0; j0 < cols; j0 += kTile) {
      const Index width = std::min(kTile, cols - j0);
      for (Index j = 0; j < width; ++j) {
        for (Index i = 0; i < height; ++i)
          tile[i * kTile + j] = static_cast<Scalar>(in(i0 + i, j0 + j));
      }
      for (Index i = 0; i < height; ++i) {
        for (Index j = 0; j < width; ++j) out(i0 + i, j0 + j) = tile[i * kTile + j];
      }
    }
  }
}

/// `matrix` (row-major: a RowMatrixF, or a map of one) transposed into a new row-major matrix.
template <typename RowMajor>
RowMatrixF transposed(const RowMajor& matrix) {
  RowMatrixF out(matrix.cols(), matrix.rows());
  copy_in_tiles(matrix.transpose(), out);
  return out;
}

}  // namespace kvrank::detail

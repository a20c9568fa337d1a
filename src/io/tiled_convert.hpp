// Private: the conversion of a tensor's stored values to float32 in cache-sized tiles.
//
// Converting a whole tensor and then scanning it for NaN/Inf reads and writes it twice through
// memory; a tile converted and scanned while it is in cache costs one pass. Tiles are independent,
// so they are spread over the OpenMP threads (the pool of set_compute_threads, compute.hpp) — the
// conversion is otherwise the one serial part of reading a layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kvrank/io/dtype.hpp"

namespace kvrank::detail {

/// Elements per tile: 64 KiB of float32 output, a multiple of every block type's block size.
inline constexpr std::size_t kConvertTile = std::size_t(1) << 14;

struct TiledConversion {
  bool complete = true;                ///< false when a mapped page was gone (the file shrank)
  std::int64_t first_non_finite = -1;  ///< the first NaN/Inf of the output, −1 when none
};

/// convert_to_f32(dtype, raw, out) tile by tile (`tile` elements, rounded down to whole blocks),
/// each under guarded_read, each scanned for NaN/Inf once converted. `out` is converted in full
/// when the result is complete; its values then equal convert_to_f32's exactly.
TiledConversion convert_in_tiles(DType dtype, std::span<const std::byte> raw, std::span<float> out,
                                 std::size_t tile = kConvertTile) noexcept;

}  // namespace kvrank::detail

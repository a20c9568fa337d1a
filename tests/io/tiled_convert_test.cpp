// Tests of the tiled conversion (src/io/tiled_convert.hpp) against the whole-tensor convert_to_f32
// and a plain scan for NaN/Inf, for every float dtype and a block type, at tile sizes that split
// blocks, elements and the tensor's end unevenly.
#include "io/tiled_convert.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kvrank/io/dtype.hpp"
#include "support/catch.hpp"

using namespace kvrank;

namespace {

/// Random stored bytes for `count` elements of `dtype` (NaN and Inf included where the bits make
/// them: the tiled scan must find the same first one).
std::vector<std::byte> random_bytes(DType dtype, std::size_t count, std::mt19937& rng) {
  const std::size_t bytes = count / dtype_block_elements(dtype) * dtype_size(dtype);
  std::vector<std::byte> raw(bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (std::byte& b : raw) b = static_cast<std::byte>(byte(rng));
  return raw;
}

std::int64_t first_non_finite(const std::vector<float>& values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i])) return static_cast<std::int64_t>(i);
  return -1;
}

}  // namespace

TEST_CASE("tiled conversion equals the whole-tensor conversion", "[dtype][convert]") {
  std::mt19937 rng(6);
  for (DType dtype : {DType::BF16, DType::F16, DType::F32, DType::F64, DType::F8_E4M3,
                      DType::F8_E5M2, DType::Q8_0}) {
    const std::size_t block = dtype_block_elements(dtype);
    for (std::size_t count :
         {std::size_t(0), block, 64 * block, 3 * detail::kConvertTile + block}) {
      const std::vector<std::byte> raw = random_bytes(dtype, count, rng);
      std::vector<float> whole(count);
      convert_to_f32(dtype, raw, whole);
      for (std::size_t tile : {std::size_t(1), std::size_t(7), std::size_t(1000),
                               detail::kConvertTile, std::size_t(1) << 30}) {
        INFO(dtype_name(dtype) << ", " << count << " elements, tiles of " << tile);
        std::vector<float> tiled(count);
        const detail::TiledConversion result = detail::convert_in_tiles(dtype, raw, tiled, tile);
        CHECK(result.complete);
        CHECK(result.first_non_finite == first_non_finite(whole));
        // NaN bits too; memcmp must not see the null data() of an empty vector (UBSan)
        CHECK((count == 0 || std::memcmp(tiled.data(), whole.data(), count * sizeof(float)) == 0));
      }
    }
  }
}

TEST_CASE("tiled conversion reports the first non-finite value of the tensor", "[dtype][convert]") {
  // Finite bf16 values with one Inf late and one NaN later: the earliest wins whatever tile or
  // thread finds it.
  const std::size_t count = 5 * detail::kConvertTile;
  std::vector<std::uint16_t> bits(count, 0x3F80);  // 1.0
  bits[3 * detail::kConvertTile + 5] = 0x7F80;     // +Inf
  bits[4 * detail::kConvertTile + 1] = 0x7FC0;     // NaN
  std::vector<std::byte> raw(count * 2);
  std::memcpy(raw.data(), bits.data(), raw.size());
  std::vector<float> out(count);
  const detail::TiledConversion result = detail::convert_in_tiles(DType::BF16, raw, out);
  CHECK(result.complete);
  CHECK(result.first_non_finite == static_cast<std::int64_t>(3 * detail::kConvertTile + 5));
}

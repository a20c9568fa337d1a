// GGML's quantized block formats (private to src/io): sizes, and dequantization to float32.
//
// Layouts, per ggml's ggml-common.h (little-endian, f16 = IEEE half; every block stands alone):
//   Q8_0  32 values, 34 bytes: f16 d, int8 q[32];                 x = d·q
//   Q4_0  32 values, 18 bytes: f16 d, u8 qs[16];                   x = d·(nibble − 8); value j < 16
//         is the low nibble of qs[j], value j + 16 its high nibble
//   Q4_K 256 values, 144 bytes: f16 d, f16 dmin, u8 scales[12], u8 qs[128]. Eight sub-blocks of 32,
//         each with a 6-bit scale s and min m packed into `scales`; x = d·s·nibble − dmin·m. Each
//         run of 32 qs bytes holds two sub-blocks: low nibbles, then high nibbles.
//   Q5_K 256 values, 176 bytes: f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]; as Q4_K
//         with a fifth bit: sub-block i takes bit i of qh[l] for its value l.
//   Q6_K 256 values, 210 bytes: u8 ql[128], u8 qh[64], int8 scales[16], f16 d. Sixteen sub-blocks
//         of 16 with int8 scales; q = (4 low bits from ql | 2 high bits from qh) − 32, x = d·s·q.
#pragma once

#include <cstddef>
#include <span>

#include "kvrank/io/dtype.hpp"

namespace kvrank::detail {

inline constexpr std::size_t kQ8_0Elements = 32, kQ8_0Bytes = 34;
inline constexpr std::size_t kQ4_0Elements = 32, kQ4_0Bytes = 18;
inline constexpr std::size_t kSuperBlockElements = 256;  // QK_K, the K-quants' super-block
inline constexpr std::size_t kQ4_KBytes = 144, kQ5_KBytes = 176, kQ6_KBytes = 210;

/// Dequantizes whole blocks of `dtype` (a GGML block type) from `raw` into `out`. Precondition:
/// out.size() is a multiple of dtype_block_elements(dtype) and raw holds exactly those blocks.
void dequantize_blocks(DType dtype, std::span<const std::byte> raw, std::span<float> out) noexcept;

}  // namespace kvrank::detail

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
//   Q4_1  32 values, 20 bytes: f16 d, f16 m, u8 qs[16];             x = d·nibble + m (as Q4_0)
//   Q5_0  32 values, 22 bytes: f16 d, u32 qh, u8 qs[16];            x = d·(q − 16), q = nibble |
//         bit j of qh << 4 for value j (nibbles as Q4_0)
//   Q5_1  32 values, 24 bytes: f16 d, f16 m, u32 qh, u8 qs[16];     x = d·q + m, q as Q5_0
//   Q2_K 256 values, 84 bytes: u8 scales[16], u8 qs[64], f16 d, f16 dmin. Sixteen sub-blocks of
//         16, scale byte s: x = d·(s & 15)·q − dmin·(s >> 4), q two bits: value v = 128n + 32j +
//         16h + l takes bits 2j..2j+1 of qs[32n + 16h + l] (its sub-block is v / 16).
//   Q3_K 256 values, 110 bytes: u8 hmask[32], u8 qs[64], u8 scales[12], f16 d. As Q2_K's two
//         bits, plus bit 4n + j of hmask[16h + l]: q = low bits − (hmask bit ? 0 : 4); sixteen
//         6-bit scales s (x = d·(s − 32)·q), the low 4 bits of s_i in the nibbles of bytes 0..7
//         (i < 8 low, else high nibble of byte i − 8), the top 2 in bits 2(i / 4) of byte 8 + i
//         % 4.
//   IQ4_NL 32 values, 18 bytes: f16 d, u8 qs[16]; x = d·kIq4Values[nibble] (nibbles as Q4_0).
//   IQ4_XS 256 values, 136 bytes: f16 d, u16 scales_h, u8 scales_l[4], u8 qs[128]. Eight
//         sub-blocks of 32 (nibbles as Q4_0, 16 bytes each) with 6-bit scales s_i (low 4 bits:
//         nibble i % 2 of scales_l[i / 2]; top 2: bits 2i of scales_h); x = d·(s − 32)·kIq4Values.
#pragma once

#include <cstddef>
#include <span>

#include "kvrank/io/dtype.hpp"

namespace kvrank::detail {

inline constexpr std::size_t kQ8_0Elements = 32, kQ8_0Bytes = 34;
inline constexpr std::size_t kQ4_0Elements = 32, kQ4_0Bytes = 18;
inline constexpr std::size_t kSuperBlockElements = 256;  // QK_K, the K-quants' super-block
inline constexpr std::size_t kQ4_KBytes = 144, kQ5_KBytes = 176, kQ6_KBytes = 210;
inline constexpr std::size_t kQ4_1Bytes = 20, kQ5_0Bytes = 22, kQ5_1Bytes = 24, kIQ4_NLBytes = 18;
inline constexpr std::size_t kQ2_KBytes = 84, kQ3_KBytes = 110, kIQ4_XSBytes = 136;

/// Dequantizes whole blocks of `dtype` (a GGML block type) from `raw` into `out`. Precondition:
/// out.size() is a multiple of dtype_block_elements(dtype) and raw holds exactly those blocks.
void dequantize_blocks(DType dtype, std::span<const std::byte> raw, std::span<float> out) noexcept;

}  // namespace kvrank::detail

#include "io/ggml_blocks.hpp"

#include <cstdint>
#include <cstring>
#include <utility>

namespace kvrank::detail {
namespace {

std::uint8_t byte_at(const std::byte* block, std::size_t offset) noexcept {
  return static_cast<std::uint8_t>(block[offset]);
}

float half_at(const std::byte* block, std::size_t offset) noexcept {
  std::uint16_t bits;
  std::memcpy(&bits, block + offset, sizeof bits);
  return f16_to_f32(bits);
}

void dequantize_q8_0(const std::byte* block, float* out) noexcept {
  const float d = half_at(block, 0);
  for (std::size_t i = 0; i < kQ8_0Elements; ++i) {
    out[i] = static_cast<float>(static_cast<std::int8_t>(byte_at(block, 2 + i))) * d;
  }
}

void dequantize_q4_0(const std::byte* block, float* out) noexcept {
  const float d = half_at(block, 0);
  constexpr std::size_t half = kQ4_0Elements / 2;
  for (std::size_t i = 0; i < half; ++i) {
    const std::uint8_t packed = byte_at(block, 2 + i);
    out[i] = static_cast<float>((packed & 0xF) - 8) * d;
    out[i + half] = static_cast<float>((packed >> 4) - 8) * d;
  }
}

// The 6-bit scale and min of sub-block `j` (0..7) of a Q4_K/Q5_K super-block: sub-blocks 0-3 keep
// them in the low six bits of bytes j and j + 4; sub-blocks 4-7 in the nibbles of byte j + 4, with
// their top two bits in the spare high bits of bytes j − 4 (scale) and j (min).
struct ScaleMin {
  float scale, min;
};
ScaleMin k_scale_min(const std::byte* scales, std::size_t j) noexcept {
  const auto at = [&](std::size_t i) { return byte_at(scales, i); };
  if (j < 4) return {static_cast<float>(at(j) & 63), static_cast<float>(at(j + 4) & 63)};
  return {static_cast<float>((at(j + 4) & 0xF) | ((at(j - 4) >> 6) << 4)),
          static_cast<float>((at(j + 4) >> 4) | ((at(j) >> 6) << 4))};
}

// Q4_K (high_bits == nullptr) and Q5_K: four runs of 64 values, each two sub-blocks of 32 sharing
// 32 bytes of nibbles (low nibbles first); Q5_K adds bit `sub` of high_bits[l] as the value 16.
void dequantize_k4_or_k5(const std::byte* block, const std::byte* high_bits,
                         const std::byte* nibbles, float* out) noexcept {
  const float d = half_at(block, 0);
  const float dmin = half_at(block, 2);
  const std::byte* scales = block + 4;
  for (std::size_t run = 0; run < 4; ++run) {
    for (std::size_t half = 0; half < 2; ++half) {
      const std::size_t sub = 2 * run + half;
      const ScaleMin sm = k_scale_min(scales, sub);
      const float scale = d * sm.scale, min = dmin * sm.min;
      for (std::size_t l = 0; l < 32; ++l) {
        const std::uint8_t packed = byte_at(nibbles, 32 * run + l);
        int q = half == 0 ? (packed & 0xF) : (packed >> 4);
        if (high_bits && (byte_at(high_bits, l) >> sub) & 1) q += 16;
        out[32 * sub + l] = scale * static_cast<float>(q) - min;
      }
    }
  }
}

void dequantize_q4_k(const std::byte* block, float* out) noexcept {
  dequantize_k4_or_k5(block, nullptr, block + 16, out);
}

void dequantize_q5_k(const std::byte* block, float* out) noexcept {
  dequantize_k4_or_k5(block, block + 16, block + 48, out);
}

// Two halves of 128 values; in each, value l + 32·k (k = 0..3) takes 4 low bits from ql (byte l
// or l + 32, low or high nibble) and 2 high bits from bits 2k..2k+1 of qh[l].
void dequantize_q6_k(const std::byte* block, float* out) noexcept {
  const std::byte* ql = block;
  const std::byte* qh = block + 128;
  const std::byte* scales = block + 192;
  const float d = half_at(block, 208);
  for (std::size_t half = 0; half < 2; ++half) {
    for (std::size_t l = 0; l < 32; ++l) {
      const std::uint8_t high = byte_at(qh, 32 * half + l);
      for (std::size_t k = 0; k < 4; ++k) {
        const std::uint8_t low_byte = byte_at(ql, 64 * half + l + 32 * (k % 2));
        const int low = k < 2 ? (low_byte & 0xF) : (low_byte >> 4);
        const int q = (low | (((high >> (2 * k)) & 3) << 4)) - 32;
        const float scale = static_cast<float>(
            static_cast<std::int8_t>(byte_at(scales, 8 * half + l / 16 + 2 * k)));
        out[128 * half + 32 * k + l] = d * scale * static_cast<float>(q);
      }
    }
  }
}

using BlockDecoder = void (*)(const std::byte*, float*) noexcept;

BlockDecoder decoder_of(DType dtype) noexcept {
  constexpr std::pair<DType, BlockDecoder> kDecoders[] = {
      {DType::Q8_0, dequantize_q8_0}, {DType::Q4_0, dequantize_q4_0},
      {DType::Q4_K, dequantize_q4_k}, {DType::Q5_K, dequantize_q5_k},
      {DType::Q6_K, dequantize_q6_k},
  };
  for (const auto& [type, decode] : kDecoders)
    if (type == dtype) return decode;
  return nullptr;
}

}  // namespace

void dequantize_blocks(DType dtype, std::span<const std::byte> raw, std::span<float> out) noexcept {
  const BlockDecoder decode = decoder_of(dtype);
  if (!decode) return;
  const std::size_t elements = dtype_block_elements(dtype), bytes = dtype_size(dtype);
  for (std::size_t block = 0; block * elements < out.size(); ++block) {
    decode(raw.data() + block * bytes, out.data() + block * elements);
  }
}

}  // namespace kvrank::detail

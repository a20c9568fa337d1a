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

// ---- 32-value blocks with a 4-bit index and an optional fifth bit ------------------------------

std::uint32_t u32_at(const std::byte* block, std::size_t offset) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, block + offset, sizeof bits);
  return bits;  // little-endian hosts only, as everywhere in kvrank
}

/// The 32 indices of a block: nibbles[i] low / high for values i / i + 16, plus bit j of
/// `high_bits` as 16 for value j (high_bits = 0 for 4-bit types).
void block_indices(const std::byte* nibbles, std::uint32_t high_bits, int* q) noexcept {
  for (std::size_t i = 0; i < 16; ++i) {
    const std::uint8_t packed = byte_at(nibbles, i);
    q[i] = (packed & 0xF) | static_cast<int>(((high_bits >> i) & 1) << 4);
    q[i + 16] = (packed >> 4) | static_cast<int>(((high_bits >> (i + 16)) & 1) << 4);
  }
}

void dequantize_q4_1(const std::byte* block, float* out) noexcept {
  const float d = half_at(block, 0), m = half_at(block, 2);
  int q[32];
  block_indices(block + 4, 0, q);
  for (std::size_t i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q[i]) + m;
}

void dequantize_q5_0(const std::byte* block, float* out) noexcept {
  const float d = half_at(block, 0);
  int q[32];
  block_indices(block + 6, u32_at(block, 2), q);
  for (std::size_t i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q[i] - 16);
}

void dequantize_q5_1(const std::byte* block, float* out) noexcept {
  const float d = half_at(block, 0), m = half_at(block, 2);
  int q[32];
  block_indices(block + 8, u32_at(block, 4), q);
  for (std::size_t i = 0; i < 32; ++i) out[i] = d * static_cast<float>(q[i]) + m;
}

// The non-linear grid of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl).
constexpr std::int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                        1,    13,   25,  38,  53,  69,  89,  113};

void dequantize_iq4_nl(const std::byte* block, float* out) noexcept {
  const float d = half_at(block, 0);
  int q[32];
  block_indices(block + 2, 0, q);
  for (std::size_t i = 0; i < 32; ++i) out[i] = d * static_cast<float>(kIq4Values[q[i]]);
}

void dequantize_iq4_xs(const std::byte* block, float* out) noexcept {
  const float d = half_at(block, 0);
  std::uint16_t scales_high;
  std::memcpy(&scales_high, block + 2, sizeof scales_high);
  for (std::size_t sub = 0; sub < 8; ++sub) {
    const int low = (byte_at(block, 4 + sub / 2) >> (4 * (sub % 2))) & 0xF;
    const int scale = (low | (((scales_high >> (2 * sub)) & 3) << 4)) - 32;
    int q[32];
    block_indices(block + 8 + 16 * sub, 0, q);
    for (std::size_t i = 0; i < 32; ++i)
      out[32 * sub + i] = d * static_cast<float>(scale) * static_cast<float>(kIq4Values[q[i]]);
  }
}

// ---- Q2_K and Q3_K: two bits per value in 16 sub-blocks of 16 --------------------------------

/// Value v = 128n + 32j + 16h + l of a Q2_K/Q3_K super-block: bits 2j..2j+1 of qs[32n + 16h + l].
int two_bits(const std::byte* qs, std::size_t v) noexcept {
  const std::size_t n = v / 128, j = (v % 128) / 32, hl = v % 32;
  return (byte_at(qs, 32 * n + hl) >> (2 * j)) & 3;
}

void dequantize_q2_k(const std::byte* block, float* out) noexcept {
  const std::byte* qs = block + 16;
  const float d = half_at(block, 80), dmin = half_at(block, 82);
  for (std::size_t v = 0; v < kSuperBlockElements; ++v) {
    const std::uint8_t scale = byte_at(block, v / 16);
    out[v] = d * static_cast<float>(scale & 0xF) * static_cast<float>(two_bits(qs, v)) -
             dmin * static_cast<float>(scale >> 4);
  }
}

/// Scale i (0..15) of a Q3_K super-block's 12 packed bytes, minus 32.
int q3_k_scale(const std::byte* scales, std::size_t i) noexcept {
  const int low = i < 8 ? byte_at(scales, i) & 0xF : byte_at(scales, i - 8) >> 4;
  const int high = (byte_at(scales, 8 + i % 4) >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

void dequantize_q3_k(const std::byte* block, float* out) noexcept {
  const std::byte* hmask = block;
  const std::byte* qs = block + 32;
  const std::byte* scales = block + 96;
  const float d = half_at(block, 108);
  for (std::size_t v = 0; v < kSuperBlockElements; ++v) {
    const std::size_t n = v / 128, j = (v % 128) / 32;
    const bool high = (byte_at(hmask, v % 32) >> (4 * n + j)) & 1;
    const int q = two_bits(qs, v) - (high ? 0 : 4);
    out[v] = d * static_cast<float>(q3_k_scale(scales, v / 16)) * static_cast<float>(q);
  }
}

using BlockDecoder = void (*)(const std::byte*, float*) noexcept;

BlockDecoder decoder_of(DType dtype) noexcept {
  constexpr std::pair<DType, BlockDecoder> kDecoders[] = {
      {DType::Q8_0, dequantize_q8_0},     {DType::Q4_0, dequantize_q4_0},
      {DType::Q4_K, dequantize_q4_k},     {DType::Q5_K, dequantize_q5_k},
      {DType::Q6_K, dequantize_q6_k},     {DType::Q4_1, dequantize_q4_1},
      {DType::Q5_0, dequantize_q5_0},     {DType::Q5_1, dequantize_q5_1},
      {DType::Q2_K, dequantize_q2_k},     {DType::Q3_K, dequantize_q3_k},
      {DType::IQ4_NL, dequantize_iq4_nl}, {DType::IQ4_XS, dequantize_iq4_xs},
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

#include "kvrank/io/dtype.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include "io/ggml_blocks.hpp"

namespace kvrank {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
  bool is_float;
  std::size_t block_elements = 1;  // > 1: a GGML block type, spelled by dtype_name() only
};

constexpr std::array<DTypeInfo, 27> kDTypes{{
    {DType::F64, "F64", 8, true},
    {DType::F32, "F32", 4, true},
    {DType::F16, "F16", 2, true},
    {DType::BF16, "BF16", 2, true},
    {DType::F8_E4M3, "F8_E4M3", 1, true},
    {DType::F8_E5M2, "F8_E5M2", 1, true},
    {DType::BOOL, "BOOL", 1, false},
    {DType::U8, "U8", 1, false},
    {DType::I8, "I8", 1, false},
    {DType::I16, "I16", 2, false},
    {DType::U16, "U16", 2, false},
    {DType::I32, "I32", 4, false},
    {DType::U32, "U32", 4, false},
    {DType::I64, "I64", 8, false},
    {DType::U64, "U64", 8, false},
    {DType::Q8_0, "Q8_0", detail::kQ8_0Bytes, true, detail::kQ8_0Elements},
    {DType::Q4_0, "Q4_0", detail::kQ4_0Bytes, true, detail::kQ4_0Elements},
    {DType::Q4_K, "Q4_K", detail::kQ4_KBytes, true, detail::kSuperBlockElements},
    {DType::Q5_K, "Q5_K", detail::kQ5_KBytes, true, detail::kSuperBlockElements},
    {DType::Q6_K, "Q6_K", detail::kQ6_KBytes, true, detail::kSuperBlockElements},
    {DType::Q4_1, "Q4_1", detail::kQ4_1Bytes, true, detail::kQ4_0Elements},
    {DType::Q5_0, "Q5_0", detail::kQ5_0Bytes, true, detail::kQ4_0Elements},
    {DType::Q5_1, "Q5_1", detail::kQ5_1Bytes, true, detail::kQ4_0Elements},
    {DType::Q2_K, "Q2_K", detail::kQ2_KBytes, true, detail::kSuperBlockElements},
    {DType::Q3_K, "Q3_K", detail::kQ3_KBytes, true, detail::kSuperBlockElements},
    {DType::IQ4_NL, "IQ4_NL", detail::kIQ4_NLBytes, true, detail::kQ4_0Elements},
    {DType::IQ4_XS, "IQ4_XS", detail::kIQ4_XSBytes, true, detail::kSuperBlockElements},
}};

constexpr const DTypeInfo& info(DType dtype) noexcept {
  // The table is indexed by the enum's value (checked below at compile time).
  return kDTypes[static_cast<std::size_t>(dtype)];
}

constexpr bool table_matches_enum() {
  for (std::size_t i = 0; i < kDTypes.size(); ++i) {
    if (static_cast<std::size_t>(kDTypes[i].dtype) != i) return false;
  }
  return true;
}
static_assert(table_matches_enum(), "kDTypes must list DType values in declaration order");

constexpr float with_sign(bool negative, float magnitude) {
  return negative ? -magnitude : magnitude;
}

// Builds a float from its IEEE fields (exponent already re-biased for float32).
constexpr float f32_from_fields(bool negative, std::uint32_t exponent, std::uint32_t mantissa) {
  return std::bit_cast<float>((negative ? 0x80000000u : 0u) | (exponent << 23) | mantissa);
}

constexpr float decode_e4m3(std::uint8_t bits) {
  const bool negative = (bits & 0x80) != 0;
  const std::uint32_t exponent = (bits >> 3) & 0xF;
  const std::uint32_t mantissa = bits & 0x7;
  if (exponent == 0xF && mantissa == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exponent == 0) return with_sign(negative, static_cast<float>(mantissa) * 0x1p-9f);
  return f32_from_fields(negative, exponent - 7 + 127, mantissa << 20);
}

constexpr float decode_e5m2(std::uint8_t bits) {
  const bool negative = (bits & 0x80) != 0;
  const std::uint32_t exponent = (bits >> 2) & 0x1F;
  const std::uint32_t mantissa = bits & 0x3;
  if (exponent == 0x1F) {
    return mantissa == 0 ? with_sign(negative, std::numeric_limits<float>::infinity())
                         : std::numeric_limits<float>::quiet_NaN();
  }
  if (exponent == 0) return with_sign(negative, static_cast<float>(mantissa) * 0x1p-16f);
  return f32_from_fields(negative, exponent - 15 + 127, mantissa << 21);
}

template <float (*Decode)(std::uint8_t)>
constexpr std::array<float, 256> make_table() {
  std::array<float, 256> table{};
  for (int i = 0; i < 256; ++i) table[i] = Decode(static_cast<std::uint8_t>(i));
  return table;
}

constexpr std::array<float, 256> kE4M3 = make_table<decode_e4m3>();
constexpr std::array<float, 256> kE5M2 = make_table<decode_e5m2>();

// Reads the i-th little-endian element of type T from unaligned bytes (safetensors offsets need
// not be aligned); compilers turn the memcpy into a plain load.
template <typename T>
inline T load(const std::byte* raw, std::size_t i) noexcept {
  T value;
  std::memcpy(&value, raw + i * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void convert_by_value(const std::byte* raw, std::span<float> out) noexcept {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(load<T>(raw, i));
}

void convert_by_table(const std::array<float, 256>& table, const std::byte* raw,
                      std::span<float> out) noexcept {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = table[static_cast<std::uint8_t>(raw[i])];
}

}  // namespace

bool is_float_dtype(DType dtype) noexcept { return info(dtype).is_float; }
std::size_t dtype_size(DType dtype) noexcept { return info(dtype).size; }
std::size_t dtype_block_elements(DType dtype) noexcept { return info(dtype).block_elements; }
std::string_view dtype_name(DType dtype) noexcept { return info(dtype).name; }

std::optional<DType> any_dtype_from_name(std::string_view name) noexcept {
  for (const DTypeInfo& entry : kDTypes) {
    if (entry.name == name && entry.block_elements == 1) return entry.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  std::optional<DType> dtype = any_dtype_from_name(name);
  if (dtype && !is_float_dtype(*dtype)) return std::nullopt;
  return dtype;
}

float bf16_to_f32(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

float f16_to_f32(std::uint16_t bits) noexcept {
  const bool negative = (bits & 0x8000) != 0;
  const std::uint32_t exponent = (bits >> 10) & 0x1F;
  const std::uint32_t mantissa = bits & 0x3FF;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in float32
    return with_sign(negative, static_cast<float>(mantissa) * 0x1p-24f);
  }
  if (exponent == 0x1F) return f32_from_fields(negative, 0xFF, mantissa << 13);  // inf / NaN
  return f32_from_fields(negative, exponent - 15 + 127, mantissa << 13);
}

float fp8_e4m3_to_f32(std::uint8_t bits) noexcept { return kE4M3[bits]; }
float fp8_e5m2_to_f32(std::uint8_t bits) noexcept { return kE5M2[bits]; }

void convert_to_f32(DType dtype, std::span<const std::byte> raw, std::span<float> out) noexcept {
  const std::byte* data = raw.data();
  switch (dtype) {
    case DType::F64:
      convert_by_value<double>(data, out);
      return;
    case DType::F32:
      if (!out.empty()) std::memcpy(out.data(), data, out.size() * sizeof(float));
      return;
    case DType::F16:
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = f16_to_f32(load<std::uint16_t>(data, i));
      return;
    case DType::BF16:
      // A shift per element; kept as a plain loop so the compiler vectorises it.
      for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] =
            std::bit_cast<float>(static_cast<std::uint32_t>(load<std::uint16_t>(data, i)) << 16);
      }
      return;
    case DType::F8_E4M3:
      convert_by_table(kE4M3, data, out);
      return;
    case DType::F8_E5M2:
      convert_by_table(kE5M2, data, out);
      return;
    case DType::BOOL:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = raw[i] != std::byte{0} ? 1.0f : 0.0f;
      return;
    case DType::U8:
      convert_by_value<std::uint8_t>(data, out);
      return;
    case DType::I8:
      convert_by_value<std::int8_t>(data, out);
      return;
    case DType::I16:
      convert_by_value<std::int16_t>(data, out);
      return;
    case DType::U16:
      convert_by_value<std::uint16_t>(data, out);
      return;
    case DType::I32:
      convert_by_value<std::int32_t>(data, out);
      return;
    case DType::U32:
      convert_by_value<std::uint32_t>(data, out);
      return;
    case DType::I64:
      convert_by_value<std::int64_t>(data, out);
      return;
    case DType::U64:
      convert_by_value<std::uint64_t>(data, out);
      return;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::IQ4_NL:
    case DType::IQ4_XS:
      detail::dequantize_blocks(dtype, raw, out);
      return;
  }
}

}  // namespace kvrank

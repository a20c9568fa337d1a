// Element types kvrank reads, and their conversion to float32.
//
// Every analysed tensor is converted to float32 once, layer by layer, straight from the memory map.
// BF16/F16/FP8 values convert exactly (float32 holds every one of them); F64 rounds to nearest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kvrank {

enum class DType {
  F64,
  F32,
  F16,
  BF16,
  F8_E4M3,
  F8_E5M2,
  // Storage-only types: valid in safetensors/NPY files (e.g. int64 position ids), so a checkpoint
  // holding them opens and `inspect` lists them, but they are never analysed (is_float_dtype()).
  BOOL,
  U8,
  I8,
  I16,
  U16,
  I32,
  U32,
  I64,
  U64,
  // GGML block types (GGUF only): blocks of dtype_block_elements() values, each dtype_size()
  // bytes with its own scales, dequantized on conversion (src/io/ggml_blocks.cpp). Analysed like
  // the float types; never accepted from safetensors or NPY names.
  Q8_0,
  Q4_0,
  Q4_K,
  Q5_K,
  Q6_K,
  Q4_1,
  Q5_0,
  Q5_1,
  Q2_K,
  Q3_K,
  IQ4_NL,
  IQ4_XS,
};

/// True for the types kvrank converts and analyses: the six floating-point types (F64 ...
/// F8_E5M2) and the GGML block types.
bool is_float_dtype(DType dtype) noexcept;

/// Bytes per element, or per block of dtype_block_elements() elements for a GGML block type.
std::size_t dtype_size(DType dtype) noexcept;
/// Elements per block: 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL) or 256 (the K-quants, IQ4_XS); 1
/// for every element type.
std::size_t dtype_block_elements(DType dtype) noexcept;
/// The safetensors spelling: "F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2" (and "BOOL", "U8",
/// "I8", "I16", "U16", "I32", "U32", "I64", "U64" for the storage-only types).
std::string_view dtype_name(DType dtype) noexcept;
/// Parses the spelling of a floating-point dtype; nullopt for anything else (including valid but
/// storage-only safetensors dtypes such as "I64", which callers report by name).
std::optional<DType> dtype_from_name(std::string_view name) noexcept;
/// Parses any dtype spelling above, storage-only types included (what a safetensors or NPY file
/// may hold); the GGML block types ("Q8_0", "Q4_K", ...) are spelled by dtype_name() only.
std::optional<DType> any_dtype_from_name(std::string_view name) noexcept;

float bf16_to_f32(std::uint16_t bits) noexcept;
float f16_to_f32(std::uint16_t bits) noexcept;
/// OCP FP8 E4M3 ("fn": no infinities, S.1111.111 is NaN, max 448).
float fp8_e4m3_to_f32(std::uint8_t bits) noexcept;
/// OCP FP8 E5M2 (IEEE-like: infinities and NaNs).
float fp8_e5m2_to_f32(std::uint8_t bits) noexcept;

/// Converts `out.size()` little-endian elements of `dtype` from `raw` into `out` (storage-only
/// types convert by value; to_f32() refuses them; block types dequantize). Precondition:
/// raw.size() == out.size() / dtype_block_elements(dtype) * dtype_size(dtype), with out.size() a
/// multiple of dtype_block_elements(dtype).
void convert_to_f32(DType dtype, std::span<const std::byte> raw, std::span<float> out) noexcept;

}  // namespace kvrank

// Private: the GGUF format's type tables (the GGML tensor types and the metadata value types),
// read by the GGUF parser (gguf.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvrank/io/dtype.hpp"

namespace kvrank::gguf_types {

// ---- GGML tensor types --------------------------------------------------------------------------

struct GgmlType {
  std::uint32_t id;
  std::string_view name;
  std::uint64_t block_elements;
  std::uint64_t block_bytes;
  std::optional<DType> dtype;  // nullopt: valid, but kvrank cannot convert it
};

// Every type of ggml.h's enum ggml_type still in use (ids 4, 5, 31-33 and 36-38 were removed).
constexpr std::array<GgmlType, 32> kGgmlTypes{{
    {0, "F32", 1, 4, DType::F32},
    {1, "F16", 1, 2, DType::F16},
    {2, "Q4_0", 32, 18, DType::Q4_0},
    {3, "Q4_1", 32, 20, DType::Q4_1},
    {6, "Q5_0", 32, 22, DType::Q5_0},
    {7, "Q5_1", 32, 24, DType::Q5_1},
    {8, "Q8_0", 32, 34, DType::Q8_0},
    {9, "Q8_1", 32, 36, std::nullopt},
    {10, "Q2_K", 256, 84, DType::Q2_K},
    {11, "Q3_K", 256, 110, DType::Q3_K},
    {12, "Q4_K", 256, 144, DType::Q4_K},
    {13, "Q5_K", 256, 176, DType::Q5_K},
    {14, "Q6_K", 256, 210, DType::Q6_K},
    {15, "Q8_K", 256, 292, std::nullopt},
    {16, "IQ2_XXS", 256, 66, std::nullopt},
    {17, "IQ2_XS", 256, 74, std::nullopt},
    {18, "IQ3_XXS", 256, 98, std::nullopt},
    {19, "IQ1_S", 256, 50, std::nullopt},
    {20, "IQ4_NL", 32, 18, DType::IQ4_NL},
    {21, "IQ3_S", 256, 110, std::nullopt},
    {22, "IQ2_S", 256, 82, std::nullopt},
    {23, "IQ4_XS", 256, 136, DType::IQ4_XS},
    {24, "I8", 1, 1, DType::I8},
    {25, "I16", 1, 2, DType::I16},
    {26, "I32", 1, 4, DType::I32},
    {27, "I64", 1, 8, DType::I64},
    {28, "F64", 1, 8, DType::F64},
    {29, "IQ1_M", 256, 56, std::nullopt},
    {30, "BF16", 1, 2, DType::BF16},
    {34, "TQ1_0", 256, 54, std::nullopt},
    {35, "TQ2_0", 256, 66, std::nullopt},
    {39, "MXFP4", 32, 17, std::nullopt},
}};

inline const GgmlType* find_ggml_type(std::uint32_t id) {
  for (const GgmlType& type : kGgmlTypes)
    if (type.id == id) return &type;
  return nullptr;
}

// ---- metadata value types -----------------------------------------------------------------------

enum ValueType : std::uint32_t {
  kU8 = 0,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kF32,
  kBool,
  kString,
  kArray,
  kU64,
  kI64,
  kF64
};

constexpr std::array<std::string_view, 13> kValueTypeNames{
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64"};

// Bytes of a fixed-size value type; 0 for string and array.
constexpr std::uint64_t value_size(std::uint32_t type) {
  constexpr std::array<std::uint64_t, 13> sizes{1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return sizes[type];
}

inline std::string value_type_name(std::uint32_t type) {
  return type < kValueTypeNames.size() ? std::string(kValueTypeNames[type])
                                       : "unknown type " + std::to_string(type);
}

}  // namespace kvrank::gguf_types

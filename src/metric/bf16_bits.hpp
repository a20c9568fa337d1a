// Private: which float32 values are bfloat16 values, and their bfloat16 halves — for the bf16
// Gram paths that take float32 rows (gram_backend.cpp, bf16_panels.cpp, onednn_bf16_gram.cpp).
#pragma once

#include <bit>
#include <cstdint>

#include "kvrank/base/eigen.hpp"

namespace kvrank::detail {

/// The low half of a float32's bits: zero exactly when the value is a bfloat16 (its high half).
inline constexpr std::uint32_t kLowHalf = 0xFFFFu;

inline std::uint32_t float_bits(float value) noexcept {
  return std::bit_cast<std::uint32_t>(value);
}

/// Whether each of `count` values is a bfloat16 value: one OR of their low halves, no branch in
/// the loop (it vectorises).
inline bool all_bf16(const float* values, Index count) noexcept {
  std::uint32_t low = 0;
  for (Index i = 0; i < count; ++i) low |= float_bits(values[i]) & kLowHalf;
  return low == 0;
}

}  // namespace kvrank::detail

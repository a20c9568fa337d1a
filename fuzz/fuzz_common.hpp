// Shared by the fuzz targets: what every parsed tensor must survive.
#pragma once

#include <cstdint>

#include "kvrank/base/error.hpp"
#include "kvrank/io/dtype.hpp"
#include "kvrank/io/tensor.hpp"

namespace kvrank::fuzz {

/// Converts the tensor like an analysis would. kvrank::Error (NaN, Inf, a non-float dtype) is an
/// expected outcome; anything else escaping, or a sanitizer report, is a bug.
inline void exercise(const TensorView& tensor) {
  // The view's size invariant must hold for every tensor a reader hands out.
  if (tensor.byte_size() != checked_byte_count(tensor.shape, tensor.dtype)) {
    __builtin_trap();
  }
  try {
    if (tensor.shape.size() == 2) {
      (void)to_matrix(tensor);
    } else {
      (void)to_f32(tensor);
    }
  } catch (const Error&) {
  }
}

}  // namespace kvrank::fuzz

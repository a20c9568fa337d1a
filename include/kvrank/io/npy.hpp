// NumPy .npy arrays and .npz archives, parsed from bytes.
//
// NPY: magic "\x93NUMPY", version 1.0 (u16 header length), 2.0 or 3.0 (u32), then a Python dict
// literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with spaces and a newline.
// Accepted descr: '<f8' '<f4' '<f2' ('|' or '=' byte orders are read as little-endian where
// meaningful), and '<V2' / '|V2' only when `bf16_void` is set (`--npy-dtype bf16`). Header length
// bounded and inside the file; shape × size computed with overflow detection and equal to the bytes
// that follow (no more, no less).
//
// NPZ: a zip archive of .npy members, stored or deflated (zlib). Sizes claimed by the archive are
// checked against the file and a deflate-ratio bound before anything is allocated; a deflated
// member is inflated only when its tensor is converted, into exactly the size its header implies.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvrank/io/tensor.hpp"

namespace kvrank {

struct NpyOptions {
  bool bf16_void = false;  ///< read '<V2' elements as bfloat16
};

/// Parses and validates one .npy file held in `bytes`; the view's name is `tensor_name`.
TensorView parse_npy(std::span<const std::byte> bytes, const std::string& file_name,
                     const std::string& tensor_name, const NpyOptions& options = {});

/// One member of an .npz archive. A stored member's bytes point into the archive; a deflated
/// member's data is `tensor.deferred`: only its NPY header is inflated when the archive is read,
/// the rest when the tensor is converted (so unused members cost nothing).
struct NpzMember {
  TensorView tensor;
};

/// Reads every member of an .npz archive; tensor names are the member names without ".npy".
std::vector<NpzMember> parse_npz(std::span<const std::byte> bytes, const std::string& file_name,
                                 const NpyOptions& options = {});

}  // namespace kvrank

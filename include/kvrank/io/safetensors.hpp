// The safetensors format: parsed from bytes, validated by every rule of the reference
// implementation.
//
// Layout: 8-byte little-endian header size N, N bytes of UTF-8 JSON (an object mapping tensor names
// to {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional "__metadata__" object of
// string values), then the data buffer. Rules enforced (each a kvrank::Error naming the file, and
// the tensor when there is one): file ≥ 8 bytes; N ≤ 100 MB and 8 + N ≤ file size; header is valid
// UTF-8 JSON and an object; no duplicate names; dtype known; shape a list of non-negative integers;
// data_offsets two unsigned integers with begin ≤ end; numel × dtype size computed with overflow
// detection equals end − begin; tensors, sorted by begin, tile the buffer from 0 with no gap or
// overlap; and the buffer is fully used (last end == file size − 8 − N).
//
//   MappedFile file("model.safetensors");  // mapped_file.hpp
//   SafetensorsFile st = parse_safetensors(file.bytes(), "model.safetensors");
//   for (const TensorView& t : st.tensors) use(t);  // views into `file`
// (this example is compiled and run by tests/header_examples_test.cpp)
#pragma once

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kvrank/io/tensor.hpp"

namespace kvrank {

struct SafetensorsFile {
  std::vector<TensorView> tensors;              ///< in header order; views into the given bytes
  std::map<std::string, std::string> metadata;  ///< "__metadata__", if present
};

/// Largest header accepted (the reference implementation's limit).
inline constexpr std::size_t kMaxSafetensorsHeader = 100'000'000;

/// Parses and validates a whole safetensors file held in `file_bytes` (usually a memory map; only
/// the header is read). `file_name` is used in error messages. Throws kvrank::Error.
SafetensorsFile parse_safetensors(std::span<const std::byte> file_bytes,
                                  const std::string& file_name);

}  // namespace kvrank

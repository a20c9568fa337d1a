// Private: a streaming safetensors writer (used by `kvrank synth`).
//
// The layout is the reference implementation's: 8-byte little-endian header size N, N bytes of JSON
// (tensor names in sorted order, padded with spaces so that 8 + N is a multiple of 8, plus a
// "__metadata__" object), then the tensors' data back to back in the order they were declared.
// All shapes are known up front, so the header is written first and each tensor is then streamed
// from float32 — the whole model never has to be in memory.
//
//   SafetensorsWriter writer(path, {{"a", DType::BF16, {2, 3}}, {"b", DType::F32, {4}}});
//   writer.write("a", six_floats);
//   writer.write("b", four_floats);
//   writer.close();
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvrank/io/dtype.hpp"

namespace kvrank {

/// One tensor to be written: its name, element type and shape.
struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;

  std::int64_t numel() const noexcept;
  std::uint64_t byte_size() const noexcept;
};

/// float32 → bfloat16 bits, rounding to nearest even (NaN stays a quiet NaN).
std::uint16_t f32_to_bf16(float value) noexcept;
/// float32 → IEEE binary16 bits, rounding to nearest even (subnormals, ±inf on overflow, NaN).
std::uint16_t f32_to_f16(float value) noexcept;

/// Encodes `values` as little-endian `dtype` (F32, BF16 or F16) into `out`.
/// Precondition: out.size() == values.size() * dtype_size(dtype).
void encode_f32(DType dtype, std::span<const float> values, std::span<std::byte> out);

/// The bytes that precede the data: the 8-byte size and the padded JSON header. Data offsets follow
/// the order of `tensors`; the JSON lists the names sorted. Throws kvrank::Error on duplicate names
/// or a dtype the writer does not encode.
std::string safetensors_header(const std::vector<TensorSpec>& tensors,
                               const std::map<std::string, std::string>& metadata);

/// Writes one safetensors file: the header on construction, then each tensor, in declared order.
class SafetensorsWriter {
 public:
  /// Creates (truncates) `path` and writes the header. Throws kvrank::Error if it cannot.
  SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  /// Writes the next tensor. `name` must be the next declared one and `values` hold exactly its
  /// elements in C order (programming errors: std::logic_error).
  void write(std::string_view name, std::span<const float> values);
  /// Flushes and closes; every declared tensor must have been written. Throws kvrank::Error on an
  /// I/O failure.
  void close();

 private:
  void put(const void* data, std::size_t size);

  std::filesystem::path path_;
  std::vector<TensorSpec> tensors_;
  std::size_t next_ = 0;
  std::FILE* file_ = nullptr;
  std::vector<std::byte> encoded_;  // reused encoding buffer
};

}  // namespace kvrank

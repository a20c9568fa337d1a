// A validated view of one tensor inside a checkpoint, whatever file format it came from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvrank/dtype.hpp"
#include "kvrank/eigen.hpp"

namespace kvrank {

/// Points into memory owned by the Checkpoint (a memory map or an inflated NPZ member) and is valid
/// as long as that Checkpoint lives. `bytes.size() == checked_byte_count(shape, dtype)` always
/// holds (numel() * dtype_size(dtype) for element types): readers check it before creating a view.
struct TensorView {
  std::string name;
  std::string file;  ///< the file it lives in, for error messages
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;   ///< as stored (C order unless fortran_order)
  bool fortran_order = false;        ///< NPY only: the bytes are column-major
  std::span<const std::byte> bytes;  ///< exactly the tensor's data
  /// The name in the file when the reader renamed the tensor (GGUF attention tensors carry their
  /// Hugging Face names, e.g. `blk.0.attn_q.weight` becomes
  /// `model.layers.0.self_attn.q_proj.weight`).
  std::string stored_name;

  std::int64_t numel() const noexcept;
  /// "[3, 64]"
  std::string shape_string() const;
};

/// numel(shape) × dtype_size(dtype) (for a block type: numel / dtype_block_elements(dtype) blocks),
/// or nullopt when it does not fit in 64 bits or a block type's last extent is not a whole number
/// of blocks (a shape with a zero extent is 0 bytes whatever its other extents). Readers use it to
/// validate claimed sizes.
std::optional<std::uint64_t> checked_byte_count(const std::vector<std::int64_t>& shape,
                                                DType dtype) noexcept;

/// Converts the tensor to float32 in C order (a fortran-ordered NPY array is transposed here).
/// Throws kvrank::Error naming the file and tensor if any value is NaN or Inf.
std::vector<float> to_f32(const TensorView& tensor);

/// A 2-D tensor as a row-major float32 matrix `[shape[0], shape[1]]` (NaN/Inf checked as above).
/// Throws kvrank::Error if the tensor is not 2-D.
RowMatrixF to_matrix(const TensorView& tensor);

}  // namespace kvrank

// A validated view of one tensor inside a checkpoint, whatever file format it came from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvrank/base/eigen.hpp"
#include "kvrank/io/dtype.hpp"

namespace kvrank {

/// Tensor data produced on first use rather than when the checkpoint is opened: a deflated NPZ
/// member is inflated only when one of its tensors is converted (a 1 MB archive can hold a member
/// that inflates to a gigabyte, which nothing may ever read).
class DeferredBytes {
 public:
  virtual ~DeferredBytes() = default;
  /// The size get() will return, known without producing the bytes.
  virtual std::size_t size() const noexcept = 0;
  /// The bytes, produced on the first call and kept until release() (thread-safe). Throws
  /// kvrank::Error naming the file and tensor when they cannot be produced (corrupt data).
  virtual std::span<const std::byte> get() const = 0;
  /// Frees what get() produced; a later get() produces it again. No span from get() may be in use.
  virtual void release() const noexcept = 0;
};

/// Points into memory owned by the Checkpoint (a memory map, or a DeferredBytes) and is valid as
/// long as that Checkpoint lives. `byte_size() == checked_byte_count(shape, dtype)` always holds
/// (numel() * dtype_size(dtype) for element types): readers check it before creating a view.
struct TensorView {
  std::string name;
  std::string file;  ///< the file it lives in, for error messages
  DType dtype = DType::F32;
  std::vector<std::int64_t> shape;   ///< as stored (C order unless fortran_order)
  bool fortran_order = false;        ///< NPY only: the bytes are column-major
  std::span<const std::byte> bytes;  ///< exactly the tensor's data; empty when `deferred` is set
  std::shared_ptr<const DeferredBytes> deferred;  ///< set when the data is produced on first use
  /// The name in the file when the reader renamed the tensor (GGUF attention tensors carry their
  /// Hugging Face names, e.g. `blk.0.attn_q.weight` becomes
  /// `model.layers.0.self_attn.q_proj.weight`).
  std::string stored_name;

  std::int64_t numel() const noexcept;
  /// The size of the data, whether it is in `bytes` or deferred.
  std::size_t byte_size() const noexcept { return deferred ? deferred->size() : bytes.size(); }
  /// The data: `bytes`, or the deferred bytes produced now (may throw kvrank::Error). Read the
  /// tensor's values through this (or to_f32 / to_matrix), never through `bytes` directly.
  std::span<const std::byte> data() const { return deferred ? deferred->get() : bytes; }
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

/// Rows [first_row, first_row + rows) of a 2-D tensor in C order with one value an element (not
/// Fortran-order, not a GGML block type) into `out` (rows × shape[1] floats), the values of
/// to_matrix's rows. False, with `out` unspecified, where a value is NaN or Inf, a mapped page was
/// gone, or the tensor is not such a one: to_matrix then says which.
bool rows_to_f32(const TensorView& tensor, std::int64_t first_row, std::int64_t rows,
                 std::span<float> out);

}  // namespace kvrank

#include "kvrank/io/tensor.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "base/guarded_read.hpp"
#include "base/pages.hpp"
#include "io/tiled_convert.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/memory_limit.hpp"
#include "kvrank/base/text.hpp"

namespace kvrank {
namespace {

std::string join_indices(const std::vector<std::int64_t>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

// The multi-index of flat C-order position `flat` in `shape`.
std::vector<std::int64_t> c_order_index(std::int64_t flat, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

/// float32's exponent field: all ones for NaN and Inf.
constexpr std::uint32_t kExponentBits = 0x7F800000u;

std::uint32_t exponent_bits(float value) noexcept {
  return std::bit_cast<std::uint32_t>(value) & kExponentBits;
}

bool is_finite_bits(float value) noexcept { return exponent_bits(value) != kExponentBits; }

// Returns the position of the first NaN/Inf, or -1. The first pass is a branch-free OR over the
// values that the compiler vectorises even for SSE2 (a `bool &=` reduction it left scalar: 5 % of
// a 128M run); the search only runs when something was found. Adding 1 to an exponent field of all
// ones (NaN, Inf) carries into bit 31; any other exponent stays below it.
std::int64_t first_non_finite(std::span<const float> values) noexcept {
  std::uint32_t carries = 0;
  for (float value : values) carries |= exponent_bits(value) + 0x00800000u;
  if ((carries & 0x80000000u) == 0) return -1;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!is_finite_bits(values[i])) return static_cast<std::int64_t>(i);
  }
  return -1;
}

// The value a converted element came from, for an F64 element that overflowed float32.
double source_f64(const TensorView& tensor, std::int64_t storage_index) {
  double value;
  const std::span<const std::byte> raw = tensor.data();
  if (!detail::guarded_read(
          [&] { std::memcpy(&value, raw.data() + storage_index * 8, sizeof value); })) {
    throw Error(tensor.file, tensor.name, detail::kFileShrank);
  }
  return value;
}

// Fortran (column-major) storage position of the C-order multi-index.
std::int64_t fortran_offset(const std::vector<std::int64_t>& index,
                            const std::vector<std::int64_t>& shape) {
  std::int64_t offset = 0;
  for (std::size_t d = shape.size(); d-- > 0;) offset = offset * shape[d] + index[d];
  return offset;
}

[[noreturn]] void throw_non_finite(const TensorView& tensor, std::span<const float> values,
                                   std::int64_t at) {
  std::string where = "element " + std::to_string(at);
  std::vector<std::int64_t> index = c_order_index(at, tensor.shape);
  if (tensor.shape.size() >= 2) where += " (index " + join_indices(index) + ")";
  if (tensor.dtype == DType::F64) {
    std::int64_t stored = tensor.fortran_order ? fortran_offset(index, tensor.shape) : at;
    double original = source_f64(tensor, stored);
    if (std::isfinite(original)) {
      std::ostringstream text;
      text << "value " << original << " at " << where << " does not fit in float32";
      throw Error(tensor.file, tensor.name, text.str());
    }
  }
  const char* kind = std::isnan(values[at]) ? "NaN" : "Inf";
  throw Error(tensor.file, tensor.name,
              std::string("contains ") + kind + " at " + where + " (expected finite values)");
}

// Reorders column-major `in` (logical `shape`) into row-major `out`, walking the output in order
// with an odometer so each step is O(1) amortised.
void fortran_to_c(std::span<const float> in, std::span<float> out,
                  const std::vector<std::int64_t>& shape) {
  const std::size_t ndim = shape.size();
  if (ndim == 2) {
    const std::int64_t rows = shape[0], cols = shape[1];
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] = in[c * rows + r];
    }
    return;
  }
  std::vector<std::int64_t> stride(ndim), index(ndim, 0);  // Fortran strides
  std::int64_t s = 1;
  for (std::size_t d = 0; d < ndim; ++d) {
    stride[d] = s;
    s *= shape[d];
  }
  std::int64_t source = 0;
  for (std::size_t flat = 0; flat < out.size(); ++flat) {
    out[flat] = in[source];
    for (std::size_t d = ndim; d-- > 0;) {  // advance the last axis fastest (C order)
      source += stride[d];
      if (++index[d] < shape[d]) break;
      source -= stride[d] * shape[d];
      index[d] = 0;
    }
  }
}

// Converts into `out` (numel floats, C order) and checks every value is finite. The bytes may be
// a memory map: a SIGBUS (the file shrank under the map) becomes an Error naming the file instead
// of killing the process.
void convert_checked(const TensorView& tensor, std::span<float> out) {
  if (!is_float_dtype(tensor.dtype)) {
    throw Error(tensor.file, tensor.name,
                "dtype " + std::string(dtype_name(tensor.dtype)) +
                    " is not a floating-point type (expected F64, F32, F16, BF16, F8_E4M3 or "
                    "F8_E5M2)");
  }
  const bool transposed = tensor.fortran_order && tensor.shape.size() >= 2;
  std::vector<float> column_major(transposed ? out.size() : 0);
  const std::span<const std::byte> raw = tensor.data();
  const detail::TiledConversion converted =
      detail::convert_in_tiles(tensor.dtype, raw, transposed ? column_major : out);
  if (!converted.complete) throw Error(tensor.file, tensor.name, detail::kFileShrank);
  if (transposed) fortran_to_c(column_major, out, tensor.shape);
  std::int64_t bad = transposed ? first_non_finite(out) : converted.first_non_finite;
  if (bad >= 0) throw_non_finite(tensor, out, bad);
}

/// The float32 copy of `tensor` (and the column-major buffer a Fortran-order one is read through)
/// sized before it is made: under a cgroup limit nothing fails an allocation, the kernel's OOM
/// killer ends the process instead (docs/input-limits.md, "Memory limits"). Copies under 1 MiB
/// are left to the working reserve the threads were fitted with.
void require_copy_memory(const TensorView& tensor) {
  std::uint64_t bytes = static_cast<std::uint64_t>(tensor.numel()) * sizeof(float);
  if (tensor.fortran_order && tensor.shape.size() >= 2) bytes *= 2;
  if (bytes < kMiB) return;
  require_memory(bytes,
                 "the float32 copy of " + excerpt(tensor.name) + " " + tensor.shape_string());
}

}  // namespace

namespace detail {

TiledConversion convert_in_tiles(DType dtype, std::span<const std::byte> raw, std::span<float> out,
                                 std::size_t tile) noexcept {
  const std::size_t block = dtype_block_elements(dtype);
  const std::size_t block_bytes = dtype_size(dtype);
  tile = std::max(block, tile / block * block);
  const auto tiles = static_cast<std::int64_t>((out.size() + tile - 1) / tile);
  std::int64_t first_bad = std::numeric_limits<std::int64_t>::max();
  bool complete = true;
  // Threads only where a tensor is worth a fork/join (a few hundred KB and up).
#pragma omp parallel for schedule(static) reduction(min : first_bad) reduction(&& : complete) \
    if (tiles >= 16)
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::size_t begin = static_cast<std::size_t>(t) * tile;
    const std::span<float> part = out.subspan(begin, std::min(tile, out.size() - begin));
    const std::span<const std::byte> bytes =
        raw.subspan(begin / block * block_bytes, part.size() / block * block_bytes);
    if (!guarded_read([&] { convert_to_f32(dtype, bytes, part); })) {
      complete = false;
      continue;
    }
    const std::int64_t bad = first_non_finite(part);
    if (bad >= 0) first_bad = std::min(first_bad, static_cast<std::int64_t>(begin) + bad);
  }
  return {complete, first_bad == std::numeric_limits<std::int64_t>::max() ? -1 : first_bad};
}

}  // namespace detail

std::int64_t TensorView::numel() const noexcept {
  // A zero extent first: checked_byte_count() bounds the product of the other extents only when
  // none is zero, so multiplying them could overflow.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  return count;
}

std::string TensorView::shape_string() const { return join_indices(shape); }

std::optional<std::uint64_t> checked_byte_count(const std::vector<std::int64_t>& shape,
                                                DType dtype) noexcept {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  // A block type stores each row (the last axis) as whole blocks of `block` elements.
  const std::uint64_t block = dtype_block_elements(dtype);
  if (block > 1 && (shape.empty() || shape.back() % static_cast<std::int64_t>(block) != 0))
    return std::nullopt;
  std::uint64_t bytes = dtype_size(dtype);
  for (std::size_t axis = 0; axis < shape.size(); ++axis) {
    std::uint64_t extent = static_cast<std::uint64_t>(shape[axis]);
    if (axis + 1 == shape.size()) extent /= block;
    if (shape[axis] < 0 || __builtin_mul_overflow(bytes, extent, &bytes)) return std::nullopt;
  }
  return bytes;
}

std::vector<float> to_f32(const TensorView& tensor) {
  require_copy_memory(tensor);
  std::vector<float> values(static_cast<std::size_t>(tensor.numel()));
  convert_checked(tensor, values);
  return values;
}

RowMatrixF to_matrix(const TensorView& tensor) {
  if (tensor.shape.size() != 2) {
    throw Error(tensor.file, tensor.name,
                "expected a 2-D tensor, found shape " + tensor.shape_string());
  }
  require_copy_memory(tensor);
  RowMatrixF matrix(tensor.shape[0], tensor.shape[1]);
  detail::prefault_for_write(matrix.data(),
                             static_cast<std::size_t>(matrix.size()) * sizeof(float));
  convert_checked(tensor, std::span<float>(matrix.data(), static_cast<std::size_t>(matrix.size())));
  return matrix;
}

bool rows_to_f32(const TensorView& tensor, std::int64_t first_row, std::int64_t rows,
                 std::span<float> out) {
  if (tensor.shape.size() != 2 || tensor.fortran_order || dtype_block_elements(tensor.dtype) != 1 ||
      !is_float_dtype(tensor.dtype) || first_row < 0 || rows < 0 ||
      first_row + rows > tensor.shape[0] ||
      out.size() != static_cast<std::size_t>(rows * tensor.shape[1]))
    return false;
  const auto row_bytes = static_cast<std::size_t>(tensor.shape[1]) * dtype_size(tensor.dtype);
  const detail::TiledConversion converted = detail::convert_in_tiles(
      tensor.dtype,
      tensor.data().subspan(static_cast<std::size_t>(first_row) * row_bytes,
                            static_cast<std::size_t>(rows) * row_bytes),
      out);
  return converted.complete && converted.first_non_finite < 0;
}

}  // namespace kvrank

// Private: kvrank's own AVX512-BF16 kernel for the upper triangle of the Gram G = B·Bᵀ of a basis
// whose every value is a bfloat16 (gram_backend.hpp's bf16 path), beside oneDNN's.
//
// The rows are packed once into panels of 16 rows in the pair-interleaved layout vdpbf16ps reads
// (each 32-bit word holds one row's values at depth 2p and 2p + 1), and register blocks of 8
// columns × 48 rows of G are formed by `_mm512_dpbf16_ps`, one row's pair broadcast against three
// panels' words. Blocks wholly below the diagonal are skipped, so the diagonal costs ~nothing
// extra. For accuracy the float32 accumulators restart at every depth slice of 256 and are added
// into G at its end: the same summation as the oneDNN path's slices (docs/choices.md).
//
// Compiled for AVX512-BF16 per function (a target attribute), run only where the CPU has it:
// the binary still runs on any x86-64.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvrank/base/eigen.hpp"
#include "kvrank/base/factors.hpp"

namespace kvrank::detail {

/// True when this build has the kernel (x86-64, GCC or Clang) and the CPU runs AVX512-BF16 (with
/// AVX512-F/BW/VL, and the OS saving their registers).
bool bf16_kernel_supported() noexcept;

/// Bytes of the packed panels bf16_kernel_gram_upper() keeps (per thread) for an m × d basis.
std::uint64_t bf16_kernel_buffer_bytes(Index m, Index d) noexcept;

/// When every value of `basis` is exactly a bfloat16 and bf16_kernel_supported(): writes the upper
/// triangle (diagonal included) of basis·basisᵀ into the column-major `gram`, sized m × m by the
/// caller, and returns true. Entries just below the diagonal (at most 15 rows below it) may be
/// written too, with their true values (the mirror's very bits). Otherwise returns false and leaves
/// `gram` untouched. The threads: the 256 × 288 blocks of the triangle over OpenMP's (one thread
/// inside a parallel region); the same bits on any number. Precondition: basis has at least one row
/// and one column.
bool bf16_kernel_gram_upper(const RowMatrixF& basis, MatrixF& gram);

/// The same for a basis left stored (StoredBf16Rows: the panels packed from its bits, no float32
/// copy; the same bits of G). False when bf16_kernel_supported() is not, or when a read met a page
/// its file no longer backs (guarded_read.hpp), `gram` then partly written.
bool bf16_kernel_gram_upper(const StoredBf16Rows& rows, MatrixF& gram);

/// A basis whose Gram bf16_kernel_gram_pair() forms — stored bf16 rows, or a float32 matrix whose
/// every value should be a bf16 — and its Gram (m × m, sized by the caller).
struct Bf16GramSide {
  const RowMatrixF* basis = nullptr;  ///< used when `stored` is null
  const StoredBf16Rows* stored = nullptr;
  MatrixF* gram = nullptr;
};

/// The upper triangles of two Grams formed together by two threads: each packs one side and forms
/// its blocks first (its panels stay in its own cache, as with two Grams side by side), then takes
/// what is left of the other side's, its smallest blocks first, so that a thread whose side ends
/// first — or whose partner lost its core to another process — does not wait idle at the join. The
/// same bits as bf16_kernel_gram_upper() on each. False when the kernel is unsupported, a float32
/// side holds a value that is not a bf16, or a read of a stored side failed: the Grams are then
/// partly written, and the caller forms them one by one. Precondition: each side has at least one
/// row and one column.
bool bf16_kernel_gram_pair(const Bf16GramSide& left, const Bf16GramSide& right);

}  // namespace kvrank::detail

// Which kernel forms the basis Grams G = B·Bᵀ (the one large product per side, see diversity.hpp).
//
//   f32   OpenBLAS SSYRK on the float32 rows (Eigen's product without OpenBLAS). Always available.
//   bf16  oneDNN matmul bf16 × bf16 → f32 (AVX512-BF16 or AMX kernels), only the upper triangle,
//         in column tiles. Used for a basis whose every value is exactly a bfloat16 — rows read
//         from BF16 or FP8 (E4M3, E5M2) tensors without scaling, which covers the dense families of
//         bf16 checkpoints. Products of two bf16 values are exact in float32 and the sums
//         accumulate in float32, so the Gram equals the f32 path's up to summation order (about
//         1e-7 relative); bases built by products (MLA, LRKV) are not bf16 and take the f32 path.
//         The kernels treat subnormal bf16 inputs (|x| < 1.2e-38) as 0.
//
// Selection, for the whole process: set_gram_backend(), or the environment variable
//   KVRANK_GRAM_BACKEND=auto|f32|bf16      (read once, at the first Gram; default auto)
//   auto  bf16 where the basis is bf16-exact, the Gram is not tiny, the build has oneDNN, the CPU
//         has BF16, and either AMX or float32 products on generic kernels (bf16_gram_in_auto());
//         else f32: the bf16 kernel beats the f32 SSYRK with AMX and against OpenBLAS's generic
//         (Prescott) kernels, and loses to OpenBLAS's AVX-512 SSYRK on AVX512-BF16 alone (the
//         measurements: docs/performance.md, docs/choices.md).
//   f32   always f32 (the fallback, e.g. to compare the two)
//   bf16  as auto, but an error when this build or CPU has no bf16 kernel
// The bf16 kernel runs on oneDNN's OpenMP threads, i.e. on kvrank's own pool, so `--threads N`
// (set_compute_threads) bounds it too.
#pragma once

#include <string_view>

#include "kvrank/base/eigen.hpp"

namespace kvrank {

enum class GramBackend { automatic, f32, bf16 };

/// "auto", "f32" or "bf16"; anything else throws kvrank::Error naming KVRANK_GRAM_BACKEND.
GramBackend parse_gram_backend(std::string_view name);

/// Chooses the backend (overrides KVRANK_GRAM_BACKEND). Throws kvrank::Error for `bf16` when
/// bf16_gram_supported() is false.
void set_gram_backend(GramBackend backend);

/// The backend in force: the last set_gram_backend(), else KVRANK_GRAM_BACKEND, else automatic.
/// Throws kvrank::Error when KVRANK_GRAM_BACKEND is invalid, or `bf16` and unsupported.
GramBackend gram_backend();

/// True when kvrank was built with oneDNN and this CPU runs its bf16 kernels natively (oneDNN's
/// effective ISA includes AVX512-BF16; ONEDNN_MAX_CPU_ISA can lower it).
bool bf16_gram_supported();

/// Whether `auto` takes the bf16 kernel for a large enough bf16-exact basis: bf16_gram_supported(),
/// and AMX, or float32 products without SIMD kernels of their own (OpenBLAS's generic kernels).
bool bf16_gram_in_auto();

/// True when every value of `rows` is exactly representable in bfloat16 (low 16 bits zero).
bool is_bf16_exact(const RowMatrixF& rows) noexcept;

/// The bf16 path of diversity.cpp's Gram: when the backend in force allows it and `basis` is
/// bf16-exact, writes the upper triangle (diagonal included) of basis·basisᵀ into the column-major
/// `gram`, which the caller has sized m × m, and returns true. Otherwise returns false and leaves
/// `gram` untouched. Precondition: basis has at least one row and one column.
bool bf16_gram_upper(const RowMatrixF& basis, MatrixF& gram);

}  // namespace kvrank

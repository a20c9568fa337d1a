// Which kernel forms the basis Grams G = B·Bᵀ (the one large product per side, see diversity.hpp).
//
//   f32         OpenBLAS SSYRK on the float32 rows (Eigen's product without OpenBLAS). Always
//               available.
//   bf16        bf16 × bf16 → f32 products, only the upper triangle, the depth in slices of 256
//               each summed from zero and added into G (one float32 chain over all of d was 4× the
//               SSYRK's error over 2304 columns). Used for a basis whose every value is exactly a
//               bfloat16 — rows read from BF16 or FP8 (E4M3, E5M2) tensors without scaling, which
//               covers the dense families of bf16 checkpoints. Products of two bf16 values are
//               exact in float32 and the sums accumulate in float32, so the Gram equals the f32
//               path's up to summation order (about 1e-7 relative); bases built by products (MLA,
//               LRKV) are not bf16 and take the f32 path. The kernels treat subnormal bf16 inputs
//               (|x| < 1.2e-38) as 0. Two kernels, the same sums bit for bit (the same float32
//               chains in the same order; tests/metric/bf16_gram_kernel_test.cpp checks it):
//                 kvrank's own (metric/bf16_gram_kernel.hpp) where the CPU has AVX512-BF16 and
//                 oneDNN no AMX kernels: vdpbf16ps register blocks of 8 × 48 entries, only those
//                 on or above the diagonal. On the Zen 4 EPYC (1 thread, kvrank_bench_bf16_gram)
//                 it takes 0.89–0.90× the time of oneDNN's tiles at 4096², 0.88–0.93× at 2304²,
//                 0.81–0.83× for 1024 rows over 4096 columns (docs/performance.md).
//                 oneDNN's matmul with AMX (its tile products), or when `bf16-onednn` asks: column
//                 tiles of 256, the slices added into the tile by oneDNN's sum post-op, each
//                 tile's diagonal block computed whole.
//   onednn-f32  oneDNN's float32 GEMM (its own AVX2 / AVX-512 kernels, chosen from the CPU's
//               feature bits) on the float32 rows, upper triangle in column tiles — the f32 path's
//               products, summed in another order (about 1e-7 relative). It also takes the other
//               large float32 products of the metric (the MLA / LRKV contraction's GEMMs, TRMMs and
//               SYRKs, metric/blas.hpp), i.e. everything OpenBLAS would run in float32. This is
//               for an OpenBLAS that does not know the CPU (Debian 12's 0.3.21 on 5th-generation
//               Xeon) and runs its generic Prescott (SSE3) kernels, 3–5× slower, or that was told
//               to run its AVX2 kernels on an AVX-512 CPU (OPENBLAS_CORETYPE=Haswell: on a Zen 5
//               EPYC half oneDNN's rate); the double-precision LAPACK steps stay on OpenBLAS.
//
// Selection, for the whole process: set_gram_backend(), or the environment variable
//   KVRANK_GRAM_BACKEND=auto|f32|bf16|bf16-onednn|onednn-f32   (read once, at the first Gram;
//   default auto)
//   auto        where OpenBLAS runs generic kernels (or there is no OpenBLAS) and oneDNN has AVX2
//               or better kernels here, or OpenBLAS runs AVX2 kernels where oneDNN runs AVX-512:
//               every float32 product on onednn-f32 (onednn_f32_in_auto()). bf16 Grams where the
//               basis is bf16-exact, the Gram is not tiny and the CPU has AMX or is AMD's
//               (bf16_gram_in_auto()), else f32. The bf16 kernel beats the f32 SSYRK with AMX, and
//               on AMD's AVX512-BF16 (Zen 4 EPYC: 1.65× OpenBLAS's AVX-512 SSYRK, 1.9× its AVX2
//               one, measured on oneDNN's kernel); on Intel's AVX512-BF16 without AMX oneDNN's was
//               2–3× slower than OpenBLAS's AVX-512 SSYRK (5th-generation Xeon; kvrank's own was
//               not measured there), so float32 keeps it there (the measurements:
//               docs/performance.md, docs/choices.md).
//   f32         always f32 (the fallback, e.g. to compare the others with)
//   bf16        bf16 for every bf16-exact basis, f32 for the others; an error when this build or
//               CPU has no bf16 kernel
//   bf16-onednn as bf16, on oneDNN's matmul even where kvrank's own kernel would run (to compare)
//   onednn-f32  onednn-f32 for every float32 product; an error when this build has no oneDNN or
//               oneDNN has no AVX2 kernels on this CPU
// The oneDNN kernels (and kvrank's bf16 kernel) run on OpenMP's threads, i.e. on kvrank's own pool,
// so `--threads N` (set_compute_threads) bounds them too; inside one of kvrank's parallel loops
// they run on the calling thread alone.
#pragma once

#include <string>
#include <string_view>
#include <thread>

#include "kvrank/base/eigen.hpp"

namespace kvrank {

enum class GramBackend { automatic, f32, bf16, bf16_onednn, onednn_f32 };

/// "auto", "f32", "bf16", "bf16-onednn" or "onednn-f32"; anything else throws kvrank::Error naming
/// KVRANK_GRAM_BACKEND.
GramBackend parse_gram_backend(std::string_view name);

/// Chooses the backend (overrides KVRANK_GRAM_BACKEND). Throws kvrank::Error for `bf16` and
/// `bf16-onednn` when bf16_gram_supported() is false, for `onednn-f32` when onednn_f32_supported()
/// is false.
void set_gram_backend(GramBackend backend);

/// The backend in force: the last set_gram_backend(), else KVRANK_GRAM_BACKEND, else automatic.
/// Throws kvrank::Error when KVRANK_GRAM_BACKEND is invalid, or names an unsupported backend.
GramBackend gram_backend();

/// True when kvrank was built with oneDNN and this CPU runs its bf16 kernels natively (oneDNN's
/// effective ISA includes AVX512-BF16; ONEDNN_MAX_CPU_ISA can lower it, for kvrank's own bf16
/// kernel too).
bool bf16_gram_supported();

/// Whether `auto` takes the bf16 kernel for a large enough bf16-exact basis: bf16_gram_supported()
/// and AMX or an AMD CPU, or float32 products without SIMD kernels of their own (OpenBLAS's
/// generic kernels) and no onednn-f32 kernel to run them.
bool bf16_gram_in_auto();

/// True when kvrank was built with oneDNN and oneDNN's effective ISA here includes AVX2 (its
/// float32 GEMM then runs AVX2 or AVX-512 kernels; ONEDNN_MAX_CPU_ISA can lower it).
bool onednn_f32_supported();

/// Whether `auto` runs the float32 products on oneDNN: onednn_f32_supported(), and OpenBLAS runs
/// its generic kernels (or kvrank has no OpenBLAS), or its AVX2 kernels on a CPU whose AVX-512
/// oneDNN uses (docs/choices.md).
bool onednn_f32_in_auto();

/// Whether the bf16 Grams run on kvrank's own AVX512-BF16 kernel rather than oneDNN's matmul:
/// bf16_gram_supported(), no AMX kernels in oneDNN (AMX's tile products are many times faster than
/// any AVX-512 kernel), the CPU has the instruction, and `bf16-onednn` is not asked for.
bool bf16_grams_on_own_kernel();

/// Whether the Gram of an m × d basis of bf16 values, in the backend in force, runs on kvrank's own
/// kernel, which reads a basis left stored in the checkpoint (FactorSide::stored) as it is.
bool own_kernel_takes_bf16(Index m, Index d);

/// Whether the float32 products of the metric (Grams, and metric/blas.hpp's GEMM, TRMM and SYRK)
/// run on oneDNN under the backend in force: `onednn-f32`, or `auto` and onednn_f32_in_auto().
bool float_products_on_onednn();

/// Whether the latent contraction's M_h products (contraction.cpp: a GEMM per head and run of
/// coordinate rows, only 64–128 deep, written with β = 0) run on oneDNN:
/// float_products_on_onednn(), or `auto` and onednn_f32_supported(). OpenBLAS zeroes C in a pass of
/// its own before a β = 0 product and packs more for so short a depth: with its AVX-512 kernels on
/// Zen 4, a 2-layer DeepSeek-V3 run took 3 % longer with them there (docs/performance.md).
bool latent_products_on_onednn();

/// What runs the float32 products under the backend in force, for `-v`
/// (compute_backend_description()); which kernel forms a model's Grams is
/// gram_kernel_description()'s.
std::string gram_backend_description();

/// What forms the Grams of an m × d basis under the backend in force, for `-v`: "bf16 Grams
/// (kvrank's AVX512-BF16 kernel)" or "bf16 Grams on oneDNN" where its values are bfloat16s
/// (`bf16_values`: read from BF16 weights) and the bf16 kernel takes that shape; else the float32
/// product that runs (the SYRK on the BLAS, or oneDNN's onednn-f32), noting where bf16 would take a
/// basis of bfloat16 values.
std::string gram_kernel_description(Index m, Index d, bool bf16_values);

/// True when every value of `rows` is exactly representable in bfloat16 (low 16 bits zero).
bool is_bf16_exact(const RowMatrixF& rows) noexcept;

/// The bf16 path of diversity.cpp's Gram: when the backend in force allows it and `basis` is
/// bf16-exact, writes the upper triangle (diagonal included) of basis·basisᵀ into the column-major
/// `gram`, which the caller has sized m × m, and returns true. Otherwise returns false and leaves
/// `gram` untouched. Precondition: basis has at least one row and one column.
bool bf16_gram_upper(const RowMatrixF& basis, MatrixF& gram);

/// The onednn-f32 path of the Gram: when float_products_on_onednn(), writes the upper triangle
/// (diagonal included) of basis·basisᵀ into the column-major `gram`, sized m × m by the caller, and
/// returns true; otherwise returns false and leaves `gram` untouched. Precondition: basis has at
/// least one row and one column.
bool onednn_f32_gram_upper(const RowMatrixF& basis, MatrixF& gram);

/// The Gram on oneDNN when the backend in force takes it there: bf16_gram_upper(), else
/// onednn_f32_gram_upper(). False: the caller forms it with the f32 path.
bool onednn_gram_upper(const RowMatrixF& basis, MatrixF& gram);

/// Compiles, on a thread of its own, the oneDNN kernels that the Gram of an m × d basis would run
/// (`bf16_values`: its values are bfloat16s, as read from BF16 weights) and, with
/// `latent_contraction`, those of a latent contraction's products (latent_products_on_onednn()).
/// oneDNN compiles its GEMM kernels in the first product of a process, while the other threads
/// wait: its SGEMM's took 45 ms on a Zen 4 EPYC (its bf16 matmul's, 3.5 ms on the machine it was
/// first measured on). So the analysis starts this as it opens a checkpoint, and reads the first
/// layer meanwhile. Returns an empty (not joinable) thread when there is nothing to gain: fewer
/// than 2 threads available, no oneDNN kernel for such products under the backend in force (the
/// bf16 Grams on kvrank's own kernel and no latent contraction on oneDNN: nothing to compile), no
/// oneDNN in this build; and where a memory limit leaves no room for the thread and what oneDNN
/// takes to compile (memory_limit.hpp; the room is promised to it while it runs). The thread gives
/// up silently on any failure, which the Gram then meets itself. The caller keeps it until the
/// analysis ends (std::jthread joins when destroyed).
std::jthread compile_gram_kernels_aside(Index m, Index d, bool bf16_values,
                                        bool latent_contraction);

}  // namespace kvrank

// Private: kvrank's own AVX-512 kernel for the upper triangle of A·Aᵀ in float32 where A has few
// rows over a long inner dimension (blas.hpp's syrk_double: the contraction's H × H sums over M_h
// rows, 128 × 8172 a slice for DeepSeek-V3).
//
// OpenBLAS's SSYRK runs such a shape at ~36 G-MAC/s on one Zen 4 core (the triangle's
// multiply-adds), two thirds of its SGEMM rate (measured, the cause not traced: its packing of
// both operands and its diagonal blocks weigh more when C is 128 wide). This kernel takes the
// rows where they lie, no packing: a register block of 4 rows i × 4 rows j, 16 accumulators of 16
// lanes, each lane a partial sum over every 16th column, loads 8 rows' next 16 columns a step; the
// columns in chunks of 1024 (4 KB a row: 128 rows' chunk stays in L2), a chunk's lanes added in a
// tree and the chunk added to C in order. ~46 G-MAC/s on the same core, 1.2–1.3× SSYRK at 128 ×
// 8172 and 256 × 2048, 2.5× at 32 × 3456 (kvrank_bench_double_syrk, bench/double_syrk.cpp). The
// sums differ from the BLAS's in their order only: float32 round-off of the same size, each product
// through at most 64 + 5 roundings and one more a later chunk
// (tests/metric/float_syrk_kernel_test.cpp).
//
// Compiled for AVX-512F per function (a target attribute), run only where the CPU has it; on the
// calling thread, so the bits do not depend on the number of threads.
#pragma once

#include "kvrank/base/eigen.hpp"

namespace kvrank::detail {

/// True when this build has the kernel (x86-64, GCC or Clang) and the CPU runs AVX-512F.
bool float_syrk_kernel_supported() noexcept;

/// Writes the upper triangle (diagonal included) of A·Aᵀ for A (rows × inner, row stride
/// lda ≥ inner, float32, row-major) into the column-major C (rows × rows, leading dimension ldc);
/// the strict lower triangle is left as it was. Preconditions: float_syrk_kernel_supported(),
/// rows ≥ 1, inner ≥ 0.
void float_syrk_kernel(Index rows, Index inner, const float* a, Index lda, float* c, Index ldc);

}  // namespace kvrank::detail

// Private: kvrank's own AVX-512 kernel for A·Aᵀ accumulated in double from float32 rows
// (blas.hpp's syrk_in_double), beside OpenBLAS's DSYRK.
//
// Where OpenBLAS runs its AVX2 (Haswell) kernels on a CPU with full-rate 512-bit FMAs (Zen 5, and
// OPENBLAS_CORETYPE=Haswell here), its DSYRK on 4-double vectors runs at half the rate the CPU has.
// This kernel packs the rows, converted to double, into panels of 8 (the 8 double lanes of a zmm)
// and forms the blocks on or above the diagonal in register blocks of 24 rows i × 8 rows j.
//
// Summation: a product of two float32 values is exact in double, so each entry is one FMA chain
// over the depth in order, k = 0, 1, …, inner − 1: the very bits of the naive loop `sum =
// std::fma(double(a_ik), double(a_jk), sum)` (and of `sum += double(a_ik) * double(a_jk)`).
//
// Compiled for AVX-512F per function (a target attribute), run only where the CPU has it: the
// binary still runs on any x86-64. On the calling thread inside a parallel loop over heads; over
// the threads, one column panel of C each, for one large product (diff's stacked bases). Each
// entry is one chain either way: the same bits on any number of threads.
#pragma once

#include "kvrank/base/eigen.hpp"

namespace kvrank::detail {

/// True when this build has the kernel (x86-64, GCC or Clang) and the CPU runs AVX-512F (with the
/// OS saving its registers).
bool double_syrk_kernel_supported() noexcept;

/// Writes A·Aᵀ for A (rows × inner, row stride lda ≥ inner, float32, row-major) into `out`
/// (rows × rows, column-major, leading dimension rows), both triangles, exactly symmetric; on the
/// calling thread, or with `threaded` over OpenMP's threads (the same bits). The packed panels
/// (rows × inner doubles) are kept by the calling thread for the next call up to 32 MB, a larger
/// product's freed. Preconditions: double_syrk_kernel_supported(), rows ≥ 1, inner ≥ 1.
void double_syrk_kernel(Index rows, Index inner, const float* a, Index lda, double* out,
                        bool threaded = false);

}  // namespace kvrank::detail

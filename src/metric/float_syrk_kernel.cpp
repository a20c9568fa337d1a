// kvrank's AVX-512 kernel for the upper triangle of A·Aᵀ in float32 (float_syrk_kernel.hpp).
//
// Entry (i, j) of a column chunk [k0, k0 + 1024): 16 lanes, lane l the FMA chain over columns
// k0 + l, k0 + l + 16, … in order (the chunk's last partial vector through masked loads, zeros
// past the end), then the 16 lanes added in _mm512_reduce_add_ps's tree; C(i, j) is the first
// chunk's sum, plus each later chunk's in order.
#include "metric/float_syrk_kernel.hpp"

#include <algorithm>
#include <stdexcept>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVRANK_FSYRK_KERNEL 1
#include <immintrin.h>
/// Compiled for AVX-512F per function: the binary still runs on any x86-64.
#define KVRANK_FSYRK_TARGET __attribute__((target("avx512f")))
#endif

namespace kvrank::detail {
// A namespace of its own: the library is built as one unity file per layer.
namespace float_syrk {
namespace {

#ifdef KVRANK_FSYRK_KERNEL

constexpr int kBlock = 4;              // rows i and rows j of a register block
constexpr Index kLanes = 16;           // floats in a zmm
constexpr Index kChunkColumns = 1024;  // 4 KB of each row: 128 rows' chunk stays in L2

/// The rows [first, first + 4) of a chunk starting at column `k0`; a row past the last is the last
/// row again (its sums are formed and never stored).
struct BlockRows {
  const float* row[kBlock];
  BlockRows(const float* a, Index lda, Index first, Index rows, Index k0) {
    for (int r = 0; r < kBlock; ++r) row[r] = a + std::min(first + r, rows - 1) * lda + k0;
  }
};

/// The 16 accumulators of a register block.
using BlockSums = __m512[kBlock][kBlock];

/// One step of a register block: the next 16 columns (at `offset`) of its 8 rows, all 16 of them
/// or, `Masked`, the lanes of `mask` (zeros in the others).
template <bool Masked>
KVRANK_FSYRK_TARGET inline void block_step(const BlockRows& is, const BlockRows& js, Index offset,
                                           __mmask16 mask, BlockSums& sums) {
  __m512 i_values[kBlock], j_values[kBlock];
#pragma GCC unroll 4
  for (int r = 0; r < kBlock; ++r) {
    i_values[r] = Masked ? _mm512_maskz_loadu_ps(mask, is.row[r] + offset)
                         : _mm512_loadu_ps(is.row[r] + offset);
    j_values[r] = Masked ? _mm512_maskz_loadu_ps(mask, js.row[r] + offset)
                         : _mm512_loadu_ps(js.row[r] + offset);
  }
#pragma GCC unroll 4
  for (int x = 0; x < kBlock; ++x) {
#pragma GCC unroll 4
    for (int y = 0; y < kBlock; ++y)
      sums[x][y] = _mm512_fmadd_ps(i_values[x], j_values[y], sums[x][y]);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reads the _mm512_undefined_pd() inside _mm512_reduce_add_ps as maybe uninitialized (a
// false positive of its headers); the pragma covers this function only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// One register block's sums over `steps` whole vectors and a last one of `tail` columns, stored
/// to C(i, j) for the entries of the block on or above the diagonal: assigned in the first chunk,
/// added after it.
KVRANK_FSYRK_TARGET void register_block(const BlockRows& is, const BlockRows& js, Index steps,
                                        Index tail, Index i0, Index j0, Index rows, bool first,
                                        float* c, Index ldc) {
  BlockSums sums;
#pragma GCC unroll 4
  for (int x = 0; x < kBlock; ++x) {
#pragma GCC unroll 4
    for (int y = 0; y < kBlock; ++y) sums[x][y] = _mm512_setzero_ps();
  }
  for (Index s = 0; s < steps; ++s) block_step<false>(is, js, s * kLanes, 0, sums);
  if (tail > 0)
    block_step<true>(is, js, steps * kLanes, static_cast<__mmask16>((1u << tail) - 1u), sums);
  for (int x = 0; x < kBlock; ++x) {
    for (int y = 0; y < kBlock; ++y) {
      const Index i = i0 + x, j = j0 + y;
      if (i > j || j >= rows) continue;
      const float sum = _mm512_reduce_add_ps(sums[x][y]);
      float& entry = c[j * ldc + i];
      entry = first ? sum : entry + sum;
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// The blocks on or above the diagonal of one column chunk [k0, k0 + width).
KVRANK_FSYRK_TARGET void chunk_blocks(Index rows, Index k0, Index width, const float* a, Index lda,
                                      float* c, Index ldc) {
  const Index steps = width / kLanes;
  const Index tail = width % kLanes;
  for (Index i0 = 0; i0 < rows; i0 += kBlock) {
    const BlockRows is(a, lda, i0, rows, k0);
    for (Index j0 = i0; j0 < rows; j0 += kBlock)
      register_block(is, BlockRows(a, lda, j0, rows, k0), steps, tail, i0, j0, rows, k0 == 0, c,
                     ldc);
  }
}

#endif  // KVRANK_FSYRK_KERNEL

}  // namespace
}  // namespace float_syrk

bool float_syrk_kernel_supported() noexcept {
#ifdef KVRANK_FSYRK_KERNEL
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
#else
  return false;
#endif
}

void float_syrk_kernel(Index rows, Index inner, const float* a, Index lda, float* c, Index ldc) {
#ifdef KVRANK_FSYRK_KERNEL
  using namespace float_syrk;
  if (inner == 0) {
    for (Index j = 0; j < rows; ++j) std::fill(c + j * ldc, c + j * ldc + j + 1, 0.0f);
    return;
  }
  for (Index k0 = 0; k0 < inner; k0 += kChunkColumns)
    chunk_blocks(rows, k0, std::min(kChunkColumns, inner - k0), a, lda, c, ldc);
#else
  (void)rows, (void)inner, (void)a, (void)lda, (void)c, (void)ldc;
  throw std::logic_error("float_syrk_kernel: not in this build");
#endif
}

}  // namespace kvrank::detail

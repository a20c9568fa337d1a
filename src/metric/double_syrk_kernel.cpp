// kvrank's AVX-512 kernel for A·Aᵀ in double (double_syrk_kernel.hpp).
//
// Panel q holds rows [8q, 8q + 8) of A as doubles, depth-major: row 8q + r at depth k is
// panel[k · 8 + r] (rows past `rows` are zeros), so one depth step of a panel is one aligned zmm
// (a cache line) and the same line broadcasts each of its 8 rows.
//
// C's column j (column-major, i contiguous) against rows i: a register block is 8 rows j (one
// panel, a broadcast each) × 24 rows i (three panels, one load each): 24 accumulators, 8
// broadcasts and 3 loads per 24 FMAs, 28 of the 32 zmm registers. Only panels q ≤ the column
// panel are formed (the diagonal panel's entries below the diagonal too, with their true values);
// the strict lower triangle is then copied from the upper.
//
// The whole depth in one pass, no slices: measured (bench/double_syrk.cpp, one thread), slices of
// 128, 256 or 512 carried across by storing the accumulators into C and loading them back (the
// same bits) were no faster at 192 × 1536 and 192 × 576, and 7–15 % slower at 256 × 4096: the
// hardware prefetcher keeps the four streams of a register block (one cache line per depth step
// each) ahead of 24 FMAs per step.
#include "metric/double_syrk_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVRANK_DSYRK_KERNEL 1
#include <immintrin.h>
/// Compiled for AVX-512F per function: the binary still runs on any x86-64.
#define KVRANK_DSYRK_TARGET __attribute__((target("avx512f")))
#endif

namespace kvrank::detail {
// A namespace of its own: the library is built as one unity file per layer, where the bf16
// kernel's anonymous namespace holds names like these.
namespace double_syrk {
namespace {

#ifdef KVRANK_DSYRK_KERNEL

constexpr Index kLanes = 8;  // doubles in a zmm: the rows of a panel
constexpr int kRows = 8;     // a register block's rows j (broadcasts): one panel
constexpr int kPanels = 3;   // a register block's panels of rows i (loads)

/// Panel buffers up to this size stay with their thread for the next call (a V3 head's: 2.4 MB);
/// a larger one-off product's (diff's stacked bases, hundreds of MB) is freed after it.
constexpr std::size_t kKeptDoubles = std::size_t(4) << 20;

/// The calling thread's panel buffer, kept call after call (one head after another).
std::vector<double>& thread_buffer() {
  thread_local std::vector<double> buffer;
  return buffer;
}

/// `doubles` of `buffer`, 64-byte aligned.
double* aligned_panels(std::vector<double>& buffer, Index doubles) {
  const auto needed = static_cast<std::size_t>(doubles + kLanes);  // + the alignment's slack
  if (buffer.size() < needed) buffer.resize(needed);
  const auto address = reinterpret_cast<std::uintptr_t>(buffer.data());
  const std::uintptr_t aligned = (address + 63) & ~std::uintptr_t(63);
  return buffer.data() + (aligned - address) / sizeof(double);
}

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 reads the _mm512_undefined_pd() of these intrinsics' unmasked forms as maybe
// uninitialized (a false positive of its headers); the pragma covers the packing only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

/// Transposes the 8 × 8 doubles in `row` (row r, depth c) into `column` (depth c, row r).
KVRANK_DSYRK_TARGET inline void transpose8(const __m512d (&row)[8], __m512d (&column)[8]) {
  __m512d pairs[8];  // unpack: 128-bit lane l of pairs[2s] is (row 2s, row 2s+1) at depth 2l
  for (int s = 0; s < 4; ++s) {
    pairs[2 * s] = _mm512_unpacklo_pd(row[2 * s], row[2 * s + 1]);
    pairs[2 * s + 1] = _mm512_unpackhi_pd(row[2 * s], row[2 * s + 1]);  // depth 2l + 1
  }
  for (int odd = 0; odd < 2; ++odd) {
    const __m512d* p = pairs + odd;  // p[0], p[2], p[4], p[6]: rows 0-1, 2-3, 4-5, 6-7
    const __m512d low_rows_even = _mm512_shuffle_f64x2(p[0], p[2], 0x88);  // lanes 0, 2 of each
    const __m512d low_rows_odd = _mm512_shuffle_f64x2(p[0], p[2], 0xDD);   // lanes 1, 3
    const __m512d high_rows_even = _mm512_shuffle_f64x2(p[4], p[6], 0x88);
    const __m512d high_rows_odd = _mm512_shuffle_f64x2(p[4], p[6], 0xDD);
    column[odd + 0] = _mm512_shuffle_f64x2(low_rows_even, high_rows_even, 0x88);
    column[odd + 4] = _mm512_shuffle_f64x2(low_rows_even, high_rows_even, 0xDD);
    column[odd + 2] = _mm512_shuffle_f64x2(low_rows_odd, high_rows_odd, 0x88);
    column[odd + 6] = _mm512_shuffle_f64x2(low_rows_odd, high_rows_odd, 0xDD);
  }
}

/// Packs rows [first, first + 8) of A into `panel` (rows past `rows` zero): 8 × 8 blocks
/// converted and transposed in registers, the depth's last inner % 8 one by one.
KVRANK_DSYRK_TARGET void pack_panel(const float* a, Index lda, Index first, Index rows, Index inner,
                                    double* panel) {
  const Index valid = std::min<Index>(kLanes, rows - first);
  Index k = 0;
  for (; k + 8 <= inner; k += 8) {
    __m512d row[8], column[8];
    for (Index r = 0; r < 8; ++r) {
      row[r] = r < valid ? _mm512_cvtps_pd(_mm256_loadu_ps(a + (first + r) * lda + k))
                         : _mm512_setzero_pd();
    }
    transpose8(row, column);
    for (Index c = 0; c < 8; ++c) _mm512_store_pd(panel + (k + c) * kLanes, column[c]);
  }
  for (; k < inner; ++k) {
    for (Index r = 0; r < kLanes; ++r) {
      panel[k * kLanes + r] = r < valid ? static_cast<double>(a[(first + r) * lda + k]) : 0.0;
    }
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Lane masks of a register block whose rows i start at `first_row`: rows ≥ `rows` are not
/// stored (a panel's low `valid` lanes, 0 to 8 of them).
struct LaneMasks {
  __mmask8 lanes[kPanels];
  LaneMasks(Index first_row, Index rows) {
    for (int v = 0; v < kPanels; ++v) {
      const Index valid = std::clamp<Index>(rows - first_row - v * kLanes, 0, kLanes);
      lanes[v] = static_cast<__mmask8>(0xFFu >> (kLanes - valid));
    }
  }
};

/// Where a register block reads and writes: rows j from `j_panel`, rows i from `Vecs` panels from
/// `i_panels` (`stride` apart); C at column j, row i (`out`, columns `ld` apart), of which
/// `columns` (≤ 8) exist.
struct BlockAt {
  const double* j_panel;
  const double* i_panels;
  Index stride;
  double* out;
  Index ld;
  Index columns;
};

/// One register block over the whole depth, each accumulator one FMA chain from zero.
template <int Vecs>
KVRANK_DSYRK_TARGET void register_block(const BlockAt& at, Index depth, const LaneMasks& masks) {
  __m512d sums[kRows][Vecs] = {};  // zeros
  for (Index k = 0; k < depth; ++k) {
    __m512d panel[Vecs];
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v)
      panel[v] = _mm512_load_pd(at.i_panels + v * at.stride + k * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512d row = _mm512_set1_pd(at.j_panel[k * kLanes + r]);
#pragma GCC unroll 4
      for (int v = 0; v < Vecs; ++v) sums[r][v] = _mm512_fmadd_pd(panel[v], row, sums[r][v]);
    }
  }
  for (Index r = 0; r < at.columns; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v)
      _mm512_mask_storeu_pd(at.out + r * at.ld + v * kLanes, masks.lanes[v], sums[r][v]);
  }
}

/// The packed panels of A and C's shape.
struct PackedRows {
  const double* panels;
  Index stride;  // doubles from one panel to the next: inner · 8
  Index count;   // ceil(rows / 8)
  Index rows;
};

/// Column panel `jp` of C against row panels [q, q + vecs).
KVRANK_DSYRK_TARGET void run_register_block(const PackedRows& packed, Index jp, Index q, Index vecs,
                                            double* c) {
  const Index rows = packed.rows;
  const BlockAt at{packed.panels + jp * packed.stride,
                   packed.panels + q * packed.stride,
                   packed.stride,
                   c + jp * kLanes * rows + q * kLanes,
                   rows,
                   std::min<Index>(kRows, rows - jp * kLanes)};
  const LaneMasks masks(q * kLanes, rows);
  const Index depth = packed.stride / kLanes;
  switch (vecs) {
    case 1:
      register_block<1>(at, depth, masks);
      break;
    case 2:
      register_block<2>(at, depth, masks);
      break;
    default:
      register_block<3>(at, depth, masks);
  }
}

/// The upper triangle of C (and the diagonal panels whole): column panel by column panel, its row
/// panels up to the diagonal's three at a time; the column panels over the threads with `threaded`
/// (each entry is still one chain over the whole depth: the same bits on any number of threads).
void upper_blocks(const PackedRows& packed, double* c, [[maybe_unused]] bool threaded) {
#pragma omp parallel for schedule(dynamic) if (threaded)
  for (Index jp = 0; jp < packed.count; ++jp) {
    for (Index q = 0; q <= jp; q += kPanels)
      run_register_block(packed, jp, q, std::min<Index>(kPanels, jp + 1 - q), c);
  }
}

/// C's strict lower triangle from its upper one (column-major, rows × rows), in 8 × 8 tiles: a
/// tile's reads are 8 cache lines and its writes 8 more, where a whole column's copy strided
/// across all of C (192 × 576: 0.19 ms a call against 0.22, bench/double_syrk.cpp).
void mirror_upper(Index rows, double* c) {
  for (Index j0 = 0; j0 < rows; j0 += kLanes) {
    const Index j_end = std::min(j0 + kLanes, rows);
    for (Index i0 = 0; i0 <= j0; i0 += kLanes) {
      for (Index j = j0; j < j_end; ++j) {
        for (Index i = i0; i < std::min(i0 + kLanes, j); ++i) c[i * rows + j] = c[j * rows + i];
      }
    }
  }
}

#endif  // KVRANK_DSYRK_KERNEL

}  // namespace
}  // namespace double_syrk

bool double_syrk_kernel_supported() noexcept {
#ifdef KVRANK_DSYRK_KERNEL
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
#else
  return false;
#endif
}

void double_syrk_kernel(Index rows, Index inner, const float* a, Index lda, double* out,
                        bool threaded) {
#ifdef KVRANK_DSYRK_KERNEL
  using namespace double_syrk;
  const Index count = (rows + kLanes - 1) / kLanes;
  const Index stride = inner * kLanes;
  std::vector<double>& buffer = thread_buffer();
  double* panels = aligned_panels(buffer, count * stride);
  threaded = threaded && count > 1;
#pragma omp parallel for schedule(static) if (threaded)
  for (Index q = 0; q < count; ++q)
    pack_panel(a, lda, q * kLanes, rows, inner, panels + q * stride);
  upper_blocks({panels, stride, count, rows}, out, threaded);
  mirror_upper(rows, out);
  if (buffer.size() > kKeptDoubles) std::vector<double>().swap(buffer);
#else
  (void)rows, (void)inner, (void)a, (void)lda, (void)out, (void)threaded;
  throw std::logic_error("double_syrk_kernel: not in this build");
#endif
}

}  // namespace kvrank::detail

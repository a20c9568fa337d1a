// kvrank's AVX512-BF16 Gram kernel (bf16_gram_kernel.hpp).
//
// Layout. Panel q holds rows [16q, 16q + 16) of the basis (rows past m are zeros); its word
// (p, r), at p·16 + r, is row 16q + r's values at depth 2p (low half) and 2p + 1 (high half) as
// bf16s — the pair vdpbf16ps multiplies and adds into one float32 lane. A panel's 16 words of one
// pair are one zmm register; the same words broadcast one row's pair to all 16 lanes.
//
// G's column j (column-major, i contiguous) against rows i: a register block is 8 rows j (a
// broadcast each) × 48 rows i (three panels, one zmm each): 24 accumulators, 8 broadcasts and 3
// loads per 24 vdpbf16ps. Over a depth slice of 256 (128 pairs) the block sums in registers from
// zero, then is stored into G (first slice) or added to it: each entry of G is
// ((s₁ + s₂) + s₃) + … of float32 chains of 256, as the oneDNN path's slices and sum post-op.
//
// Cache: a thread takes a block of G of 256 columns j × 288 rows i (those up to the diagonal),
// loops over the depth slices, and in each over its 8-column blocks and, for each, the panels of
// its rows i up to the diagonal: one slice of the block's panels (272 KB) and its part of G
// (288 KB) stay in L2 (1 MB on Zen 4), a register block's slice of its three panels (24 KB) in L1.
// Nothing in the kernel depends on the thread count: each entry's sum is the same on any.
#include "metric/bf16_gram_kernel.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/guarded_read.hpp"
#include "base/pages.hpp"
#include "metric/thread_pool.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVRANK_BF16_KERNEL 1
#include <immintrin.h>
#endif

namespace kvrank::detail {
namespace {

#ifdef KVRANK_BF16_KERNEL

#define KVRANK_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

constexpr Index kPanelRows = 16;    // rows of a panel: the 16 float32 lanes of a zmm register
constexpr Index kSlicePairs = 128;  // a depth slice of 256 values (docs/choices.md)
// A thread's block of G: 256 columns j × 288 rows i (a whole number of register blocks: a block of
// 256 rows ended each row of register blocks with one of a single panel, 10 % of the time).
constexpr Index kBlockColumns = 256;
constexpr Index kBlockRows = 288;
constexpr int kRows = 8;              // a register block's columns j (broadcasts)
constexpr int kPanels = 3;            // a register block's panels of rows i (loads)
constexpr Index kPrefetchPairs = 16;  // how far ahead register_block asks for a panel's lines

/// The packed basis: panel q, pair p, row r at words[q · stride + p · 16 + r].
struct Panels {
  const std::uint32_t* words = nullptr;
  Index stride = 0;  // words from one panel to the next
  Index pairs = 0;   // ceil(d / 2)
  Index count = 0;   // ceil(m / 16)
};

std::uint32_t float_bits(float value) noexcept { return std::bit_cast<std::uint32_t>(value); }

/// Row `row`'s words (pairs of bf16 high halves) from pair `from` on into panel slot `out` (stride
/// 16 words); returns the OR of the low halves (non-zero: some value is not a bf16).
std::uint32_t pack_row(const float* row, Index d, Index from, std::uint32_t* out) {
  std::uint32_t low = 0;
  const Index whole = d / 2;
  for (Index p = from; p < whole; ++p) {
    const std::uint32_t even = float_bits(row[2 * p]);
    const std::uint32_t odd = float_bits(row[2 * p + 1]);
    low |= (even | odd) & 0xFFFFu;
    out[p * kPanelRows] = (odd & 0xFFFF0000u) | (even >> 16);
  }
  if (d % 2 != 0) {  // the last pair's second value is a zero
    const std::uint32_t even = float_bits(row[d - 1]);
    low |= even & 0xFFFFu;
    out[whole * kPanelRows] = even >> 16;
  }
  return low;
}

// GCC 12 takes the undefined pass-through operand of its unpack intrinsics
// (_mm512_undefined_epi32) for an uninitialised variable.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
/// A 16 × 16 block of 32-bit words transposed in registers: words[r] lane p → words[p] lane r.
KVRANK_BF16_TARGET void transpose_words(__m512i (&words)[kPanelRows]) {
  __m512i pairs[kPanelRows];  // per 128-bit lane: rows 2i, 2i + 1 interleaved
  for (int i = 0; i < 8; ++i) {
    pairs[2 * i] = _mm512_unpacklo_epi32(words[2 * i], words[2 * i + 1]);
    pairs[2 * i + 1] = _mm512_unpackhi_epi32(words[2 * i], words[2 * i + 1]);
  }
  __m512i quads[kPanelRows];  // quads[4i + k], 128-bit lane L: rows 4i..4i+3 of column 4L + k
  for (int i = 0; i < 4; ++i) {
    quads[4 * i] = _mm512_unpacklo_epi64(pairs[4 * i], pairs[4 * i + 2]);
    quads[4 * i + 1] = _mm512_unpackhi_epi64(pairs[4 * i], pairs[4 * i + 2]);
    quads[4 * i + 2] = _mm512_unpacklo_epi64(pairs[4 * i + 1], pairs[4 * i + 3]);
    quads[4 * i + 3] = _mm512_unpackhi_epi64(pairs[4 * i + 1], pairs[4 * i + 3]);
  }
  for (int k = 0; k < 4; ++k) {  // the 4 × 4 transpose of 128-bit lanes
    const __m512i low01 = _mm512_shuffle_i32x4(quads[k], quads[4 + k], 0x44);
    const __m512i high01 = _mm512_shuffle_i32x4(quads[k], quads[4 + k], 0xEE);
    const __m512i low23 = _mm512_shuffle_i32x4(quads[8 + k], quads[12 + k], 0x44);
    const __m512i high23 = _mm512_shuffle_i32x4(quads[8 + k], quads[12 + k], 0xEE);
    words[k] = _mm512_shuffle_i32x4(low01, low23, 0x88);
    words[4 + k] = _mm512_shuffle_i32x4(low01, low23, 0xDD);
    words[8 + k] = _mm512_shuffle_i32x4(high01, high23, 0x88);
    words[12 + k] = _mm512_shuffle_i32x4(high01, high23, 0xDD);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// The 16 full rows from `rows` (d apart) into `panel`, 16 pairs (32 values of each row) at a time
/// — read along the rows, written a line at a time — and the rest by pack_row. Returns the OR of
/// the low halves.
KVRANK_BF16_TARGET std::uint32_t pack_full_panel(const float* rows, Index d, std::uint32_t* panel) {
  // The high halves of 32 floats (two registers), in order: 16 words of pairs.
  alignas(64) static constexpr std::uint16_t kHighHalves[32] = {
      1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
      33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  const __m512i high_halves = _mm512_load_si512(kHighHalves);
  __m512i low = _mm512_setzero_si512();
  const Index chunks = d / (2 * kPanelRows);
  for (Index c = 0; c < chunks; ++c) {
    __m512i words[kPanelRows];
    for (Index r = 0; r < kPanelRows; ++r) {
      const float* values = rows + r * d + c * 2 * kPanelRows;
      const __m512i even = _mm512_loadu_si512(values);
      const __m512i odd = _mm512_loadu_si512(values + kPanelRows);
      low = _mm512_or_si512(low, _mm512_or_si512(even, odd));
      words[r] = _mm512_permutex2var_epi16(even, high_halves, odd);
    }
    transpose_words(words);
    for (Index p = 0; p < kPanelRows; ++p) {
      _mm512_store_si512(panel + (c * kPanelRows + p) * kPanelRows, words[p]);
    }
  }
  std::uint32_t rest = 0;
  for (Index r = 0; r < kPanelRows; ++r) {
    rest |= pack_row(rows + r * d, d, chunks * kPanelRows, panel + r);
  }
  const bool bf16 = _mm512_test_epi32_mask(low, _mm512_set1_epi32(0xFFFF)) == 0;
  return rest | (bf16 ? 0u : 1u);
}

/// The panels' geometry for an m × d basis (no words yet).
Panels panel_shape(Index m, Index d) {
  Panels panels;
  panels.pairs = (d + 1) / 2;
  // One line more per panel: a stride of a multiple of 4 KiB put every panel's pair p in the same
  // L1 set.
  panels.stride = panels.pairs * kPanelRows + kPanelRows;
  panels.count = (m + kPanelRows - 1) / kPanelRows;
  return panels;
}

/// Words the buffer holds: the panels, then the 16 pairs register_block prefetches ahead past the
/// last one, and the alignment's slack.
Index panel_words(const Panels& panels) {
  return panels.count * panels.stride + kPrefetchPairs * kPanelRows + kPanelRows;
}

/// Sizes `buffer` for the panels of an m × d basis (prefaulted when it grows) and returns them,
/// their words 64-byte aligned.
Panels panel_buffer(Index m, Index d, std::vector<std::uint32_t>& buffer) {
  Panels panels = panel_shape(m, d);
  const auto words = static_cast<std::size_t>(panel_words(panels));
  if (buffer.capacity() < words) {
    buffer = std::vector<std::uint32_t>();
    buffer.reserve(words);
    detail::prefault_for_write(buffer.data(), words * sizeof(std::uint32_t));
  }
  buffer.resize(words);
  const auto misalignment = reinterpret_cast<std::uintptr_t>(buffer.data()) % 64;
  panels.words = buffer.data() + (misalignment == 0 ? 0 : (64 - misalignment) / 4);
  return panels;
}

/// Panel q of an m-row basis: full panels by `full(first_row, panel)`, the last partial one row by
/// row by `row(row, panel slot)`, its missing rows zero.
template <typename Full, typename Row>
void pack_panel(const Panels& panels, Index m, Index q, Full&& full, Row&& row) {
  std::uint32_t* panel = const_cast<std::uint32_t*>(panels.words) + q * panels.stride;
  if (q * kPanelRows + kPanelRows <= m) {
    full(q * kPanelRows, panel);
    return;
  }
  for (Index r = 0; r < kPanelRows; ++r) {
    if (q * kPanelRows + r < m) {
      row(q * kPanelRows + r, panel + r);
    } else {
      for (Index p = 0; p < panels.pairs; ++p) panel[p * kPanelRows + r] = 0;
    }
  }
}

/// Packs `basis` into panels in `buffer`; false when some value is not a bf16 (a float32 basis is
/// usually caught by its first row, before the full pass).
bool pack_panels(const RowMatrixF& basis, std::vector<std::uint32_t>& buffer, Panels& panels) {
  const Index m = basis.rows();
  const Index d = basis.cols();
  for (Index k = 0; k < d; ++k) {
    if ((float_bits(basis(0, k)) & 0xFFFFu) != 0) return false;
  }
  panels = panel_buffer(m, d, buffer);
  std::uint32_t low = 0;
  const Index count = panels.count;
#pragma omp parallel for reduction(| : low) schedule(static) if (copy_worth_threads(m * d))
  for (Index q = 0; q < count; ++q) {
    pack_panel(
        panels, m, q,
        [&](Index first, std::uint32_t* panel) {
          low |= pack_full_panel(basis.data() + first * d, d, panel);
        },
        [&](Index row, std::uint32_t* slot) {
          low |= pack_row(basis.data() + row * d, d, 0, slot);
        });
  }
  return low == 0;
}

/// Row `row` of stored bf16 values (2·d bytes) from pair `from` on into panel slot `out`: two
/// consecutive bf16s, read as a little-endian word, are already a pair (even value low).
void pack_stored_row(const std::byte* row, Index d, Index from, std::uint32_t* out) {
  const Index whole = d / 2;
  for (Index p = from; p < whole; ++p) std::memcpy(out + p * kPanelRows, row + 4 * p, 4);
  if (d % 2 != 0) {  // the last pair's second value is a zero
    std::uint16_t last = 0;
    std::memcpy(&last, row + 2 * (d - 1), 2);
    out[whole * kPanelRows] = last;
  }
}

/// The 16 full rows of stored bf16 values from `rows` (2·d bytes apart) into `panel`: 32 values of
/// a row in one load are its 16 words, so each chunk is 16 loads, the transpose and 16 stores.
KVRANK_BF16_TARGET void pack_stored_panel(const std::byte* rows, Index d, std::uint32_t* panel) {
  const Index chunks = d / (2 * kPanelRows);
  for (Index c = 0; c < chunks; ++c) {
    __m512i words[kPanelRows];
    for (Index r = 0; r < kPanelRows; ++r)
      words[r] = _mm512_loadu_si512(rows + 2 * (r * d + c * 2 * kPanelRows));
    transpose_words(words);
    for (Index p = 0; p < kPanelRows; ++p)
      _mm512_store_si512(panel + (c * kPanelRows + p) * kPanelRows, words[p]);
  }
  for (Index r = 0; r < kPanelRows; ++r)
    pack_stored_row(rows + 2 * r * d, d, chunks * kPanelRows, panel + r);
}

/// Packs stored bf16 rows into panels in `buffer`, each panel's reads guarded (guarded_read.hpp);
/// false when one met a page its file no longer backs.
bool pack_stored_panels(const StoredBf16Rows& rows, std::vector<std::uint32_t>& buffer,
                        Panels& panels) {
  const Index m = rows.rows;
  const Index d = rows.cols;
  panels = panel_buffer(m, d, buffer);
  const std::byte* bytes = rows.bytes.data();
  bool complete = true;
  const Index count = panels.count;
#pragma omp parallel for reduction(&& : complete) schedule(static) if (copy_worth_threads(m * d))
  for (Index q = 0; q < count; ++q) {
    complete = guarded_read([&] {
                 pack_panel(
                     panels, m, q,
                     [&](Index first, std::uint32_t* panel) {
                       pack_stored_panel(bytes + 2 * first * d, d, panel);
                     },
                     [&](Index row, std::uint32_t* slot) {
                       pack_stored_row(bytes + 2 * row * d, d, 0, slot);
                     });
               }) &&
               complete;
  }
  return complete;
}

/// The largest of `count` bf16 magnitudes (sign cleared) at `values`.
KVRANK_BF16_TARGET std::uint16_t largest_magnitude(const std::byte* values, std::size_t count) {
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
  __m512i largest = _mm512_setzero_si512();
  std::size_t i = 0;
  for (; i + 32 <= count; i += 32)
    largest =
        _mm512_max_epu16(largest, _mm512_and_si512(_mm512_loadu_si512(values + 2 * i), magnitude));
  alignas(64) std::uint16_t lanes[32];
  _mm512_store_si512(lanes, largest);
  std::uint16_t result = *std::max_element(lanes, lanes + 32);
  for (; i < count; ++i) {
    std::uint16_t value = 0;
    std::memcpy(&value, values + 2 * i, 2);
    result = std::max<std::uint16_t>(result, value & 0x7FFF);
  }
  return result;
}

/// Lane masks of a register block whose rows i start at `first_row`: rows ≥ m are not stored.
struct LaneMasks {
  __mmask16 lanes[kPanels];
  LaneMasks(Index first_row, Index m) {
    for (int v = 0; v < kPanels; ++v) {
      const Index valid = m - first_row - v * kPanelRows;
      lanes[v] = valid >= kPanelRows ? __mmask16(0xFFFF)
                 : valid <= 0        ? __mmask16(0)
                                     : static_cast<__mmask16>((1u << valid) - 1);
    }
  }
};

/// One register block over one depth slice of `pairs` pairs: columns j = the `rows` (≤ kRows)
/// rows whose words start at `j_words`, rows i = `Vecs` panels from `i_words` (`stride` apart);
/// stored into `out` (G at column j, row i; columns `ld` apart) when `first`, else added to it.
template <int Vecs>
KVRANK_BF16_TARGET void register_block(const std::uint32_t* j_words, const std::uint32_t* i_words,
                                       Index stride, Index pairs, float* out, Index ld, Index rows,
                                       const LaneMasks& masks, bool first) {
  __m512 sums[kRows][Vecs];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v) sums[r][v] = _mm512_setzero_ps();
  }
  for (Index p = 0; p < pairs; ++p) {
    __m512i panel[Vecs];
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v) {
      panel[v] = _mm512_load_si512(i_words + v * stride + p * kPanelRows);
      // Each panel's next lines asked for ahead of the hardware's prefetcher, which takes a few
      // misses to find each new block's three streams (about 2 % of the time at 4096²).
      _mm_prefetch(
          reinterpret_cast<const char*>(i_words + v * stride + (p + kPrefetchPairs) * kPanelRows),
          _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m512i pair = _mm512_set1_epi32(static_cast<int>(j_words[p * kPanelRows + r]));
#pragma GCC unroll 4
      for (int v = 0; v < Vecs; ++v) {
        sums[r][v] = _mm512_dpbf16_ps(sums[r][v], (__m512bh)panel[v], (__m512bh)pair);
      }
    }
  }
  for (Index r = 0; r < rows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < Vecs; ++v) {
      float* column = out + r * ld + v * kPanelRows;
      const __m512 before =
          first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(masks.lanes[v], column);
      _mm512_mask_storeu_ps(column, masks.lanes[v], _mm512_add_ps(before, sums[r][v]));
    }
  }
}

/// One register block of rows i from panel q (vecs panels), columns jb (rows of them).
KVRANK_BF16_TARGET void run_register_block(const Panels& panels, Index m, Index p0, Index pairs,
                                           Index jb, Index q, Index vecs, float* gram) {
  const Index j_panel = jb / kPanelRows;
  const std::uint32_t* j_words =
      panels.words + j_panel * panels.stride + p0 * kPanelRows + jb % kPanelRows;
  const Index rows = std::min<Index>(kRows, m - jb);
  const std::uint32_t* i_words = panels.words + q * panels.stride + p0 * kPanelRows;
  float* out = gram + jb * m + q * kPanelRows;
  const LaneMasks masks(q * kPanelRows, m);
  const bool first = p0 == 0;
  switch (vecs) {
    case 1:
      register_block<1>(j_words, i_words, panels.stride, pairs, out, m, rows, masks, first);
      break;
    case 2:
      register_block<2>(j_words, i_words, panels.stride, pairs, out, m, rows, masks, first);
      break;
    default:
      register_block<3>(j_words, i_words, panels.stride, pairs, out, m, rows, masks, first);
  }
}

/// The block of G at columns [j0, j0 + kBlockColumns), rows [i0, i0 + kBlockRows) ∩ [0, j], over
/// the whole depth.
KVRANK_BF16_TARGET void gram_block(const Panels& panels, Index m, Index j0, Index i0, float* gram) {
  const Index j_end = std::min(j0 + kBlockColumns, m);
  const Index tile_panels_end = std::min((i0 + kBlockRows) / kPanelRows, panels.count);
  for (Index p0 = 0; p0 < panels.pairs; p0 += kSlicePairs) {
    const Index pairs = std::min(kSlicePairs, panels.pairs - p0);
    for (Index jb = j0; jb < j_end; jb += kRows) {
      const Index end = std::min(tile_panels_end, jb / kPanelRows + 1);  // to the diagonal's panel
      for (Index q = i0 / kPanelRows; q < end; q += kPanels) {
        run_register_block(panels, m, p0, pairs, jb, q, std::min<Index>(kPanels, end - q), gram);
      }
    }
  }
}

/// A thread's share: one 256 × 256 block of the triangle, `work` its multiply-adds per depth.
struct TriangleBlock {
  Index j0 = 0;
  Index i0 = 0;
  Index work = 0;
};

/// The triangle's blocks, the most work first (the diagonal ones do about half an off-diagonal
/// one's), for a dynamic schedule to end evenly.
std::vector<TriangleBlock> triangle_blocks(Index m) {
  std::vector<TriangleBlock> blocks;
  for (Index j0 = 0; j0 < m; j0 += kBlockColumns) {
    const Index j_end = std::min(j0 + kBlockColumns, m);
    for (Index i0 = 0; i0 < j_end; i0 += kBlockRows) {
      Index work = 0;  // the entries of the block on or above the diagonal
      for (Index j = j0; j < j_end; ++j) work += std::clamp<Index>(j + 1 - i0, 0, kBlockRows);
      blocks.push_back({j0, i0, work});
    }
  }
  std::stable_sort(blocks.begin(), blocks.end(),
                   [](const TriangleBlock& a, const TriangleBlock& b) { return a.work > b.work; });
  return blocks;
}

void bf16_triangle(const Panels& panels, Index m, float* gram) {
  const std::vector<TriangleBlock> blocks = triangle_blocks(m);
  const auto count = static_cast<Index>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) if (count > 1)
  for (Index b = 0; b < count; ++b) gram_block(panels, m, blocks[b].j0, blocks[b].i0, gram);
}

#endif  // KVRANK_BF16_KERNEL

}  // namespace

std::uint64_t bf16_kernel_buffer_bytes(Index m, Index d) noexcept {
#ifdef KVRANK_BF16_KERNEL
  return static_cast<std::uint64_t>(panel_words(panel_shape(m, d))) * sizeof(std::uint32_t);
#else
  (void)m, (void)d;
  return 0;
#endif
}

bool bf16_kernel_supported() noexcept {
#ifdef KVRANK_BF16_KERNEL
  static const bool supported =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return supported;
#else
  return false;
#endif
}

bool bf16_kernel_gram_upper(const RowMatrixF& basis, MatrixF& gram) {
  if (!bf16_kernel_supported()) return false;
#ifdef KVRANK_BF16_KERNEL
  // Per-thread buffer, reused layer after layer (as gram_backend.cpp's packed rows).
  thread_local std::vector<std::uint32_t> buffer;
  Panels panels;
  if (!pack_panels(basis, buffer, panels)) return false;
  bf16_triangle(panels, basis.rows(), gram.data());
  return true;
#else
  (void)basis, (void)gram;
  return false;
#endif
}

std::optional<std::uint16_t> stored_bf16_largest_bits(std::span<const std::byte> bytes) noexcept {
#ifdef KVRANK_BF16_KERNEL
  if (!bf16_kernel_supported()) return std::nullopt;
  constexpr std::size_t kChunk = std::size_t(1) << 19;  // values a guarded read takes at once
  const std::size_t count = bytes.size() / 2;
  const auto chunks = static_cast<Index>((count + kChunk - 1) / kChunk);
  std::uint16_t largest = 0;
  bool complete = true;
#pragma omp parallel for reduction(max : largest) reduction(&& : complete) \
    if (copy_worth_threads(static_cast<Index>(count)))
  for (Index c = 0; c < chunks; ++c) {
    const std::size_t first = static_cast<std::size_t>(c) * kChunk;
    std::uint16_t part = 0;
    complete = guarded_read([&] {
                 part =
                     largest_magnitude(bytes.data() + 2 * first, std::min(kChunk, count - first));
               }) &&
               complete;
    largest = std::max(largest, part);
  }
  if (!complete) return std::nullopt;
  return largest;
#else
  (void)bytes;
  return std::nullopt;
#endif
}

bool bf16_kernel_gram_upper(const StoredBf16Rows& rows, MatrixF& gram) {
  if (!bf16_kernel_supported()) return false;
#ifdef KVRANK_BF16_KERNEL
  thread_local std::vector<std::uint32_t> buffer;  // as for a float32 basis
  Panels panels;
  if (!pack_stored_panels(rows, buffer, panels)) return false;
  bf16_triangle(panels, rows.rows, gram.data());
  return true;
#else
  (void)rows, (void)gram;
  return false;
#endif
}

}  // namespace kvrank::detail

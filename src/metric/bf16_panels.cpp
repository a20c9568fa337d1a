// The bf16 Gram kernel's panels (bf16_panels.hpp): their geometry, their packing from float32
// rows of bf16 values or from stored bf16 rows.
#include "metric/bf16_panels.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/guarded_read.hpp"
#include "base/pages.hpp"
#include "metric/bf16_bits.hpp"
#include "metric/bf16_gram_kernel.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank::detail {

Panels panel_shape(Index m, Index d) {
  Panels panels;
  panels.pairs = (d + 1) / 2;
  // One line more per panel: a stride of a multiple of 4 KiB put every panel's pair p in the same
  // L1 set.
  panels.stride = panels.pairs * kPanelRows + kPanelRows;
  panels.count = (m + kPanelRows - 1) / kPanelRows;
  return panels;
}

Index panel_words(const Panels& panels) {
  return panels.count * panels.stride + kPrefetchPairs * kPanelRows + kPanelRows;
}

#ifdef KVRANK_BF16_KERNEL

namespace {

/// Row `row`'s words (pairs of bf16 high halves) from pair `from` on into panel slot `out` (stride
/// 16 words); returns the OR of the low halves (non-zero: some value is not a bf16).
std::uint32_t pack_row(const float* row, Index d, Index from, std::uint32_t* out) {
  std::uint32_t low = 0;
  const Index whole = d / 2;
  for (Index p = from; p < whole; ++p) {
    const std::uint32_t even = float_bits(row[2 * p]);
    const std::uint32_t odd = float_bits(row[2 * p + 1]);
    low |= (even | odd) & kLowHalf;
    out[p * kPanelRows] = (odd & 0xFFFF0000u) | (even >> 16);
  }
  if (d % 2 != 0) {  // the last pair's second value is a zero
    const std::uint32_t even = float_bits(row[d - 1]);
    low |= even & kLowHalf;
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

}  // namespace

bool pack_panels(const RowMatrixF& basis, std::vector<std::uint32_t>& buffer, Panels& panels) {
  const Index m = basis.rows();
  const Index d = basis.cols();
  if (!all_bf16(basis.data(), d)) return false;  // the first row, before any allocation
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

#endif  // KVRANK_BF16_KERNEL

}  // namespace kvrank::detail

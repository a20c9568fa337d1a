// Private: the packed panels kvrank's AVX512-BF16 Gram kernel reads (bf16_gram_kernel.cpp), and
// their packing from float32 rows of bf16 values or from bf16 rows as a checkpoint stores them
// (bf16_panels.cpp).
//
// Panel q holds rows [16q, 16q + 16) of the basis (rows past m are zeros); its word (p, r), at
// p·16 + r, is row 16q + r's values at depth 2p (low half) and 2p + 1 (high half) as bf16s — the
// pair vdpbf16ps multiplies and adds into one float32 lane. A panel's 16 words of one pair are one
// zmm register; the same words broadcast one row's pair to all 16 lanes.
#pragma once

#include <cstdint>
#include <vector>

#include "kvrank/base/eigen.hpp"
#include "kvrank/base/factors.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVRANK_BF16_KERNEL 1
#include <immintrin.h>
/// Compiled for AVX512-BF16 per function: the binary still runs on any x86-64.
#define KVRANK_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

namespace kvrank::detail {

constexpr Index kPanelRows = 16;      // rows of a panel: the 16 float32 lanes of a zmm register
constexpr Index kPrefetchPairs = 16;  // how far ahead the kernel asks for a panel's lines

/// The packed basis: panel q, pair p, row r at words[q · stride + p · 16 + r].
struct Panels {
  const std::uint32_t* words = nullptr;
  Index stride = 0;  // words from one panel to the next
  Index pairs = 0;   // ceil(d / 2)
  Index count = 0;   // ceil(m / 16)
};

/// The panels' geometry for an m × d basis (no words yet).
Panels panel_shape(Index m, Index d);

/// Words a buffer holds for `panels`: the panels, the pairs the kernel prefetches past the last
/// one, and the alignment's slack.
Index panel_words(const Panels& panels);

#ifdef KVRANK_BF16_KERNEL
/// Packs `basis` into panels in `buffer` (over the threads when large); false when some value is
/// not a bf16 (a float32 basis is usually caught by its first row, before the full pass).
bool pack_panels(const RowMatrixF& basis, std::vector<std::uint32_t>& buffer, Panels& panels);

/// Packs stored bf16 rows into panels in `buffer`, each panel's reads guarded (guarded_read.hpp);
/// false when one met a page its file no longer backs.
bool pack_stored_panels(const StoredBf16Rows& rows, std::vector<std::uint32_t>& buffer,
                        Panels& panels);
#endif

}  // namespace kvrank::detail

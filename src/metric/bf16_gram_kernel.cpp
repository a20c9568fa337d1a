// kvrank's AVX512-BF16 Gram kernel (bf16_gram_kernel.hpp).
//
// The rows are packed into panels of 16 first (bf16_panels.hpp).
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
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "metric/bf16_panels.hpp"
#include "metric/blas.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank::detail {
namespace {

#ifdef KVRANK_BF16_KERNEL

constexpr Index kSlicePairs = 128;  // a depth slice of 256 values (docs/choices.md)
// A thread's block of G: 256 columns j × 288 rows i (a whole number of register blocks: a block of
// 256 rows ended each row of register blocks with one of a single panel, 10 % of the time).
constexpr Index kBlockColumns = 256;
constexpr Index kBlockRows = 288;
constexpr int kRows = 8;    // a register block's columns j (broadcasts)
constexpr int kPanels = 3;  // a register block's panels of rows i (loads)

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

/// One side's triangle blocks for bf16_kernel_gram_pair: handed out from the front (the most work
/// first) to its own thread and from the back to the other side's (a lock per claim: a block is
/// about a millisecond of work).
class BlockQueue {
 public:
  explicit BlockQueue(Index m)
      : blocks_(triangle_blocks(m)), back_(static_cast<Index>(blocks_.size())) {}
  std::optional<TriangleBlock> take(bool own) {
    const std::lock_guard<std::mutex> hold(lock_);
    if (front_ == back_) return std::nullopt;
    return blocks_[static_cast<std::size_t>(own ? front_++ : --back_)];
  }

 private:
  std::vector<TriangleBlock> blocks_;
  Index front_ = 0;
  Index back_;
  std::mutex lock_;
};

/// The calling thread's panel buffer, kept layer after layer (as gram_backend.cpp's packed rows):
/// one per thread, so that two Grams side by side or together hold two.
std::vector<std::uint32_t>& thread_panel_buffer() {
  thread_local std::vector<std::uint32_t> buffer;
  return buffer;
}

bool pack_side(const Bf16GramSide& side, Panels& panels) {
  return side.stored ? pack_stored_panels(*side.stored, thread_panel_buffer(), panels)
                     : pack_panels(*side.basis, thread_panel_buffer(), panels);
}

Index side_rows(const Bf16GramSide& side) {
  return side.stored ? side.stored->rows : side.basis->rows();
}

int thread_number() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

int team_size() {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

void bf16_triangle(const Panels& panels, Index m, float* gram) {
  const std::vector<TriangleBlock> blocks = triangle_blocks(m);
  const auto count = static_cast<Index>(blocks.size());
#pragma omp parallel for schedule(dynamic, 1) if (count > 1)
  for (Index b = 0; b < count; ++b) gram_block(panels, m, blocks[b].j0, blocks[b].i0, gram);
}

#endif  // KVRANK_BF16_KERNEL

/// One side's Gram on the threads of the pool (each block to one thread); false when its values
/// are not all bf16s or a read of stored rows failed (pack_side), or there is no kernel.
bool form_side_gram(const Bf16GramSide& side) {
#ifdef KVRANK_BF16_KERNEL
  Panels panels;
  if (!pack_side(side, panels)) return false;
  bf16_triangle(panels, side_rows(side), side.gram->data());
  return true;
#else
  (void)side;
  return false;
#endif
}

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
  return bf16_kernel_supported() && form_side_gram({&basis, nullptr, &gram});
}

bool bf16_kernel_gram_pair(const Bf16GramSide& left, const Bf16GramSide& right) {
  if (!bf16_kernel_supported()) return false;
#ifdef KVRANK_BF16_KERNEL
  const Bf16GramSide* sides[2] = {&left, &right};
  const Index rows[2] = {side_rows(left), side_rows(right)};
  Panels panels[2];
  bool packed[2] = {false, false};
  BlockQueue queues[2] = {BlockQueue(rows[0]), BlockQueue(rows[1])};
  int team = 1;
  [[maybe_unused]] const int threads = std::min(2, available_threads());
#pragma omp parallel num_threads(threads)
  {
    const int own = thread_number();
#pragma omp single
    team = team_size();
    if (team == 2) packed[own] = pack_side(*sides[own], panels[own]);
#pragma omp barrier
    if (team == 2 && packed[0] && packed[1]) {
      for (const int side : {own, 1 - own}) {
        while (const std::optional<TriangleBlock> block = queues[side].take(side == own))
          gram_block(panels[side], rows[side], block->j0, block->i0, sides[side]->gram->data());
      }
    }
  }
  if (team == 2) return packed[0] && packed[1];
  // One thread (no OpenMP, or a busy pool): one Gram after the other.
  return form_side_gram(left) && form_side_gram(right);
#else
  (void)left, (void)right;
  return false;
#endif
}

bool bf16_kernel_gram_upper(const StoredBf16Rows& rows, MatrixF& gram) {
  return bf16_kernel_supported() && form_side_gram({nullptr, &rows, &gram});
}

}  // namespace kvrank::detail

#include "base/pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

namespace kvrank::detail {
namespace {

/// Below this a call costs more than the faults it saves.
constexpr std::size_t kMinimumBytes = std::size_t(1) << 20;

constexpr std::uintptr_t kHugePage = std::uintptr_t(2) << 20;

void advise(std::uintptr_t begin, std::uintptr_t end, int advice) noexcept {
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

std::uintptr_t huge_page_above(std::uintptr_t address) noexcept {
  return (address + kHugePage - 1) & ~(kHugePage - 1);
}

/// MADV_POPULATE_WRITE of [begin, end), a large range in pieces spread over the threads: the
/// kernel zeroes the pages of a call on the calling thread, and on the VM measured that ran at
/// about 400 MB/s (a DeepSeek-V3 layer's first 900 MB of buffers: 1.3 s, all of it on one thread
/// while the other waited). The pieces are taken as the threads come free, not cut into equal
/// shares: the two vCPUs zeroed 75 MB shares in 89 and 157 ms, and with equal shares one waited for
/// the other. From 8 MB on: a 2.5B layer's two 21 MB Grams, populated on one thread while the other
/// waited, were 10 ms of its first layer's 70.
void populate_for_write(std::uintptr_t begin, std::uintptr_t end) noexcept {
  constexpr std::uintptr_t kPiece = std::uintptr_t(4) << 20;             // two huge pages
  [[maybe_unused]] constexpr std::uintptr_t kWorthThreads = 2 * kPiece;  // only OpenMP's clause
  const std::uintptr_t first_cut = std::min(end, huge_page_above(begin));
  const auto pieces = static_cast<std::int64_t>((end - first_cut + kPiece - 1) / kPiece);
  advise(begin, first_cut, MADV_POPULATE_WRITE);  // up to the first huge-page boundary
#pragma omp parallel for schedule(dynamic) if (end - begin >= kWorthThreads)
  for (std::int64_t piece = 0; piece < pieces; ++piece) {
    const std::uintptr_t from = first_cut + static_cast<std::uintptr_t>(piece) * kPiece;
    advise(from, std::min(end, from + kPiece), MADV_POPULATE_WRITE);
  }
}

/// Whether the first and the last whole page inside [begin, end) are both mapped already
/// (mincore). Such a buffer is memory the heap has handed out before — the previous layer's, of the
/// same shape — and a populate call would only walk pages that are there: 0.2 ms a 2.4 MB basis on
/// the VM measured, on the reading thread, for every tensor of every layer. Whole pages: the pages
/// holding the first and last byte are mapped for fresh heap memory too, by malloc's own headers
/// just before and after the block, which once left every fresh buffer to fault page by page.
bool ends_mapped(std::uintptr_t begin, std::uintptr_t end, std::uintptr_t page) noexcept {
  auto mapped = [page](std::uintptr_t address) {
    unsigned char status = 0;
    return mincore(reinterpret_cast<void*>(address), page, &status) == 0 && (status & 1u) != 0;
  };
  const std::uintptr_t first = (begin + page - 1) & ~(page - 1);
  const std::uintptr_t last = (end & ~(page - 1)) - page;
  return first <= last && mapped(first) && mapped(last);
}

}  // namespace

void prefault_for_write(void* data, std::size_t bytes) noexcept {
  if (bytes < kMinimumBytes) return;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t end = begin + bytes;
  if (ends_mapped(begin, end, page)) return;
  // No MADV_HUGEPAGE: on the VM measured the kernel zeroed fresh 2 MiB pages 3–4× slower than the
  // 4 KiB ones it recycles (a DeepSeek-V3 layer's system time 0.35 s → 1.4 s; docs/performance.md).
  populate_for_write(begin & ~(page - 1), end);
}

}  // namespace kvrank::detail

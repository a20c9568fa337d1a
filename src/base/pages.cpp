#include "base/pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

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

/// MADV_POPULATE_WRITE of [begin, end), a large range split over the threads at huge-page
/// boundaries: the kernel zeroes the pages of the call on the calling thread, and on the VM
/// measured that ran at about 400 MB/s (a DeepSeek-V3 layer's first 900 MB of buffers: 1.3 s, all
/// of it on one thread while the other waited).
void populate_for_write(std::uintptr_t begin, std::uintptr_t end) noexcept {
  [[maybe_unused]] constexpr std::uintptr_t kWorthThreads = std::uintptr_t(32) << 20;  // OpenMP's
#pragma omp parallel if (end - begin >= kWorthThreads)
  {
    std::uintptr_t parts = 1, part = 0;
#ifdef _OPENMP
    parts = static_cast<std::uintptr_t>(omp_get_num_threads());
    part = static_cast<std::uintptr_t>(omp_get_thread_num());
#endif
    const std::uintptr_t share = (end - begin) / parts;
    auto boundary = [&](std::uintptr_t index) {
      return index == 0       ? begin
             : index == parts ? end
                              : std::min(end, huge_page_above(begin + index * share));
    };
    advise(boundary(part), boundary(part + 1), MADV_POPULATE_WRITE);
  }
}

}  // namespace

void prefault_for_read(const void* data, std::size_t bytes) noexcept {
  if (bytes < kMinimumBytes) return;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  advise(begin & ~(page - 1), begin + bytes, MADV_POPULATE_READ);
}

void prefault_for_write(void* data, std::size_t bytes) noexcept {
  if (bytes < kMinimumBytes) return;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t end = begin + bytes;
  advise(huge_page_above(begin), end & ~(kHugePage - 1), MADV_HUGEPAGE);
  populate_for_write(begin & ~(page - 1), end);
}

}  // namespace kvrank::detail

#include "base/pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace kvrank::detail {
namespace {

/// Below this a call costs more than the faults it saves.
constexpr std::size_t kMinimumBytes = std::size_t(1) << 20;

void advise(std::uintptr_t begin, std::uintptr_t end, int advice) noexcept {
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, advice);
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
  constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t end = begin + bytes;
  advise((begin + kHuge - 1) & ~(kHuge - 1), end & ~(kHuge - 1), MADV_HUGEPAGE);
  advise(begin & ~(page - 1), end, MADV_POPULATE_WRITE);
}

}  // namespace kvrank::detail

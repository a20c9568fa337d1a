// Tests of heap.hpp: after reuse_freed_memory(), a large buffer freed by one layer serves the next
// one without page faults.
#include "kvrank/base/heap.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "support/catch.hpp"

namespace kvrank {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerAllocator = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitizerAllocator = true;
#else
constexpr bool kSanitizerAllocator = false;
#endif
#else
constexpr bool kSanitizerAllocator = false;
#endif

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

constexpr std::size_t kBytes = std::size_t{64} << 20;  // above glibc's largest mmap threshold

/// Page faults of writing every byte of a freshly mapped kBytes region (what a layer paid for
/// each large buffer before): the yardstick, whatever the page size and huge-page setting.
long fresh_mapping_faults() {
  void* region = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(region != MAP_FAILED);
  const long before = minor_faults();
  std::memset(region, 1, kBytes);
  const long faults = minor_faults() - before;
  munmap(region, kBytes);
  return faults;
}

TEST_CASE("reuse_freed_memory: the next layer's buffer takes the freed pages, without faults",
          "[heap]") {
  const bool applied = reuse_freed_memory();
  // glibc's allocator takes the setting; a sanitizer's allocator replaces glibc's and ignores it.
  REQUIRE(applied == !kSanitizerAllocator);
  if (!applied) return;
  const long fresh = fresh_mapping_faults();
  REQUIRE(fresh > 0);
  { std::vector<char> layer(kBytes, 1); }  // one layer's buffer, freed at the end of the layer
  const long before = minor_faults();
  std::vector<char> next(kBytes, 2);
  const long faults = minor_faults() - before;
  CHECK(faults * 4 < fresh);
  CHECK(next[kBytes - 1] == 2);
}

}  // namespace
}  // namespace kvrank

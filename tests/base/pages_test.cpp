// Tests of base/pages.hpp: prefault_for_write maps every page of a fresh buffer, also when a large
// one is split over the threads, never writes to it, and leaves memory the heap used before alone.
#include "base/pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvrank/metric/compute.hpp"
#include "support/catch.hpp"

namespace kvrank {
namespace {

/// Pages of [data, data + bytes) that are resident (mincore).
std::size_t resident_pages(void* data, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> status((bytes + page - 1) / page);
  REQUIRE(mincore(data, bytes, status.data()) == 0);
  std::size_t resident = 0;
  for (unsigned char flags : status) resident += flags & 1u;
  return resident;
}

/// Whether this kernel has MADV_POPULATE_WRITE (Linux 5.14): without it the call is advice that
/// maps nothing, and the pages wait for their first touch.
bool kernel_populates() {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* probe = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(probe != MAP_FAILED);
  const bool populates = madvise(probe, page, MADV_POPULATE_WRITE) == 0;
  munmap(probe, page);
  return populates;
}

}  // namespace

TEST_CASE("prefault_for_write maps every page of a fresh buffer, split over threads or not",
          "[pages]") {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  // 3 MB stays on the calling thread; 70 MB (not a multiple of the 2 MB huge page, not aligned to
  // it: an offset of 3 pages) is populated in 4 MB pieces spread over the threads.
  for (const int threads : {1, 2, 3}) {
    for (const std::size_t bytes : {std::size_t{3} << 20, (std::size_t{70} << 20) + 5 * page}) {
      INFO(threads << " threads, " << bytes << " bytes");
      set_compute_threads(threads);
      const std::size_t mapped = bytes + (std::size_t{4} << 20);
      void* region =
          mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      REQUIRE(region != MAP_FAILED);
      // Where THP is `always`, a first touch could map a whole 2 MB page around the marks.
      madvise(region, mapped, MADV_NOHUGEPAGE);
      auto* buffer = static_cast<unsigned char*>(region) + 3 * page;
      // A byte written into the second and the second-to-last page first (the end pages stay
      // unmapped, so the buffer counts as fresh): the call maps pages, it must not write to them.
      constexpr unsigned char kMark = 0x5A;
      const std::size_t second = page;
      const std::size_t second_to_last = bytes - page - 1;
      buffer[second] = buffer[second_to_last] = kMark;
      const std::size_t pages = (bytes + page - 1) / page;
      REQUIRE(resident_pages(buffer, pages * page) == 2);
      detail::prefault_for_write(buffer, bytes);
      CHECK(resident_pages(buffer, pages * page) == (kernel_populates() ? pages : 2));
      CHECK(buffer[second] == kMark);
      CHECK(buffer[second_to_last] == kMark);
      bool zero = true;  // the other pages: mapped, not written, so still a fresh mapping's zeros
      for (std::size_t i = 0; i < bytes; i += page)
        zero = zero &&
               (i / page == second / page || i / page == second_to_last / page || buffer[i] == 0);
      CHECK(zero);
      munmap(region, mapped);
    }
  }
  set_compute_threads(0);
}

TEST_CASE("prefault_for_write leaves a buffer whose end pages are mapped as it is", "[pages]") {
  // Heap memory handed out again (the previous layer's buffer): populating it would only walk
  // pages that are there. Its first and last pages mapped, the call maps no page between them.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t bytes = std::size_t{3} << 20;
  void* region = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(region != MAP_FAILED);
  madvise(region, bytes, MADV_NOHUGEPAGE);  // a touch maps one 4 KiB page, even with THP `always`
  auto* buffer = static_cast<unsigned char*>(region);
  buffer[0] = buffer[bytes - 1] = 1;
  detail::prefault_for_write(buffer, bytes);
  CHECK(resident_pages(buffer, bytes) == 2);
  // Only one end mapped: a buffer that grew past memory used before is populated.
  buffer[bytes - 1] = 0;
  madvise(buffer + bytes - page, page, MADV_DONTNEED);
  REQUIRE(resident_pages(buffer, bytes) == 1);
  detail::prefault_for_write(buffer, bytes);
  CHECK(resident_pages(buffer, bytes) == (kernel_populates() ? bytes / page : 1));
  munmap(region, bytes);
}

TEST_CASE("prefault_for_write maps a fresh heap block whose end pages hold malloc's headers",
          "[pages]") {
  // malloc writes a block's header just before it and the next block's just after it: for a fresh
  // block from the top of the heap the pages holding its first and last byte are mapped, every page
  // between them is not. Such a block is fresh; it once counted as memory used before.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t bytes = (std::size_t{3} << 20) + 100;
  const std::size_t mapped = bytes + 2 * page;
  void* region = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(region != MAP_FAILED);
  madvise(region, mapped, MADV_NOHUGEPAGE);
  auto* header = static_cast<unsigned char*>(region);
  unsigned char* buffer = header + 16;
  header[0] = buffer[bytes] = 1;  // this block's header, the next one's
  const std::size_t pages = (16 + bytes + page - 1) / page;
  REQUIRE(resident_pages(region, pages * page) == 2);
  detail::prefault_for_write(buffer, bytes);
  CHECK(resident_pages(region, pages * page) == (kernel_populates() ? pages : 2));
  munmap(region, mapped);
}

TEST_CASE("prefault_for_write leaves a small buffer to its first touch", "[pages]") {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t bytes = 64 * page;  // below the 1 MiB where a call pays for itself
  void* region = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(region != MAP_FAILED);
  detail::prefault_for_write(region, bytes);
  CHECK(resident_pages(region, bytes) == 0);
  munmap(region, bytes);
}

}  // namespace kvrank

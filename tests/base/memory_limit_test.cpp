// Tests of memory_limit.hpp: the thread-count arithmetic, the cgroup limit files and the sizes in
// messages. Real limits (ulimit -v) are exercised by tests/e2e/test_memory_limit.py.
#include "kvrank/base/memory_limit.hpp"

#include <cstdint>

#include "support/catch.hpp"

namespace kvrank {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

TEST_CASE("threads_that_fit takes as many threads as the room beside what is in use holds",
          "[memory_limit]") {
  CHECK(threads_that_fit(8 * kGiB, 0, kGiB, 64) == 8);
  CHECK(threads_that_fit(8 * kGiB, kGiB, kGiB, 64) == 7);
  CHECK(threads_that_fit(8 * kGiB, kGiB / 2, kGiB, 64) == 7);  // 7.5 threads' room: 7
  CHECK(threads_that_fit(8 * kGiB, 0, kGiB, 4) == 4);          // never more than requested
}

TEST_CASE("threads_that_fit is 0 when not even one thread fits", "[memory_limit]") {
  CHECK(threads_that_fit(kGiB, kGiB / 2, kGiB, 4) == 0);
  CHECK(threads_that_fit(kGiB, kGiB, 1, 4) == 0);      // all in use already
  CHECK(threads_that_fit(kGiB, 2 * kGiB, 1, 4) == 0);  // more in use than the limit
}

TEST_CASE("threads_that_fit takes a request below one as one thread", "[memory_limit]") {
  CHECK(threads_that_fit(8 * kGiB, 0, kGiB, 0) == 1);
  CHECK(threads_that_fit(8 * kGiB, 0, kGiB, -3) == 1);
  CHECK(threads_that_fit(8 * kGiB, 0, 0, 5) == 5);  // free threads: as many as requested
}

TEST_CASE("threads_that_fit does not overflow at the largest limits", "[memory_limit]") {
  const std::uint64_t huge = ~std::uint64_t{0};
  CHECK(threads_that_fit(huge, 0, 1, 1 << 30) == 1 << 30);
  CHECK(threads_that_fit(huge, huge - 1, kThreadAddressSpace, 8) == 0);
}

TEST_CASE("the thread cost fits the limits kvrank is run under", "[memory_limit]") {
  // About 100 MiB of libraries and the working reserve in use (docs/input-limits.md).
  const std::uint64_t in_use = 100 * kMiB + kWorkingReserve;
  CHECK(threads_that_fit(256 * kMiB, in_use, kThreadAddressSpace, 64) == 0);
  CHECK(threads_that_fit(512 * kMiB, in_use, kThreadAddressSpace, 64) == 1);
  CHECK(threads_that_fit(kGiB, in_use, kThreadAddressSpace, 64) == 2);
  CHECK(threads_that_fit(8 * kGiB, in_use, kThreadAddressSpace, 64) == 24);
}

TEST_CASE("parse_cgroup_limit reads bytes and knows both ways of saying none", "[memory_limit]") {
  CHECK(parse_cgroup_limit("8589934592\n") == std::optional<std::uint64_t>(8 * kGiB));
  CHECK(parse_cgroup_limit("1048576") == std::optional<std::uint64_t>(kMiB));
  CHECK_FALSE(parse_cgroup_limit("max\n"));                  // v2: none
  CHECK_FALSE(parse_cgroup_limit("9223372036854771712\n"));  // v1: none
  CHECK_FALSE(parse_cgroup_limit(""));
  CHECK_FALSE(parse_cgroup_limit("12abc"));
  CHECK_FALSE(parse_cgroup_limit("-1"));
  CHECK_FALSE(parse_cgroup_limit("123456789012345678901234567890"));
}

TEST_CASE("byte_size_text writes MiB below a GiB and GiB above", "[memory_limit]") {
  CHECK(byte_size_text(640 * kMiB) == "640 MiB");
  CHECK(byte_size_text(kMiB + 1) == "2 MiB");  // rounded up: a limit is never understated
  CHECK(byte_size_text(kGiB) == "1 GiB");
  CHECK(byte_size_text(3 * kGiB / 2) == "1.5 GiB");
  CHECK(byte_size_text(kThreadAddressSpace) == "328 MiB");
}

TEST_CASE("process_status_bytes reads this process's sizes", "[memory_limit]") {
  CHECK(process_status_bytes("VmSize") > process_status_bytes("VmRSS"));
  CHECK(process_status_bytes("VmRSS") > 0);
  CHECK(process_status_bytes("NoSuchField") == 0);
}

}  // namespace
}  // namespace kvrank

// Tests of memory_limit.hpp: the thread-count arithmetic, the cgroup limit files and the sizes in
// messages. Real limits (ulimit -v) are exercised by tests/e2e/test_memory_limit.py.
#include "kvrank/base/memory_limit.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "base/memory_limit_text.hpp"
#include "kvrank/base/error.hpp"
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

TEST_CASE("the calling thread costs its buffers only, every other thread a stack and an arena too",
          "[memory_limit]") {
  CHECK(compute_threads_address_space(1) == 256 * kMiB);
  CHECK(compute_threads_address_space(2) == 256 * kMiB + kThreadAddressSpace);
  CHECK(compute_threads_address_space(0) == compute_threads_address_space(1));
  const std::uint64_t in_use = 150 * kMiB;
  // The need quoted for one thread is exactly what one thread runs in (it quoted 478 MiB where
  // 406 MiB were enough).
  CHECK(compute_threads_that_fit(in_use + 256 * kMiB, in_use, 8) == 1);
  CHECK(compute_threads_that_fit(in_use + 256 * kMiB - 1, in_use, 8) == 0);
  CHECK(compute_threads_that_fit(in_use + compute_threads_address_space(3), in_use, 8) == 3);
  CHECK(compute_threads_that_fit(in_use + compute_threads_address_space(3), in_use, 2) == 2);
  CHECK(compute_threads_that_fit(8 * kGiB, 0, 0) == 1);
  CHECK(compute_threads_that_fit(kGiB, 2 * kGiB, 4) == 0);
}

TEST_CASE("only this process's own marker counts as its second start", "[memory_limit]") {
  char own[64];
  REQUIRE(detail::own_process_marker(own, sizeof own));
  CHECK(detail::is_own_process_marker(own));
  CHECK(std::string(own).find(std::to_string(::getpid()) + ":") == 0);
  // What the variable held before (a count), and what another process would have written.
  CHECK_FALSE(detail::is_own_process_marker("1"));
  CHECK_FALSE(detail::is_own_process_marker(""));
  CHECK_FALSE(detail::is_own_process_marker(nullptr));
  const std::string start = std::string(own).substr(std::string(own).find(':'));
  CHECK_FALSE(detail::is_own_process_marker((std::to_string(::getpid() + 1) + start).c_str()));
  CHECK_FALSE(detail::is_own_process_marker((std::string(own) + "0").c_str()));
}

TEST_CASE("require_memory refuses what the room under the address-space limit cannot hold",
          "[memory_limit]") {
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_AS, &saved) == 0);
  const std::uint64_t mapped = process_status_bytes("VmSize");
  REQUIRE(mapped > 0);
  rlimit limited = saved;
  limited.rlim_cur = mapped + kGiB;
  if (saved.rlim_max != RLIM_INFINITY && limited.rlim_cur > saved.rlim_max) return;  // no room
  REQUIRE(::setrlimit(RLIMIT_AS, &limited) == 0);
  const auto room = memory_room();
  const bool small_fits = memory_fits(kMiB);
  const bool large_fits = memory_fits(2 * kGiB);
  std::string message;
  try {
    require_memory(2 * kGiB, "the test's layer");
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_AS, &saved);
  REQUIRE(room);
  CHECK(room->limit.source == "ulimit -v");
  CHECK(room->free <= kGiB);
  CHECK(small_fits);
  CHECK_FALSE(large_fits);
  CHECK(message.find("is too small for the test's layer: 2 GiB more needed") != std::string::npos);
  CHECK(message.find("raise the limit") != std::string::npos);
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

TEST_CASE("parse_memory_size reads bytes and K, M, G, T in powers of 1024", "[memory_limit]") {
  using Size = std::optional<std::uint64_t>;
  CHECK(parse_memory_size("17179869184") == Size(16 * kGiB));
  CHECK(parse_memory_size("16G") == Size(16 * kGiB));
  CHECK(parse_memory_size("16g") == Size(16 * kGiB));
  CHECK(parse_memory_size("16384M") == Size(16 * kGiB));
  CHECK(parse_memory_size("000512K") == Size(512 * 1024));  // decimal, as every integer
  CHECK(parse_memory_size("1T") == Size(1024 * kGiB));
  CHECK(parse_memory_size("16777215T") == Size(std::uint64_t{16777215} << 40));
  for (const char* refused : {"", "G", "0", "0G", "16GB", "16 G", " 16G", "1.5G", "-1G", "+1G",
                              "0x10", "1e9", "16777216T", "99999999999999999999"}) {
    INFO(refused);
    CHECK_FALSE(parse_memory_size(refused));
  }
}

/// Sets KVRANK_MEMORY_LIMIT for the scope of a test, then unsets it.
class StatedLimit {
 public:
  explicit StatedLimit(const std::string& value) {
    ::setenv(kMemoryLimitVariable, value.c_str(), 1);
  }
  ~StatedLimit() { ::unsetenv(kMemoryLimitVariable); }
  StatedLimit(const StatedLimit&) = delete;
  StatedLimit& operator=(const StatedLimit&) = delete;
};

TEST_CASE("KVRANK_MEMORY_LIMIT states a resident limit; a malformed one is an error naming it",
          "[memory_limit]") {
  ::unsetenv(kMemoryLimitVariable);
  CHECK_FALSE(stated_memory_limit());
  {
    StatedLimit stated("16G");
    const auto limit = stated_memory_limit();
    REQUIRE(limit);
    CHECK(limit->bytes == 16 * kGiB);
    CHECK(limit->source == "KVRANK_MEMORY_LIMIT");
    CHECK_FALSE(limit->address_space);
  }
  for (const char* value : {"", "16GB"}) {
    StatedLimit stated(value);
    std::string message;
    try {
      stated_memory_limit();
    } catch (const Error& e) {
      message = e.what();
    }
    CHECK(message.find(std::string("KVRANK_MEMORY_LIMIT=\"") + value + "\": expected a size") !=
          std::string::npos);
  }
}

TEST_CASE(
    "the room under KVRANK_MEMORY_LIMIT is the limit less the anonymous resident memory, "
    "less what is promised",
    "[memory_limit]") {
  const std::uint64_t anonymous = process_status_bytes("RssAnon");
  REQUIRE(anonymous > 0);
  StatedLimit stated(std::to_string(anonymous + kGiB));
  const auto room = memory_room();
  REQUIRE(room);
  if (room->limit.source != "KVRANK_MEMORY_LIMIT") return;  // a smaller real limit counts
  CHECK(room->free <= kGiB);
  CHECK(room->free > kGiB / 2);
  CHECK(memory_fits(kMiB));
  CHECK_FALSE(memory_fits(2 * kGiB));
  CHECK_THROWS_AS(require_memory(2 * kGiB, "the test's layer"), Error);
  {
    const MemoryPromise promise(kGiB / 2);
    const auto promised = memory_room();
    REQUIRE(promised);
    CHECK(promised->free + kGiB / 2 <= room->free + 64 * kMiB);  // RssAnon moves a little
    CHECK(promised->free + kGiB / 2 + 64 * kMiB >= room->free);
  }
  CHECK(memory_room()->free + 64 * kMiB >= room->free);
}

}  // namespace
}  // namespace kvrank

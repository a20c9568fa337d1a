// compile_gram_kernels_aside under memory limits (gram_backend.hpp): it starts where the room holds
// its thread and what oneDNN takes to compile, an address-space limit or not, and not where it
// does not.
#include <sys/resource.h>

#include <cstdlib>
#include <string>

#include "kvrank/base/memory_limit.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "support/catch.hpp"

using namespace kvrank;

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

/// Whether compile_gram_kernels_aside starts its thread for a d 4096 bf16 Gram now.
bool starts_aside() {
  std::jthread thread = compile_gram_kernels_aside(4096, 4096, true, false);
  return thread.joinable();
}

}  // namespace

TEST_CASE("the kernels are compiled aside under a memory limit with room, not without",
          "[memory_limit]") {
  set_compute_threads(2);
  const GramBackend saved_backend = gram_backend();
  // oneDNN's bf16 kernels to compile, where kvrank's own bf16 kernel (nothing to compile) would
  // run.
  if (bf16_gram_supported()) set_gram_backend(GramBackend::bf16_onednn);
  const bool unlimited = starts_aside();
  if (!unlimited) {
    set_compute_threads(0);
    set_gram_backend(saved_backend);
    SUCCEED("no oneDNN Gram kernel to compile here (no oneDNN, no bf16 kernel, or one thread)");
    return;
  }
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_AS, &saved) == 0);
  rlimit roomy = saved;
  roomy.rlim_cur = process_status_bytes("VmSize") + 4 * kGiB;
  bool with_room = false;
  if (saved.rlim_max == RLIM_INFINITY || roomy.rlim_cur <= saved.rlim_max) {
    REQUIRE(::setrlimit(RLIMIT_AS, &roomy) == 0);
    with_room = starts_aside();  // it was skipped under any `ulimit -v`
    ::setrlimit(RLIMIT_AS, &saved);
    CHECK(with_room);
  }
  ::setenv(kMemoryLimitVariable,
           std::to_string(process_status_bytes("RssAnon") + 64 * kMiB).c_str(), 1);
  const bool without_room = starts_aside();
  ::unsetenv(kMemoryLimitVariable);
  set_compute_threads(0);
  set_gram_backend(saved_backend);
  CHECK_FALSE(without_room);
}

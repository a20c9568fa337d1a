#include "kvrank/base/heap.hpp"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kvrank {

bool reuse_freed_memory() noexcept {
#if defined(__GLIBC__)
  // M_MMAP_MAX 0: blocks above the mmap threshold (at most 32 MiB in glibc) would be mapped and
  // unmapped one by one; with no mmap at all they come from the heap, whose freed space the next
  // layer reuses (glibc still maps memory when the heap cannot grow, and for other threads'
  // arenas). M_TRIM_THRESHOLD: the heap's free top goes back to the system only past 2 GiB
  // (mallopt takes an int).
  return mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
#else
  return false;
#endif
}

}  // namespace kvrank

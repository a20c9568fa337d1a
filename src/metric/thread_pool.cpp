// Where OpenMP's threads start (thread_pool.hpp).
//
// Linux may start a new thread on its creator's CPU and leave it there, while another CPU idles,
// until a load-balancing tick moves it: on the 2-core VMs measured, in about half the runs, for
// 4–24 ms (one to six ticks of 4 ms). Until then the caller and its worker take turns on one CPU,
// and each parallel region of that time waits for a tick in a barrier or in OpenBLAS's
// sched_yield loop: a DeepSeek-V2-shaped layer's first Cholesky took 4–8 ms instead of 0.3
// (docs/performance.md, "Fourth round"). Moving the worker ends that; giving it back the whole CPU
// set leaves the scheduler free afterwards, so that processes started side by side are not piled
// onto the same CPUs as a fixed binding (OMP_PROC_BIND) would pile them.
#include "metric/thread_pool.hpp"

#include <sched.h>

#include "base/memory_limit_text.hpp"
#include "metric/blas.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace kvrank::detail {

void place_thread_pool() noexcept {
#ifdef _OPENMP
  const int threads = available_threads();
  if (threads < 2 || usable_processors() < 2) return;
  // Until a round finds no worker on the caller's CPU (the caller itself may move meanwhile).
  for (int round = 0; round < 3; ++round) {
    int caller = -1;
    bool moved = false;
#pragma omp parallel num_threads(threads) reduction(|| : moved)
    {
      if (omp_get_thread_num() == 0) caller = ::sched_getcpu();
#pragma omp barrier
      if (omp_get_thread_num() != 0) moved = move_off_cpu(caller);
    }
    if (!moved) break;
  }
#endif
}

bool move_off_cpu(int cpu) noexcept {
  cpu_set_t allowed;
  if (cpu < 0 || ::sched_getcpu() != cpu || ::sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return false;
  cpu_set_t elsewhere = allowed;
  CPU_CLR(cpu, &elsewhere);
  // The kernel moves a thread at once when its CPU leaves its set; the set restored does not move
  // it back.
  if (CPU_COUNT(&elsewhere) == 0 || ::sched_setaffinity(0, sizeof elsewhere, &elsewhere) != 0)
    return false;
  ::sched_setaffinity(0, sizeof allowed, &allowed);
  return true;
}

}  // namespace kvrank::detail

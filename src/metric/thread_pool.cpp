// Where OpenMP's threads start (thread_pool.hpp).
//
// Linux may start a new thread on its creator's CPU and leave it there, while another CPU idles,
// until a load-balancing tick moves it: on the 2-core VMs measured, in about half the runs, for
// 4–24 ms (one to six ticks of 4 ms). Until then the caller and its worker take turns on one CPU,
// and each parallel region of that time waits for a tick in a barrier or in OpenBLAS's
// sched_yield loop: a DeepSeek-V2-shaped layer's first Cholesky took 4–8 ms instead of 0.3
// (docs/performance.md, "Fourth round"). Moving the worker once ends that; giving it back the whole
// CPU set leaves the scheduler free afterwards, so that processes started side by side are not
// piled onto the same CPUs as a fixed binding (OMP_PROC_BIND) would pile them.
#include "metric/thread_pool.hpp"

#include "metric/blas.hpp"

#ifdef _OPENMP
#include <omp.h>
#include <sched.h>
#endif

namespace kvrank::detail {

void start_thread_pool() noexcept {
#ifdef _OPENMP
  thread_local int placed = 1;  // the largest pool placed from this thread
  const int threads = available_threads();
  if (threads <= placed) return;
  placed = threads;
  cpu_set_t allowed;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) return;
  // Until a round finds no worker on the caller's CPU (the caller itself may move meanwhile).
  for (int round = 0; round < 3; ++round) {
    int caller = -1;
    bool moved = false;
#pragma omp parallel num_threads(threads) reduction(|| : moved)
    {
      if (omp_get_thread_num() == 0) caller = ::sched_getcpu();
#pragma omp barrier
      cpu_set_t elsewhere = allowed;
      if (caller >= 0) CPU_CLR(caller, &elsewhere);
      // The kernel moves a thread at once when its CPU leaves its set; the set restored does not
      // move it back.
      if (omp_get_thread_num() != 0 && ::sched_getcpu() == caller && CPU_COUNT(&elsewhere) > 0 &&
          ::sched_setaffinity(0, sizeof elsewhere, &elsewhere) == 0) {
        ::sched_setaffinity(0, sizeof allowed, &allowed);
        moved = true;
      }
    }
    if (!moved) break;
  }
#endif
}

}  // namespace kvrank::detail

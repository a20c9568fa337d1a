// Private: where OpenMP's threads start (see thread_pool.cpp for why).
#pragma once

namespace kvrank::detail {

/// Starts the calling thread's OpenMP pool with the threads set (available_threads(), blas.hpp) and
/// moves each worker found on the calling thread's CPU onto another CPU of the process, then gives
/// it back the process's whole CPU set: a placement, not a binding. Once per pool size and
/// calling thread (each thread that starts parallel regions has a pool of its own). Without
/// OpenMP, inside a parallel region, with one thread or one CPU it does nothing.
void start_thread_pool() noexcept;

}  // namespace kvrank::detail

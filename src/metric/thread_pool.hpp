// Private: where OpenMP's threads start (see thread_pool.cpp for why).
#pragma once

namespace kvrank::detail {

/// Starts the calling thread's OpenMP pool with the threads set (available_threads(), blas.hpp) if
/// it has not started, and moves each worker found on the calling thread's CPU onto another CPU
/// of the process, then gives it back the process's whole CPU set: a placement, not a binding.
/// Called before each layer that uses threads: one short parallel region, where a worker the
/// scheduler put back beside the caller since is moved again. Without OpenMP, inside a parallel
/// region, with one thread or one CPU it does nothing.
void place_thread_pool() noexcept;

/// Moves the calling thread onto another CPU of its set when it runs on `cpu`, then gives it back
/// its whole set; true when it moved. For a thread that may have started beside one that should
/// keep its CPU to itself.
bool move_off_cpu(int cpu) noexcept;

}  // namespace kvrank::detail

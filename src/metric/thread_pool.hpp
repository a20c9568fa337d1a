// Private: where OpenMP's threads start (see thread_pool.cpp for why).
#pragma once

#include <exception>

#include "base/tiled_copy.hpp"  // copy_worth_threads
#include "kvrank/base/eigen.hpp"

namespace kvrank::detail {

/// The first exception thrown by the iterations of a parallel loop, to rethrow after it: an
/// exception that leaves an OpenMP region ends the process (std::terminate), and an allocation
/// that fails under a memory limit (std::bad_alloc) must end in the error it is.
///
///   ParallelFailure failure;
///   #pragma omp parallel for
///   for (Index h = 0; h < heads; ++h) failure.run([&] { work(h); });
///   failure.rethrow();
class ParallelFailure {
 public:
  template <typename Work>
  void run(Work&& work) noexcept {
    try {
      work();
    } catch (...) {
      keep(std::current_exception());
    }
  }
  /// Rethrows the first exception kept, if any.
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  void keep(std::exception_ptr failure) noexcept {
#pragma omp critical(kvrank_parallel_failure)
    if (!first_) first_ = std::move(failure);
  }
  std::exception_ptr first_;
};

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

/// Runs `first` and `second` at the same time on two threads of the pool, BLAS single-threaded
/// inside each (blas_nests_in_openmp); rethrows the first one's exception, then the second's.
template <typename First, typename Second>
void side_by_side(First&& first, Second&& second) {
  std::exception_ptr failures[2];
#pragma omp parallel sections num_threads(2)
  {
#pragma omp section
    try {
      first();
    } catch (...) {
      failures[0] = std::current_exception();
    }
#pragma omp section
    try {
      second();
    } catch (...) {
      failures[1] = std::current_exception();
    }
  }
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

}  // namespace kvrank::detail

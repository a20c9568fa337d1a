// What the benchmark programs share: their flags, their thread count and their clock.
// Development tools run by scripts/bench.sh, not user input: a flag's value is read as strtol does.
#pragma once

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#ifdef KVRANK_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace kvrank_bench {

/// The value after `name` on the command line as a number, or `fallback` when it is absent.
inline long parse_flag(int argc, char** argv, const char* name, long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::strtol(argv[i + 1], nullptr, 10);
  }
  return fallback;
}

/// The value after `name` on the command line, or "" when it is absent.
inline std::string parse_text(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return "";
}

/// Runs OpenBLAS and OpenMP on `threads` threads; 0 or less keeps their defaults.
inline void set_threads(long threads) {
  if (threads <= 0) return;
#ifdef KVRANK_HAVE_OPENBLAS
  openblas_set_num_threads(static_cast<int>(threads));
#endif
#ifdef _OPENMP
  omp_set_num_threads(static_cast<int>(threads));
#endif
}

/// Seconds from `start` to now, on the monotonic clock.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count();
}

}  // namespace kvrank_bench

// Private: the parts of memory_limit.cpp that fit_library_threads_at_start (memory_limit_start.cpp)
// shares (and the default thread count, metric/blas.cpp). They run before the C and C++ libraries
// are initialised, so they use fixed buffers and system calls only: no std::string, no exceptions,
// no stdio streams.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvrank::detail {

/// `bytes` as "640 MiB" or "1.5 GiB" into `out` (always terminated).
void format_byte_size(char* out, std::size_t size, std::uint64_t bytes) noexcept;

/// The one-line reason why not even one thread fits under `limit` bytes of `source`, into `out`.
void format_too_small(char* out, std::size_t size, const char* source, std::uint64_t limit,
                      std::uint64_t in_use, std::uint64_t per_thread) noexcept;

/// Set by fit_library_threads_at_start in the environment of its second start, beside the
/// lowered thread variables. Its value names the process that set it (own_process_marker), so that
/// the variable inherited from elsewhere (a parent kvrank, a job script) is not taken as this
/// process's own.
inline constexpr const char* kThreadsFittedVariable = "KVRANK_THREADS_FITTED";

/// "PID:START" of this process (its id and its start time in clock ticks since boot, field 22 of
/// /proc/self/stat; both kept across execve) into `out`; false when /proc cannot be read.
bool own_process_marker(char* out, std::size_t size) noexcept;

/// Whether `value` (of kThreadsFittedVariable, null when unset) was written by this very process
/// before it executed itself again: equal to own_process_marker().
bool is_own_process_marker(const char* value) noexcept;

/// A thread-count variable's value ("8", or the "8,2" of nested OpenMP): its first number; 0 when
/// `value` is null or not a positive number.
int parse_thread_count(const char* value) noexcept;

/// The processors this process may run on (its CPU affinity, which `taskset` and Slurm set), at
/// least 1.
int usable_processors() noexcept;

}  // namespace kvrank::detail

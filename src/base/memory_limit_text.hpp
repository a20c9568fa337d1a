// Private: the parts of memory_limit.cpp that fit_library_threads_at_start (memory_limit_start.cpp)
// shares. They run before the C and C++ libraries are initialised, so they use fixed buffers and
// system calls only: no std::string, no exceptions, no stdio streams.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvrank::detail {

/// `bytes` as "640 MiB" or "1.5 GiB" into `out` (always terminated).
void format_byte_size(char* out, std::size_t size, std::uint64_t bytes) noexcept;

/// The one-line reason why not even one thread fits under `limit` bytes of `source`, into `out`.
void format_too_small(char* out, std::size_t size, const char* source, std::uint64_t limit,
                      std::uint64_t in_use, std::uint64_t per_thread) noexcept;

}  // namespace kvrank::detail

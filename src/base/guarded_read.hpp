// Private: reading memory-mapped files without dying when they shrink.
//
// A page of a MappedFile beyond the file's current end raises SIGBUS when touched: a checkpoint
// overwritten or truncated while kvrank runs would kill the process silently. Every read of
// mapped bytes after open runs through guarded_read(): a SIGBUS during it is turned into a false
// return (and then a kvrank::Error naming the file) instead.
#pragma once

#include <span>
#include <string>
#include <type_traits>

namespace kvrank::detail {

/// Runs `read(context)`; returns false if it touched a mapped page no longer backed by its file.
/// `read` must not throw and must not own objects with destructors: on SIGBUS it is abandoned
/// with siglongjmp. Installs a SIGBUS handler on first use (other SIGBUSes keep their default).
bool run_guarded(void (*read)(void*), void* context) noexcept;

/// run_guarded() for a lambda (captures by reference; the same rules apply to its body).
template <typename Read>
bool guarded_read(Read&& read) noexcept {
  using Function = std::remove_reference_t<Read>;
  return run_guarded([](void* context) { (*static_cast<Function*>(context))(); }, &read);
}

/// The message of the kvrank::Error thrown when a guarded read fails.
inline constexpr const char* kFileShrank =
    "the file shrank while being read (was it overwritten or truncated during the run?)";

/// A copy of `bytes` (mapped from `file_name`) as text; throws kvrank::Error(file_name,
/// kFileShrank) when the file shrank under the copy.
std::string guarded_text_copy(std::span<const std::byte> bytes, const std::string& file_name);

}  // namespace kvrank::detail

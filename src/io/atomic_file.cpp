// Atomic file writing (atomic_file.hpp): a temporary file in the same folder, synced, then renamed.
#include "kvrank/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "kvrank/error.hpp"

namespace kvrank {
namespace {

std::string system_reason(int error_number) {
  std::string reason = std::strerror(error_number);
  if (!reason.empty())
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  return reason;
}

// The mode a plain new file would get: 0666 less the process umask (mkstemp creates 0600).
mode_t default_file_mode() {
  const mode_t mask = umask(0);  // umask can only be read by setting it; restored at once
  umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

// Writes, sets the mode and syncs the temporary file; returns 0 or the errno of the failed step.
int fill_and_sync(int fd, const std::string& content) {
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    written += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, default_file_mode()) != 0) return errno;
  if (::fsync(fd) != 0) return errno;
  return 0;
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  std::string temp_name = (folder / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(temp_name.data());
  if (fd < 0) {
    throw Error(path.string(), "cannot create a temporary file in " + folder.string() + ": " +
                                   system_reason(errno));
  }
  int error_number = fill_and_sync(fd, content);
  if (::close(fd) != 0 && error_number == 0) error_number = errno;
  if (error_number != 0) {
    ::unlink(temp_name.c_str());
    throw Error(path.string(), "cannot write: " + system_reason(error_number));
  }
  if (std::rename(temp_name.c_str(), path.c_str()) != 0) {
    error_number = errno;
    ::unlink(temp_name.c_str());
    throw Error(path.string(), "cannot replace the file: " + system_reason(error_number));
  }
}

}  // namespace kvrank

// Output files (`-o`): claimed before the work starts, published whole at the end.
//
// A regular file (or a new name) is written to a hidden temporary file beside it
// (`.NAME.tmp-XXXXXX`) and renamed over it once complete, so a failed or interrupted run leaves the
// old file, or none, and no debris — SIGINT, SIGTERM and SIGHUP remove the temporary file too. A
// symlink is followed and the file it points to is replaced (the link stays a link). A FIFO or a
// character device (`-o /dev/stdout`, a pipe from `>(gzip > x.gz)`) is written through, since it
// cannot be replaced. Directories, block devices, sockets, and any file that is also an input of
// the run are refused.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kvrank {

class OutputFile {
 public:
  /// Claims `path`: checks it is none of `inputs` (compared by device and inode; a folder among
  /// the inputs stands for the files directly in it), then creates the temporary file, or opens a
  /// FIFO/device for writing (which waits for a reader, as a shell redirection does). Throws
  /// kvrank::Error naming `path`.
  explicit OutputFile(std::filesystem::path path,
                      const std::vector<std::filesystem::path>& inputs = {});
  /// Without commit(), the temporary file is removed (a FIFO/device is just closed).
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  /// Appends to the output. Throws kvrank::Error naming the path.
  void write(std::string_view content);
  /// The open descriptor, for a child process to write into (rsvg-convert).
  int descriptor() const noexcept { return fd_; }
  /// Makes the output visible: syncs and renames the temporary file over the target.
  void commit();

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  void discard() noexcept;

  std::filesystem::path path_;    // as given, for messages
  std::filesystem::path target_;  // symlinks resolved: what the rename replaces
  std::string temp_;              // the temporary file; empty when writing through
  int fd_ = -1;
};

/// Writes `content` to `path` through an OutputFile: whole or not at all.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

/// Writes `content` to standard output, whole; a failure (a full disk, a closed pipe read as EPIPE)
/// throws kvrank::Error naming "stdout".
void write_stdout(std::string_view content);

}  // namespace kvrank

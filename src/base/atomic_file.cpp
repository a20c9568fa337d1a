// Output files (atomic_file.hpp): claimed up front, written whole, published by rename.
#include "kvrank/base/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

#include "base/signal_cleanup.hpp"
#include "kvrank/base/error.hpp"

namespace kvrank {
namespace fs = std::filesystem;

namespace {

std::string system_reason(int error_number) {
  std::string reason = std::strerror(error_number);
  if (!reason.empty())
    reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
  return reason;
}

/// Writes all of `content` to `fd`; returns 0 or the errno of the failed write.
int write_all(int fd, std::string_view content) {
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    written += static_cast<std::size_t>(n);
  }
  return 0;
}

struct FileId {
  dev_t device;
  ino_t inode;
  bool operator==(const FileId&) const = default;
};

FileId id_of(const struct stat& info) { return {info.st_dev, info.st_ino}; }

/// Refuses an output that is one of the inputs (or, for an input folder, a file directly in it).
void refuse_inputs(const fs::path& output, const FileId& output_id,
                   const std::vector<fs::path>& inputs) {
  const auto refuse_if_same = [&](const fs::path& input) {
    struct stat info {};
    if (::stat(input.c_str(), &info) == 0 && id_of(info) == output_id) {
      throw Error(output.string(), "is also an input of this run (" + input.string() +
                                       "); choose another output file");
    }
    return info;
  };
  for (const fs::path& input : inputs) {
    if (!S_ISDIR(refuse_if_same(input).st_mode)) continue;
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(input, error)) refuse_if_same(entry.path());
  }
}

/// The file a chain of symlinks ends at (existing or not): where a new file must be created.
fs::path follow_symlinks(const fs::path& path) {
  fs::path current = path;
  for (int hops = 0; hops < 40; ++hops) {  // Linux's own limit
    struct stat info {};
    if (::lstat(current.c_str(), &info) != 0 || !S_ISLNK(info.st_mode)) return current;
    std::error_code error;
    const fs::path link = fs::read_symlink(current, error);
    if (error) throw Error(path.string(), "cannot read the symbolic link " + current.string());
    current = link.is_absolute() ? link : current.parent_path() / link;
  }
  throw Error(path.string(), "too many levels of symbolic links");
}

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// `.NAME.tmp-XXXXXX` beside `target`, with six random letters or digits.
std::string temp_name(const fs::path& target, std::mt19937_64& random) {
  static constexpr char kLetters[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string suffix(6, ' ');
  for (char& c : suffix) c = kLetters[random() % (sizeof kLetters - 1)];
  const fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Never a bare name: a child process (rsvg-convert) must not read it as an option.
  return (folder / ("." + target.filename().string() + ".tmp-" + suffix)).string();
}

}  // namespace

OutputFile::OutputFile(fs::path path, const std::vector<fs::path>& inputs)
    : path_(std::move(path)) {
  struct stat info {};
  const bool exists = ::stat(path_.c_str(), &info) == 0;
  if (!exists && errno != ENOENT) {
    throw Error(path_.string(), "cannot write: " + system_reason(errno));
  }
  if (exists) refuse_inputs(path_, id_of(info), inputs);
  if (exists && !S_ISREG(info.st_mode)) {
    if (!S_ISFIFO(info.st_mode) && !S_ISCHR(info.st_mode)) {
      throw Error(path_.string(), "is " + kind_of(info.st_mode) +
                                      "; -o takes a file, a FIFO or a character device");
    }
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);  // blocks for a FIFO's reader
    if (fd_ < 0) throw Error(path_.string(), "cannot write: " + system_reason(errno));
    return;
  }
  target_ = follow_symlinks(path_);
  // O_EXCL with a random name instead of mkstemp: mode 0666 then meets the umask as any new file
  // does (mkstemp's 0600 would need the umask, which can only be read by changing it).
  std::mt19937_64 random{std::random_device{}()};
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = temp_name(target_, random);
    detail::register_temp_file(temp_);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd_ >= 0) break;
    const int error_number = errno;
    detail::unregister_temp_file(temp_);
    if (error_number != EEXIST || attempt == 100) {
      temp_.clear();
      throw Error(path_.string(), "cannot create a temporary file in " +
                                      target_.parent_path().string() + ": " +
                                      system_reason(error_number));
    }
  }
  // Replacing a file keeps its permissions (less set-id bits), as editing it in place would.
  if (exists && ::fchmod(fd_, info.st_mode & 0777) != 0) {
    const int error_number = errno;
    discard();
    throw Error(path_.string(), "cannot set the mode: " + system_reason(error_number));
  }
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) {
    ::unlink(temp_.c_str());
    detail::unregister_temp_file(temp_);
    temp_.clear();
  }
}

void OutputFile::write(std::string_view content) {
  if (const int error_number = write_all(fd_, content); error_number != 0) {
    discard();
    throw Error(path_.string(), "cannot write: " + system_reason(error_number));
  }
}

void OutputFile::commit() {
  int error_number = 0;
  if (!temp_.empty() && ::fsync(fd_) != 0) error_number = errno;
  if (::close(fd_) != 0 && error_number == 0) error_number = errno;
  fd_ = -1;
  if (error_number == 0 && !temp_.empty() && std::rename(temp_.c_str(), target_.c_str()) != 0) {
    error_number = errno;
  }
  if (error_number != 0) {
    discard();
    throw Error(path_.string(), "cannot write: " + system_reason(error_number));
  }
  detail::unregister_temp_file(temp_);
  temp_.clear();
}

void write_file_atomically(const fs::path& path, const std::string& content) {
  OutputFile output(path);
  output.write(content);
  output.commit();
}

void write_stdout(std::string_view content) {
  if (const int error_number = write_all(STDOUT_FILENO, content); error_number != 0) {
    throw Error("stdout", "cannot write: " + system_reason(error_number));
  }
}

}  // namespace kvrank

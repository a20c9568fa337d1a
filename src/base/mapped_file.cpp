#include "kvrank/base/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "kvrank/base/error.hpp"

namespace kvrank {
namespace {

// Closes the descriptor on every path out of the constructor; the mapping outlives it.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

std::string system_error(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO must fail below (not a regular file), not wait for a writer.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) throw Error(path.string(), system_error("cannot open"));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw Error(path.string(), system_error("cannot stat"));
  if (S_ISDIR(info.st_mode)) throw Error(path.string(), "is a folder, expected a file");
  if (!S_ISREG(info.st_mode)) throw Error(path.string(), "is not a regular file");
  size_ = static_cast<std::size_t>(info.st_size);
  if (size_ == 0) return;  // mmap rejects empty mappings; bytes() is then an empty span
  void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (address == MAP_FAILED) throw Error(path.string(), system_error("cannot memory-map"));
  data_ = static_cast<const std::byte*>(address);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

void MappedFile::release(std::span<const std::byte> range) const noexcept {
  if (data_ == nullptr || range.empty()) return;
  const auto base = reinterpret_cast<std::uintptr_t>(data_);
  const auto end_of_map = base + size_;
  auto begin = reinterpret_cast<std::uintptr_t>(range.data());
  auto end = begin + range.size();
  if (begin < base || end > end_of_map) return;  // not ours: nothing to do
  // madvise needs a page-aligned start. Widening to whole pages may drop a neighbour's pages too;
  // that is harmless for a read-only file mapping (they are read back on the next access).
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  begin &= ~(page - 1);
  end = std::min(end_of_map, (end + page - 1) & ~(page - 1));
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace kvrank

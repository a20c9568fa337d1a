// A read-only memory map of a whole file: checkpoints are read through it without copying, and
// only the pages of the tensors actually analysed are ever touched.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace kvrank {

class MappedFile {
 public:
  /// Maps `path` read-only. Throws kvrank::Error naming the file if it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  const std::filesystem::path& path() const noexcept { return path_; }

  /// Tells the kernel the pages of `range` (a subspan of bytes()) will not be needed again soon,
  /// so peak resident memory stays at a few layers when a model is streamed.
  void release(std::span<const std::byte> range) const noexcept;

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kvrank

// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/mapped_file.hpp"
#include <stdexcept>
namespace kvrank {
MappedFile::MappedFile(const std::filesystem::path&) { throw std::logic_error("not implemented"); }
MappedFile::~MappedFile() = default;
void MappedFile::release(std::span<const std::byte>) const noexcept {}
}  // namespace kvrank

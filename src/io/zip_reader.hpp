// A minimal, defensive reader of zip archives (private: what .npz files need).
//
// Reads the central directory (ZIP64 included: numpy writes every .npz member with ZIP64 extra
// fields), locates each member's data through its local header, and extracts stored (method 0) or
// deflated (method 8) members with their CRC-32 checked. Every size the archive claims is checked
// against the file, and a deflated member's claimed size against deflate's maximum ratio, before
// anything is allocated. Errors are kvrank::Error naming the archive (and the member).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvrank::detail {

struct ZipMember {
  std::string name;
  std::uint16_t method = 0;  ///< 0 stored, 8 deflated
  std::uint32_t crc32 = 0;
  std::uint64_t uncompressed_size = 0;
  std::span<const std::byte> data;  ///< the member's (compressed) bytes inside the archive
};

/// Deflate cannot expand more than about 1032:1; a member claiming more is rejected.
inline constexpr std::uint64_t kMaxDeflateRatio = 1032;

/// Lists the members of the archive in `bytes` (directories skipped). Throws kvrank::Error.
std::vector<ZipMember> read_zip_directory(std::span<const std::byte> bytes,
                                          const std::string& file_name);

/// Verifies a stored member's CRC (its bytes are `member.data`). Throws kvrank::Error.
void verify_stored_member(const ZipMember& member, const std::string& file_name);

/// Inflates a deflated member into exactly `uncompressed_size` bytes and verifies its CRC. With
/// `limit` below that size, inflates only the first `limit` bytes (a member's header) and stops:
/// the CRC cannot be checked then, and the rest of the stream is not read.
std::vector<std::byte> inflate_member(const ZipMember& member, const std::string& file_name,
                                      std::uint64_t limit = UINT64_MAX);

}  // namespace kvrank::detail

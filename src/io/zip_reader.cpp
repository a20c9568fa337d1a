#include "io/zip_reader.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <new>
#include <optional>
#include <set>

#include "kvrank/base/error.hpp"

namespace kvrank::detail {
namespace {

constexpr std::uint32_t kEndOfDirectory = 0x06054b50;
constexpr std::uint32_t kZip64Locator = 0x07064b50;
constexpr std::uint32_t kZip64EndOfDirectory = 0x06064b50;
constexpr std::uint32_t kCentralHeader = 0x02014b50;
constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::size_t kEndOfDirectorySize = 22;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kMaxComment = 0xFFFF;
constexpr std::uint16_t kZip64ExtraId = 0x0001;
// zlib counts in 32-bit unsigned ints: feed it at most this much at a time.
constexpr std::uint64_t kZlibChunk = 1u << 30;

// Little-endian reads at offsets the caller has bounds-checked.
class Bytes {
 public:
  explicit Bytes(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::uint64_t size() const noexcept { return bytes_.size(); }
  /// True when [offset, offset + length) lies inside the bytes (no overflow).
  bool contains(std::uint64_t offset, std::uint64_t length) const noexcept {
    return offset <= size() && length <= size() - offset;
  }
  std::uint64_t read(std::uint64_t offset, int width) const noexcept {
    std::uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) {
      value = (value << 8) | static_cast<std::uint8_t>(bytes_[offset + i]);
    }
    return value;
  }
  std::uint16_t u16(std::uint64_t offset) const noexcept {
    return static_cast<std::uint16_t>(read(offset, 2));
  }
  std::uint32_t u32(std::uint64_t offset) const noexcept {
    return static_cast<std::uint32_t>(read(offset, 4));
  }
  std::uint64_t u64(std::uint64_t offset) const noexcept { return read(offset, 8); }
  std::string text(std::uint64_t offset, std::uint64_t length) const {
    return std::string(reinterpret_cast<const char*>(bytes_.data() + offset), length);
  }
  std::span<const std::byte> span(std::uint64_t offset, std::uint64_t length) const noexcept {
    return bytes_.subspan(offset, length);
  }

 private:
  std::span<const std::byte> bytes_;
};

struct Directory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t end_limit = 0;  // the directory must end before the end-of-directory records
};

std::string hex32(std::uint32_t value) {
  char text[11];
  std::snprintf(text, sizeof text, "0x%08x", value);
  return text;
}

std::optional<std::uint64_t> find_end_of_directory(const Bytes& bytes) {
  const std::uint64_t last = bytes.size() - kEndOfDirectorySize;
  const std::uint64_t first = last > kMaxComment ? last - kMaxComment : 0;
  for (std::uint64_t pos = last + 1; pos-- > first;) {
    // The comment length must reach the end of the file exactly: rules out look-alike bytes.
    if (bytes.u32(pos) == kEndOfDirectory &&
        pos + kEndOfDirectorySize + bytes.u16(pos + 20) == bytes.size()) {
      return pos;
    }
  }
  return std::nullopt;
}

void read_zip64_end(const Bytes& bytes, std::uint64_t end_pos, Directory& directory,
                    const std::string& file) {
  if (end_pos < 20 || bytes.u32(end_pos - 20) != kZip64Locator) {
    throw Error(file, "zip archive needs a ZIP64 end-of-directory locator but has none");
  }
  const std::uint64_t record = bytes.u64(end_pos - 20 + 8);
  if (!bytes.contains(record, 56) || record + 56 > end_pos - 20 ||
      bytes.u32(record) != kZip64EndOfDirectory) {
    throw Error(file, "ZIP64 end-of-directory record is missing or out of bounds");
  }
  directory.entries = bytes.u64(record + 32);
  directory.size = bytes.u64(record + 40);
  directory.offset = bytes.u64(record + 48);
  directory.end_limit = record;
}

Directory read_directory_location(const Bytes& bytes, const std::string& file) {
  if (bytes.size() < kEndOfDirectorySize) {
    throw Error(file, "file is " + std::to_string(bytes.size()) +
                          " bytes, too small for a zip archive (at least 22)");
  }
  std::optional<std::uint64_t> end_pos = find_end_of_directory(bytes);
  if (!end_pos) throw Error(file, "not a zip archive (no end-of-central-directory record)");
  const std::uint64_t pos = *end_pos;
  Directory directory{bytes.u16(pos + 10), bytes.u32(pos + 16), bytes.u32(pos + 12), pos};
  const bool zip64 =
      directory.entries == 0xFFFF || directory.size == 0xFFFFFFFF || directory.offset == 0xFFFFFFFF;
  if (zip64) {
    read_zip64_end(bytes, pos, directory, file);
  } else if (bytes.u16(pos + 4) != 0 || bytes.u16(pos + 6) != 0) {
    throw Error(file, "multi-disk zip archives are not supported");
  }
  if (directory.offset > directory.end_limit ||
      directory.size > directory.end_limit - directory.offset) {
    throw Error(file, "central directory (offset " + std::to_string(directory.offset) + ", " +
                          std::to_string(directory.size) + " bytes) lies outside the archive");
  }
  if (directory.entries > directory.size / kCentralHeaderSize) {
    throw Error(file, "central directory claims " + std::to_string(directory.entries) +
                          " members but holds only " + std::to_string(directory.size) + " bytes");
  }
  return directory;
}

struct CentralEntry {
  std::uint16_t flags = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t local_offset = 0;
  ZipMember member;
};

// Replaces the 32-bit fields saturated at 0xFFFFFFFF by their values in the ZIP64 extra field.
void apply_zip64_extra(const Bytes& bytes, std::uint64_t extra, std::uint64_t extra_length,
                       CentralEntry& entry, const std::string& file) {
  std::uint64_t* fields[] = {&entry.member.uncompressed_size, &entry.compressed_size,
                             &entry.local_offset};
  const std::uint64_t end = extra + extra_length;
  for (std::uint64_t block = extra; block + 4 <= end;) {
    const std::uint16_t id = bytes.u16(block);
    const std::uint64_t length = bytes.u16(block + 2);
    if (block + 4 + length > end) break;
    if (id == kZip64ExtraId) {
      std::uint64_t cursor = block + 4;
      for (std::uint64_t* field : fields) {
        if (*field != 0xFFFFFFFF) continue;
        if (cursor + 8 > block + 4 + length) {
          throw Error(file, entry.member.name, "ZIP64 extra field is too short");
        }
        *field = bytes.u64(cursor);
        cursor += 8;
      }
      return;
    }
    block += 4 + length;
  }
}

CentralEntry read_central_entry(const Bytes& bytes, std::uint64_t& cursor, std::uint64_t end,
                                const std::string& file) {
  if (cursor + kCentralHeaderSize > end || bytes.u32(cursor) != kCentralHeader) {
    throw Error(file, "central directory entry at offset " + std::to_string(cursor) +
                          " is malformed or truncated");
  }
  const std::uint64_t name_length = bytes.u16(cursor + 28);
  const std::uint64_t extra_length = bytes.u16(cursor + 30);
  const std::uint64_t comment_length = bytes.u16(cursor + 32);
  const std::uint64_t name_pos = cursor + kCentralHeaderSize;
  if (name_pos + name_length + extra_length + comment_length > end) {
    throw Error(file, "central directory entry at offset " + std::to_string(cursor) +
                          " runs past the end of the directory");
  }
  CentralEntry entry;
  entry.flags = bytes.u16(cursor + 8);
  entry.member.method = bytes.u16(cursor + 10);
  entry.member.crc32 = bytes.u32(cursor + 16);
  entry.compressed_size = bytes.u32(cursor + 20);
  entry.member.uncompressed_size = bytes.u32(cursor + 24);
  entry.local_offset = bytes.u32(cursor + 42);
  entry.member.name = bytes.text(name_pos, name_length);
  apply_zip64_extra(bytes, name_pos + name_length, extra_length, entry, file);
  cursor = name_pos + name_length + extra_length + comment_length;
  return entry;
}

// Finds the member's data after its local header and checks it lies inside the archive.
std::span<const std::byte> locate_data(const Bytes& bytes, const CentralEntry& entry,
                                       const std::string& file) {
  const std::string& name = entry.member.name;
  const std::uint64_t local = entry.local_offset;
  if (!bytes.contains(local, kLocalHeaderSize) || bytes.u32(local) != kLocalHeader) {
    throw Error(file, name, "local header at offset " + std::to_string(local) + " is missing");
  }
  const std::uint64_t start =
      local + kLocalHeaderSize + bytes.u16(local + 26) + bytes.u16(local + 28);
  if (!bytes.contains(start, entry.compressed_size)) {
    throw Error(file, name,
                "member data (" + std::to_string(entry.compressed_size) + " bytes at offset " +
                    std::to_string(start) + ") runs past the end of the archive");
  }
  return bytes.span(start, entry.compressed_size);
}

void check_crc(const ZipMember& member, std::span<const std::byte> data, const std::string& file) {
  const std::uint32_t actual = static_cast<std::uint32_t>(
      crc32_z(0, reinterpret_cast<const Bytef*>(data.data()), data.size()));
  if (actual != member.crc32) {
    throw Error(file, member.name,
                "CRC-32 mismatch (archive says " + hex32(member.crc32) + ", data gives " +
                    hex32(actual) + "): the archive is corrupt");
  }
}

// Owns a zlib inflate stream for the duration of one member.
class Inflater {
 public:
  Inflater() {
    if (inflateInit2(&stream_, -MAX_WBITS) != Z_OK) throw std::bad_alloc();  // raw deflate
  }
  ~Inflater() { inflateEnd(&stream_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  z_stream& stream() noexcept { return stream_; }

 private:
  z_stream stream_{};
};

}  // namespace

std::vector<ZipMember> read_zip_directory(std::span<const std::byte> archive,
                                          const std::string& file_name) {
  const Bytes bytes(archive);
  const Directory directory = read_directory_location(bytes, file_name);
  std::vector<ZipMember> members;
  std::set<std::string> names;
  std::uint64_t cursor = directory.offset;
  const std::uint64_t end = directory.offset + directory.size;
  for (std::uint64_t i = 0; i < directory.entries; ++i) {
    CentralEntry entry = read_central_entry(bytes, cursor, end, file_name);
    const std::string& name = entry.member.name;
    if (name.ends_with('/')) continue;  // a folder entry holds no data
    if (!names.insert(name).second) {
      throw Error(file_name, name, "member appears more than once in the archive");
    }
    if ((entry.flags & 0x1) != 0) throw Error(file_name, name, "member is encrypted");
    if (entry.member.method != 0 && entry.member.method != 8) {
      throw Error(file_name, name,
                  "compression method " + std::to_string(entry.member.method) +
                      " is not supported (expected 0 stored or 8 deflated)");
    }
    entry.member.data = locate_data(bytes, entry, file_name);
    members.push_back(std::move(entry.member));
  }
  return members;
}

void verify_stored_member(const ZipMember& member, const std::string& file_name) {
  if (member.data.size() != member.uncompressed_size) {
    throw Error(file_name, member.name,
                "stored member holds " + std::to_string(member.data.size()) + " bytes but claims " +
                    std::to_string(member.uncompressed_size));
  }
  check_crc(member, member.data, file_name);
}

std::vector<std::byte> inflate_member(const ZipMember& member, const std::string& file_name,
                                      std::uint64_t limit) {
  const std::uint64_t claimed = member.uncompressed_size;
  const std::uint64_t compressed = member.data.size();
  if (claimed > compressed * kMaxDeflateRatio + 1024) {
    throw Error(file_name, member.name,
                "claims " + std::to_string(claimed) + " uncompressed bytes from " +
                    std::to_string(compressed) + " compressed bytes, more than deflate's " +
                    std::to_string(kMaxDeflateRatio) + ":1 maximum");
  }
  const bool whole = limit >= claimed;
  std::vector<std::byte> output(whole ? claimed : limit);
  Inflater inflater;
  z_stream& stream = inflater.stream();
  std::uint64_t consumed = 0, produced = 0;
  unsigned char probe = 0;  // one byte of room past the claimed size, to detect longer streams
  for (;;) {
    if (!whole && produced == limit) return output;  // the prefix asked for
    const auto in_chunk = static_cast<uInt>(std::min(compressed - consumed, kZlibChunk));
    const bool full = produced == claimed;
    const auto out_chunk =
        full ? 1u : static_cast<uInt>(std::min(output.size() - produced, kZlibChunk));
    stream.next_in =
        reinterpret_cast<Bytef*>(const_cast<std::byte*>(member.data.data() + consumed));
    stream.avail_in = in_chunk;
    stream.next_out = full ? &probe : reinterpret_cast<Bytef*>(output.data() + produced);
    stream.avail_out = out_chunk;
    const int status = inflate(&stream, Z_NO_FLUSH);
    const std::uint64_t read = in_chunk - stream.avail_in, written = out_chunk - stream.avail_out;
    if (full && written > 0) {
      throw Error(file_name, member.name,
                  "inflates to more than the " + std::to_string(claimed) + " bytes it claims");
    }
    consumed += read;
    produced += written;
    if (status == Z_STREAM_END) break;
    if (status == Z_MEM_ERROR) throw std::bad_alloc();
    if (status == Z_DATA_ERROR || status == Z_NEED_DICT) {
      throw Error(file_name, member.name,
                  std::string("deflate data is corrupt (") +
                      (stream.msg != nullptr ? stream.msg : "zlib error") + ")");
    }
    if (read == 0 && written == 0) {  // no progress: the input ended before the stream did
      throw Error(file_name, member.name, "deflate data is truncated");
    }
  }
  if (produced != claimed) {
    throw Error(
        file_name, member.name,
        "inflates to " + std::to_string(produced) + " bytes but claims " + std::to_string(claimed));
  }
  check_crc(member, output, file_name);
  return output;
}

}  // namespace kvrank::detail

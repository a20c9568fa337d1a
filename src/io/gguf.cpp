#include "kvrank/io/gguf.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>

#include "base/json_strict.hpp"
#include "io/gguf_types.hpp"
#include "kvrank/base/error.hpp"

namespace kvrank {
namespace {

using namespace gguf_types;  // NOLINT(google-build-using-namespace): the file's own vocabulary

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes little-endian");

constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
// Smallest encodings, to bound claimed counts by the bytes left: a tensor info is a name length,
// n_dims, type and offset; a metadata entry a key length, a value type and a one-byte value.
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr std::uint64_t kMinMetadataBytes = 8 + 4 + 1;

// ---- a bounds-checked little-endian reader ------------------------------------------------------

class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  std::uint64_t position() const noexcept { return position_; }
  std::uint64_t left() const noexcept { return bytes_.size() - position_; }

  void need(std::uint64_t count, std::string_view what) const {
    if (count > left()) {
      throw Error(file_, "truncated: " + std::string(what) + " at byte " +
                             std::to_string(position_) + " needs " + std::to_string(count) +
                             " bytes, the file has " + std::to_string(left()) + " left");
    }
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof value);
    position_ += sizeof value;
    return value;
  }

  void skip(std::uint64_t count, std::string_view what) {
    need(count, what);
    position_ += count;
  }

  /// A string: uint64 length then the bytes. Longer than `max_length` is an error.
  std::string_view read_string(std::string_view what, std::uint64_t max_length) {
    const std::uint64_t length = read<std::uint64_t>(what);
    if (length > max_length) {
      throw Error(file_, std::string(what) + " at byte " + std::to_string(position_ - 8) + " is " +
                             std::to_string(length) + " bytes long (the limit is " +
                             std::to_string(max_length) + ")");
    }
    need(length, what);
    std::string_view text(reinterpret_cast<const char*>(bytes_.data() + position_), length);
    position_ += length;
    return text;
  }

 private:
  std::span<const std::byte> bytes_;
  const std::string& file_;
  std::uint64_t position_ = 0;
};

std::string checked_utf8(std::string_view text, const std::string& file, std::string_view what) {
  if (auto bad = detail::first_invalid_utf8(text)) {
    throw Error(file, std::string(what) + " is not valid UTF-8 (byte " + std::to_string(*bad) +
                          " of " + std::to_string(text.size()) + ")");
  }
  return std::string(text);
}

// ---- header -------------------------------------------------------------------------------------

std::uint32_t read_version(Cursor& cursor, const std::string& file) {
  const std::uint32_t version = cursor.read<std::uint32_t>("version");
  if (version == 2 || version == 3) return version;
  if (version == 1) throw Error(file, "GGUF version 1 is not supported (expected version 2 or 3)");
  if (version > 0xFFFF && (version & 0xFFFF) == 0) {
    throw Error(file, "big-endian GGUF file (version field " + std::to_string(version) +
                          "); kvrank reads little-endian GGUF only");
  }
  throw Error(file, "unknown GGUF version " + std::to_string(version) + " (expected 2 or 3)");
}

std::uint64_t read_count(Cursor& cursor, const std::string& file, std::string_view what,
                         std::uint64_t min_bytes_each, std::uint64_t limit) {
  const std::uint64_t count = cursor.read<std::uint64_t>(what);
  if (count > cursor.left() / min_bytes_each) {
    throw Error(file, std::string(what) + " " + std::to_string(count) + " is more than the " +
                          std::to_string(cursor.left()) + " bytes left in the file can hold");
  }
  if (count > limit) {
    throw Error(file, std::string(what) + " " + std::to_string(count) +
                          " is more than kvrank reads (" + std::to_string(limit) + ")");
  }
  return count;
}

// ---- metadata -----------------------------------------------------------------------------------

class MetadataReader {
 public:
  MetadataReader(Cursor& cursor, const std::string& file) : cursor_(cursor), file_(file) {}

  std::optional<std::uint32_t> alignment_type;  ///< the value type of general.alignment, if any

  void read_entry(std::map<std::string, nlohmann::json>& metadata) {
    const std::string key =
        checked_utf8(cursor_.read_string("metadata key", kMaxGgufName), file_, "metadata key");
    key_ = &key;
    const std::uint32_t type = read_type("value type");
    if (key == "general.alignment") alignment_type = type;
    nlohmann::json value = read_value(type);
    if (!metadata.emplace(key, std::move(value)).second)
      throw error("appears more than once in the metadata");
  }

 private:
  Error error(const std::string& what) const {
    return Error(file_, "metadata \"" + excerpt(*key_) + "\": " + what);
  }

  std::uint32_t read_type(std::string_view what) {
    const std::uint32_t type = cursor_.read<std::uint32_t>(what);
    if (type >= kValueTypeNames.size()) throw error("unknown value type " + std::to_string(type));
    return type;
  }

  template <typename T>
  nlohmann::json read_number() {
    return nlohmann::json(cursor_.read<T>("metadata value"));
  }

  nlohmann::json read_scalar(std::uint32_t type) {
    switch (type) {
      case kU8:
        return read_number<std::uint8_t>();
      case kI8:
        return read_number<std::int8_t>();
      case kU16:
        return read_number<std::uint16_t>();
      case kI16:
        return read_number<std::int16_t>();
      case kU32:
        return read_number<std::uint32_t>();
      case kI32:
        return read_number<std::int32_t>();
      case kF32:
        return read_number<float>();
      case kU64:
        return read_number<std::uint64_t>();
      case kI64:
        return read_number<std::int64_t>();
      case kF64:
        return read_number<double>();
      case kBool: {
        const std::uint8_t value = cursor_.read<std::uint8_t>("metadata value");
        if (value > 1) throw error("bool value " + std::to_string(value) + " is not 0 or 1");
        return nlohmann::json(value == 1);
      }
      default:  // kString
        return checked_utf8(
            cursor_.read_string("metadata string", std::numeric_limits<std::uint64_t>::max()),
            file_, "metadata \"" + excerpt(*key_) + "\"");
    }
  }

  nlohmann::json read_value(std::uint32_t type) {
    if (type != kArray) return read_scalar(type);
    const std::uint32_t element = read_type("array element type");
    if (element == kArray) throw error("nested arrays are not supported");
    const std::uint64_t count = cursor_.read<std::uint64_t>("array length");
    const std::uint64_t min_size = element == kString ? 8 : value_size(element);
    if (count > cursor_.left() / min_size) {
      throw error("array of " + std::to_string(count) + " " + value_type_name(element) +
                  " values is longer than the " + std::to_string(cursor_.left()) +
                  " bytes left in the file");
    }
    if (element != kString && count <= kMaxGgufKeptArray) {
      nlohmann::json values = nlohmann::json::array();
      for (std::uint64_t i = 0; i < count; ++i) values.push_back(read_scalar(element));
      return values;
    }
    skip_array(element, count);
    return {{"array_of", value_type_name(element)}, {"length", count}};
  }

  void skip_array(std::uint32_t element, std::uint64_t count) {
    if (element != kString) {
      cursor_.skip(count * value_size(element), "metadata array");  // count bounded above
      return;
    }
    for (std::uint64_t i = 0; i < count; ++i) {
      (void)cursor_.read_string("metadata string", std::numeric_limits<std::uint64_t>::max());
    }
  }

  Cursor& cursor_;
  const std::string& file_;
  const std::string* key_ = nullptr;
};

std::uint64_t alignment_of(const std::map<std::string, nlohmann::json>& metadata,
                           std::optional<std::uint32_t> type, const std::string& file) {
  if (!type) return kDefaultAlignment;
  if (*type != kU32) {
    throw Error(
        file, "metadata \"general.alignment\": expected a uint32, found " + value_type_name(*type));
  }
  const std::uint64_t alignment = metadata.at("general.alignment").get<std::uint64_t>();
  if (!std::has_single_bit(alignment)) {
    throw Error(file, "metadata \"general.alignment\": " + std::to_string(alignment) +
                          " is not a power of two");
  }
  return alignment;
}

// ---- tensor infos -------------------------------------------------------------------------------

struct TensorInfo {
  std::string name;
  std::vector<std::int64_t> ne;  // ggml order
  const GgmlType* type;
  std::uint64_t offset;
  std::uint64_t bytes;
};

std::string dims_text(const std::vector<std::int64_t>& ne) {
  TensorView view;
  view.shape = ne;
  return view.shape_string();
}

// numel / block_elements × block_bytes, with the block and overflow checks.
std::uint64_t tensor_bytes(const TensorInfo& info, const std::string& file) {
  const GgmlType& type = *info.type;
  const std::string type_name(type.name);
  if (info.ne.empty() && type.block_elements > 1)
    throw Error(file, info.name, "a 0-dimensional tensor cannot be of block type " + type_name);
  if (!info.ne.empty() && info.ne[0] % static_cast<std::int64_t>(type.block_elements) != 0) {
    throw Error(file, info.name,
                "ne[0] = " + std::to_string(info.ne[0]) + " is not a whole number of " + type_name +
                    " blocks (" + std::to_string(type.block_elements) + " values)");
  }
  if (std::find(info.ne.begin(), info.ne.end(), 0) != info.ne.end()) return 0;
  std::uint64_t bytes = type.block_bytes;
  for (std::size_t axis = 0; axis < info.ne.size(); ++axis) {
    std::uint64_t extent = static_cast<std::uint64_t>(info.ne[axis]);
    if (axis == 0) extent /= type.block_elements;
    if (__builtin_mul_overflow(bytes, extent, &bytes)) {
      throw Error(file, info.name,
                  "dims " + dims_text(info.ne) + " of " + type_name + " overflow 64-bit sizes");
    }
  }
  return bytes;
}

TensorInfo read_tensor_info(Cursor& cursor, const std::string& file, std::uint64_t alignment) {
  TensorInfo info;
  info.name = checked_utf8(cursor.read_string("tensor name", kMaxGgufName), file, "tensor name");
  const std::uint32_t n_dims = cursor.read<std::uint32_t>("tensor dimension count");
  if (n_dims > kMaxDims) {
    throw Error(file, info.name,
                "has " + std::to_string(n_dims) + " dimensions (GGUF allows at most " +
                    std::to_string(kMaxDims) + ")");
  }
  for (std::uint32_t i = 0; i < n_dims; ++i) {
    const std::uint64_t extent = cursor.read<std::uint64_t>("tensor dimension");
    if (extent > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw Error(file, info.name,
                  "dimension " + std::to_string(i) + " is " + std::to_string(extent) +
                      " (more than 2^63 - 1)");
    }
    info.ne.push_back(static_cast<std::int64_t>(extent));
  }
  const std::uint32_t type_id = cursor.read<std::uint32_t>("tensor type");
  info.type = find_ggml_type(type_id);
  if (!info.type) throw Error(file, info.name, "unknown GGML type " + std::to_string(type_id));
  info.offset = cursor.read<std::uint64_t>("tensor offset");
  if (info.offset % alignment != 0) {
    throw Error(file, info.name,
                "data offset " + std::to_string(info.offset) + " is not a multiple of the " +
                    "alignment " + std::to_string(alignment));
  }
  info.bytes = tensor_bytes(info, file);
  return info;
}

// Every tensor lies inside the file, after data_start, and no two overlap.
void check_placement(std::vector<const TensorInfo*> infos, std::uint64_t data_start,
                     std::uint64_t file_size, const std::string& file) {
  std::sort(infos.begin(), infos.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* info : infos) {
    std::uint64_t begin = 0, end = 0;
    if (__builtin_add_overflow(data_start, info->offset, &begin) ||
        __builtin_add_overflow(begin, info->bytes, &end) || end > file_size) {
      throw Error(file, info->name,
                  "data at offset " + std::to_string(info->offset) + " (" +
                      std::to_string(info->bytes) + " bytes) runs past the end of the file (" +
                      std::to_string(file_size) + " bytes, data section from byte " +
                      std::to_string(data_start) + "; file truncated?)");
    }
    if (previous && info->bytes > 0 && info->offset < previous->offset + previous->bytes) {
      throw Error(file, info->name,
                  "data at offset " + std::to_string(info->offset) + " overlaps tensor \"" +
                      previous->name + "\" (which ends at offset " +
                      std::to_string(previous->offset + previous->bytes) + ")");
    }
    if (info->bytes > 0) previous = info;
  }
}

std::vector<std::int64_t> pytorch_shape(const std::vector<std::int64_t>& ne) {
  return {ne.rbegin(), ne.rend()};
}

}  // namespace

GgufFile parse_gguf(std::span<const std::byte> file_bytes, const std::string& file_name) {
  Cursor cursor(file_bytes, file_name);
  if (file_bytes.size() < 4 || std::memcmp(file_bytes.data(), "GGUF", 4) != 0)
    throw Error(file_name, "not a GGUF file (it does not start with \"GGUF\")");
  cursor.skip(4, "magic");
  GgufFile result;
  result.version = read_version(cursor, file_name);
  const std::uint64_t tensor_count =
      read_count(cursor, file_name, "tensor count", kMinTensorInfoBytes, kMaxGgufTensors);
  const std::uint64_t metadata_count =
      read_count(cursor, file_name, "metadata count", kMinMetadataBytes, kMaxGgufMetadata);

  MetadataReader metadata(cursor, file_name);
  for (std::uint64_t i = 0; i < metadata_count; ++i) metadata.read_entry(result.metadata);
  result.alignment = alignment_of(result.metadata, metadata.alignment_type, file_name);

  std::vector<TensorInfo> infos;
  std::set<std::string_view> names;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    infos.push_back(read_tensor_info(cursor, file_name, result.alignment));
  }
  for (const TensorInfo& info : infos) {
    if (!names.insert(info.name).second)
      throw Error(file_name, info.name, "tensor name appears more than once");
  }
  const std::uint64_t data_start =
      (cursor.position() + result.alignment - 1) / result.alignment * result.alignment;
  std::vector<const TensorInfo*> placed;
  for (const TensorInfo& info : infos) placed.push_back(&info);
  check_placement(std::move(placed), data_start, file_bytes.size(), file_name);

  for (TensorInfo& info : infos) {
    if (!info.type->dtype) {
      result.unsupported.push_back(
          {info.name, std::string(info.type->name), pytorch_shape(info.ne)});
      continue;
    }
    TensorView view;
    view.name = std::move(info.name);
    view.file = file_name;
    view.dtype = *info.type->dtype;
    view.shape = pytorch_shape(info.ne);
    view.bytes = file_bytes.subspan(data_start + info.offset, info.bytes);
    result.tensors.push_back(std::move(view));
  }
  return result;
}

}  // namespace kvrank

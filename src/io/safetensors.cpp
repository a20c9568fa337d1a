#include "kvrank/io/safetensors.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>
#include <tuple>

#include "base/guarded_read.hpp"
#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"

namespace kvrank {
namespace {

using Json = nlohmann::json;

// Valid safetensors dtypes kvrank cannot even list (sub-byte or complex); anything else not in
// any_dtype_from_name() is unknown.
constexpr std::string_view kUnsupportedDTypes[] = {"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0", "C64"};

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin;
  std::uint64_t end;
};

std::string offsets_string(std::uint64_t begin, std::uint64_t end) {
  // Built with += (GCC 12 warns falsely about `"[" + std::to_string(...)`).
  std::string text = "[";
  text += std::to_string(begin);
  text += ", ";
  text += std::to_string(end);
  return text + "]";
}

std::uint64_t read_u64_le(const std::byte* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | static_cast<std::uint8_t>(bytes[i]);
  return value;
}

const Json& field(const Json& entry, const char* key, const std::string& file,
                  const std::string& name) {
  auto it = entry.find(key);
  if (it == entry.end()) throw Error(file, name, std::string("missing \"") + key + "\"");
  return *it;
}

DType parse_dtype(const Json& value, const std::string& file, const std::string& name) {
  if (!value.is_string()) {
    throw Error(file, name, "\"dtype\" is not a string (found " + detail::json_kind(value) + ")");
  }
  const std::string& text = value.get_ref<const std::string&>();
  if (auto dtype = any_dtype_from_name(text)) return *dtype;
  for (std::string_view unsupported : kUnsupportedDTypes) {
    if (text == unsupported)
      throw Error(file, name, "dtype " + text + " is not supported by kvrank");
  }
  throw Error(file, name, "unknown dtype \"" + text + "\"");
}

std::vector<std::int64_t> parse_shape(const Json& value, const std::string& file,
                                      const std::string& name) {
  auto invalid = [&] {
    return Error(file, name,
                 "\"shape\" is not a list of non-negative integers (found " +
                     detail::json_excerpt(value) + ")");
  };
  if (!value.is_array()) throw invalid();
  std::vector<std::int64_t> shape;
  for (const Json& extent : value) {
    if (!extent.is_number_unsigned() ||
        extent.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
      throw invalid();
    }
    shape.push_back(extent.get<std::int64_t>());
  }
  return shape;
}

Entry parse_entry(const std::string& name, const Json& entry, const std::string& file) {
  if (!entry.is_object()) {
    throw Error(file, name,
                "entry is not an object with dtype, shape and data_offsets (found " +
                    detail::json_kind(entry) + ")");
  }
  Entry parsed{name, parse_dtype(field(entry, "dtype", file, name), file, name),
               parse_shape(field(entry, "shape", file, name), file, name), 0, 0};
  const Json& offsets = field(entry, "data_offsets", file, name);
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    throw Error(file, name,
                "\"data_offsets\" is not two unsigned integers (found " +
                    detail::json_excerpt(offsets) + ")");
  }
  parsed.begin = offsets[0].get<std::uint64_t>();
  parsed.end = offsets[1].get<std::uint64_t>();
  if (parsed.begin > parsed.end) {
    throw Error(file, name,
                "data_offsets " + offsets_string(parsed.begin, parsed.end) + " have begin > end");
  }
  std::optional<std::uint64_t> bytes = checked_byte_count(parsed.shape, parsed.dtype);
  TensorView shaped;
  shaped.shape = parsed.shape;
  const std::string shape_text = shaped.shape_string();
  const std::string dtype_text(dtype_name(parsed.dtype));
  if (!bytes) {
    throw Error(file, name,
                "shape " + shape_text + " of " + dtype_text + " overflows 64-bit sizes");
  }
  if (*bytes != parsed.end - parsed.begin) {
    throw Error(file, name,
                "shape " + shape_text + " of " + dtype_text + " needs " + std::to_string(*bytes) +
                    " bytes but data_offsets " + offsets_string(parsed.begin, parsed.end) +
                    " hold " + std::to_string(parsed.end - parsed.begin));
  }
  return parsed;
}

std::map<std::string, std::string> parse_metadata(const Json& value, const std::string& file) {
  std::map<std::string, std::string> metadata;
  bool valid = value.is_object();
  if (valid) {
    for (const auto& [key, item] : value.items()) {
      if (!item.is_string()) {
        valid = false;
        break;
      }
      metadata[key] = item.get<std::string>();
    }
  }
  if (!valid) throw Error(file, "\"__metadata__\" is not an object of string values");
  return metadata;
}

// Tensors sorted by offset must tile [0, buffer_size) exactly: no gap, no overlap, nothing past the
// end, nothing left over.
void check_tiling(std::vector<const Entry*> entries, std::uint64_t buffer_size,
                  const std::string& file) {
  std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  std::uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry* entry : entries) {
    const std::string offsets = "data_offsets " + offsets_string(entry->begin, entry->end);
    if (entry->begin < expected) {
      throw Error(file, entry->name,
                  offsets + " overlap tensor \"" + previous->name + "\" (which ends at " +
                      std::to_string(expected) + ")");
    }
    if (entry->begin > expected) {
      throw Error(file, entry->name,
                  offsets + " leave a gap after byte " + std::to_string(expected) +
                      " (tensors must tile the data buffer from 0)");
    }
    if (entry->end > buffer_size) {
      throw Error(file, entry->name,
                  offsets + " run past the end of the " + std::to_string(buffer_size) +
                      "-byte data buffer (file truncated?)");
    }
    expected = entry->end;
    previous = entry;
  }
  if (expected != buffer_size) {
    throw Error(file, "tensors use " + std::to_string(expected) + " bytes of the " +
                          std::to_string(buffer_size) + "-byte data buffer (" +
                          std::to_string(buffer_size - expected) + " bytes unaccounted for)");
  }
}

}  // namespace

SafetensorsFile parse_safetensors(std::span<const std::byte> file_bytes,
                                  const std::string& file_name) {
  const std::size_t file_size = file_bytes.size();
  if (file_size < 8) {
    throw Error(file_name, "file is " + std::to_string(file_size) +
                               " bytes; a safetensors file needs at least 8 (the header size)");
  }
  const std::uint64_t header_size = read_u64_le(file_bytes.data());
  if (header_size > kMaxSafetensorsHeader) {
    throw Error(file_name, "header size " + std::to_string(header_size) + " exceeds the limit of " +
                               std::to_string(kMaxSafetensorsHeader) + " bytes");
  }
  if (header_size > file_size - 8) {
    throw Error(file_name, "header size " + std::to_string(header_size) +
                               " runs past the end of the file (" + std::to_string(file_size - 8) +
                               " bytes follow the size field)");
  }
  // A copy, guarded: the file may be shrinking under its memory map while it is opened.
  const std::string header_text =
      detail::guarded_text_copy(file_bytes.subspan(8, header_size), file_name);
  std::vector<std::string> header_order;  // SafetensorsFile::tensors keep the header's order
  Json header = detail::parse_json_strict(header_text, file_name, "header", &header_order);
  if (!header.is_object()) {
    throw Error(file_name, "header is not a JSON object (found " + detail::json_kind(header) + ")");
  }

  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const std::string& name : header_order) {
    const Json& value = header.at(name);
    if (name == "__metadata__") {
      result.metadata = parse_metadata(value, file_name);
    } else {
      entries.push_back(parse_entry(name, value, file_name));
    }
  }
  std::vector<const Entry*> by_offset;
  for (const Entry& entry : entries) by_offset.push_back(&entry);
  const std::uint64_t data_start = 8 + header_size;
  check_tiling(std::move(by_offset), file_size - data_start, file_name);

  for (Entry& entry : entries) {
    result.tensors.push_back(TensorView{
        .name = entry.name,
        .file = file_name,
        .dtype = entry.dtype,
        .shape = std::move(entry.shape),
        .fortran_order = false,
        .bytes = file_bytes.subspan(data_start + entry.begin, entry.end - entry.begin),
        .deferred = nullptr,
        .stored_name = {},
    });
  }
  return result;
}

}  // namespace kvrank

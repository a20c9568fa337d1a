#include "io/safetensors_writer.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <utility>

#include "kvrank/base/error.hpp"

namespace kvrank {
namespace {

// The files are little-endian; so is every machine kvrank targets. Refuse to build elsewhere rather
// than write files other tools would misread.
static_assert(std::endian::native == std::endian::little,
              "safetensors_writer assumes little-endian");

// Tensors are encoded in slices of this many elements so the encoding buffer stays small.
constexpr std::size_t kEncodeChunk = std::size_t{1} << 20;

bool is_encodable(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

std::string io_error(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

std::int64_t TensorSpec::numel() const noexcept {
  std::int64_t count = 1;
  for (std::int64_t extent : shape) count *= extent;
  return count;
}

std::uint64_t TensorSpec::byte_size() const noexcept {
  return static_cast<std::uint64_t>(numel()) * dtype_size(dtype);
}

std::uint16_t f32_to_bf16(float value) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest, ties to even; a carry into the
  // exponent is the correct rounding (up to infinity for the largest values).
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

std::uint16_t f32_to_f16(float value) noexcept {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);   // NaN
  if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // ≥ 65520: inf
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  if (exponent < -25) return sign;  // below half the smallest subnormal: ±0
  std::uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;  // 24 significant bits
  // A normal half keeps 11 significant bits (drop 13); a subnormal keeps fewer (exponent < -14).
  const int dropped = exponent >= -14 ? 13 : 13 + (-14 - exponent);
  const std::uint32_t half_ulp = 1u << (dropped - 1);
  const std::uint32_t remainder = mantissa & ((1u << dropped) - 1u);
  mantissa >>= dropped;
  if (remainder > half_ulp || (remainder == half_ulp && (mantissa & 1u))) ++mantissa;
  if (exponent < -14) return static_cast<std::uint16_t>(sign | mantissa);  // may round up to normal
  // Normal: biased exponent above the implicit bit; a mantissa carry bumps the exponent correctly.
  const auto biased = static_cast<std::uint32_t>(exponent + 15);
  return static_cast<std::uint16_t>(sign | ((biased << 10) + (mantissa - 0x400u)));
}

void encode_f32(DType dtype, std::span<const float> values, std::span<std::byte> out) {
  switch (dtype) {
    case DType::F32:
      std::memcpy(out.data(), values.data(), values.size_bytes());
      return;
    case DType::BF16:
    case DType::F16: {
      auto* halves = out.data();
      for (std::size_t i = 0; i < values.size(); ++i) {
        const std::uint16_t h =
            dtype == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
        std::memcpy(halves + 2 * i, &h, 2);
      }
      return;
    }
    default:
      throw std::logic_error("encode_f32: unsupported dtype");
  }
}

std::string safetensors_header(const std::vector<TensorSpec>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  // nlohmann::json objects are ordered maps: the names come out sorted.
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const TensorSpec& tensor : tensors) {
    if (header.contains(tensor.name)) {
      throw Error("", tensor.name, "duplicate tensor name in a safetensors file");
    }
    if (!is_encodable(tensor.dtype)) {
      throw Error("", tensor.name,
                  "cannot write dtype " + std::string(dtype_name(tensor.dtype)) +
                      " (expected F32, BF16 or F16)");
    }
    const std::uint64_t end = offset + tensor.byte_size();
    header[tensor.name] = {{"dtype", dtype_name(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string bytes(8, '\0');
  const std::uint64_t size = json.size();
  std::memcpy(bytes.data(), &size, 8);
  return bytes + json;
}

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tensors_(std::move(tensors)) {
  const std::string header = safetensors_header(tensors_, metadata);
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) throw Error(path_.string(), io_error("cannot create file"));
  std::setvbuf(file_, nullptr, _IOFBF, std::size_t{1} << 20);
  put(header.data(), header.size());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void SafetensorsWriter::write(std::string_view name, std::span<const float> values) {
  if (next_ >= tensors_.size() || tensors_[next_].name != name) {
    throw std::logic_error("SafetensorsWriter: tensor " + std::string(name) + " out of order");
  }
  const TensorSpec& tensor = tensors_[next_];
  if (static_cast<std::int64_t>(values.size()) != tensor.numel()) {
    throw std::logic_error("SafetensorsWriter: wrong element count for " + tensor.name);
  }
  const std::size_t element_size = dtype_size(tensor.dtype);
  for (std::size_t begin = 0; begin < values.size(); begin += kEncodeChunk) {
    const auto slice = values.subspan(begin, std::min(kEncodeChunk, values.size() - begin));
    encoded_.resize(slice.size() * element_size);
    encode_f32(tensor.dtype, slice, encoded_);
    put(encoded_.data(), encoded_.size());
  }
  ++next_;
}

void SafetensorsWriter::close() {
  if (next_ != tensors_.size()) {
    throw std::logic_error("SafetensorsWriter: closed before " + tensors_[next_].name);
  }
  std::FILE* file = std::exchange(file_, nullptr);
  if (std::fclose(file) != 0) throw Error(path_.string(), io_error("cannot write file"));
}

void SafetensorsWriter::put(const void* data, std::size_t size) {
  if (std::fwrite(data, 1, size, file_) != size) {
    throw Error(path_.string(), io_error("cannot write file"));
  }
}

}  // namespace kvrank

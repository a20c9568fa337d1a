#include "kvrank/io/npy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "io/zip_reader.hpp"
#include "kvrank/base/error.hpp"

namespace kvrank {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// numpy itself refuses headers over 10000 bytes unless told otherwise; allow generous room.
constexpr std::size_t kMaxNpyHeader = 1 << 20;

// Who errors are about: the file, and the member name when the array is inside an .npz.
struct Context {
  const std::string& file;
  const std::string& tensor;  // empty for a standalone .npy
  Error error(const std::string& detail) const { return Error(file, tensor, detail); }
};

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

// A strict parser of the one Python literal numpy writes:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Strings, True/False and tuples of non-negative integers; nothing is evaluated.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const Context& context) : text_(text), context_(context) {}

  Header parse() {
    Header header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!consume('}')) {
      skip_space();
      const std::size_t key_pos = pos_;
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        mark_seen(seen_descr, key, key_pos);
        header.descr = parse_string();
      } else if (key == "fortran_order") {
        mark_seen(seen_order, key, key_pos);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        mark_seen(seen_shape, key, key_pos);
        header.shape = parse_shape();
      } else {
        fail_at(key_pos, "unexpected key '" + key + "' (expected descr, fortran_order and shape)");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the closing '}'");
    if (!seen_descr || !seen_order || !seen_shape) {
      const char* missing = !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape";
      fail(std::string("missing key '") + missing + "'");
    }
    return header;
  }

 private:
  // Errors give the offset in the header text of the token at fault.
  [[noreturn]] void fail_at(std::size_t pos, const std::string& what) const {
    throw context_.error("NPY header dict is invalid at byte " + std::to_string(pos) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) {
    skip_space();
    fail_at(pos_, what);
  }
  void mark_seen(bool& seen, const std::string& key, std::size_t key_pos) {
    if (seen) fail_at(key_pos, "key '" + key + "' appears twice");
    seen = true;
  }
  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }
  std::string parse_string() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      fail("expected a quoted string");
    }
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    if (value.find('\\') != std::string::npos) fail("escapes are not supported in strings");
    pos_ = end + 1;
    return value;
  }
  bool parse_bool() {
    skip_space();
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail("expected True or False");
  }
  std::int64_t parse_extent() {
    skip_space();
    const std::size_t start = pos_;
    std::uint64_t value = 0;
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (value > (kMax - digit) / 10) fail_at(start, "shape entry is too large");
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail("expected a non-negative integer in the shape");
    return static_cast<std::int64_t>(value);
  }
  // "()", "(n,)", "(a, b)", "(a, b,)"; a bare "(n)" is not a tuple in Python and is refused.
  std::vector<std::int64_t> parse_shape() {
    expect('(');
    std::vector<std::int64_t> shape;
    while (!consume(')')) {
      shape.push_back(parse_extent());
      if (consume(',')) continue;
      if (shape.size() == 1) fail("a one-element shape needs a trailing comma, as in (n,)");
      expect(')');
      break;
    }
    return shape;
  }

  std::string_view text_;
  const Context& context_;
  std::size_t pos_ = 0;
};

DType parse_descr(const std::string& descr, const NpyOptions& options, const Context& context) {
  static const std::pair<std::string_view, DType> kTypes[] = {
      {"f8", DType::F64}, {"f4", DType::F32}, {"f2", DType::F16}, {"b1", DType::BOOL},
      {"u1", DType::U8},  {"i1", DType::I8},  {"i2", DType::I16}, {"u2", DType::U16},
      {"i4", DType::I32}, {"u4", DType::U32}, {"i8", DType::I64}, {"u8", DType::U64}};
  const char order = descr.empty() ? '\0' : descr[0];
  const std::string type = descr.size() > 1 ? descr.substr(1) : "";
  std::optional<DType> dtype;
  for (const auto& [code, candidate] : kTypes) {
    if (type == code) dtype = candidate;
  }
  if (type == "V2") {
    if (!options.bf16_void) {
      throw context.error("descr '" + descr +
                          "' holds raw 2-byte values; pass --npy-dtype bf16 to read them as "
                          "bfloat16");
    }
    dtype = DType::BF16;
  }
  // '|' (not applicable) and '=' (native: little-endian here) read like '<'.
  if (!dtype || std::string_view("<|=>").find(order) == std::string_view::npos) {
    throw context.error("unsupported descr '" + descr + "' (expected '<f8', '<f4' or '<f2')");
  }
  if (order == '>' && dtype_size(*dtype) > 1) {
    throw context.error("big-endian descr '" + descr + "' is not supported (expected '<" + type +
                        "')");
  }
  return *dtype;
}

std::uint64_t read_le(std::span<const std::byte> bytes, std::size_t offset, int width) {
  std::uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i)
    value = (value << 8) | static_cast<std::uint8_t>(bytes[offset + i]);
  return value;
}

// Where an NPY image's data lies: `view` has everything but the bytes.
struct NpyLayout {
  TensorView view;
  std::uint64_t data_start = 0;
  std::uint64_t data_size = 0;
};

// Parses the header of an NPY image of `total` bytes, of which `prefix` holds the first ones (at
// least min(total, 12) and the whole header), and checks that the data fills the rest exactly.
NpyLayout parse_npy_layout(std::span<const std::byte> prefix, std::uint64_t total,
                           const Context& context, const std::string& tensor_name,
                           const NpyOptions& options) {
  if (total < 10) {
    throw context.error("file is " + std::to_string(total) +
                        " bytes, too small for an NPY header (at least 10)");
  }
  if (std::memcmp(prefix.data(), kMagic.data(), kMagic.size()) != 0) {
    throw context.error("not an NPY file (the first bytes are not \\x93NUMPY)");
  }
  const int major = static_cast<int>(prefix[6]), minor = static_cast<int>(prefix[7]);
  if (major < 1 || major > 3 || minor != 0) {
    throw context.error("unsupported NPY version " + std::to_string(major) + "." +
                        std::to_string(minor) + " (expected 1.0, 2.0 or 3.0)");
  }
  const std::size_t length_width = major == 1 ? 2 : 4;
  const std::size_t header_start = 8 + length_width;
  if (total < header_start) {
    throw context.error("file ends inside the NPY header length");
  }
  const std::uint64_t header_length = read_le(prefix, 8, static_cast<int>(length_width));
  if (header_length > kMaxNpyHeader) {
    throw context.error("NPY header length " + std::to_string(header_length) +
                        " exceeds the limit of " + std::to_string(kMaxNpyHeader) + " bytes");
  }
  if (header_length > total - header_start) {
    throw context.error("NPY header length " + std::to_string(header_length) +
                        " runs past the end of the file (" + std::to_string(total - header_start) +
                        " bytes follow)");
  }
  std::string_view text(reinterpret_cast<const char*>(prefix.data() + header_start), header_length);
  Header header = HeaderParser(text, context).parse();
  const DType dtype = parse_descr(header.descr, options, context);

  const std::optional<std::uint64_t> byte_count = checked_byte_count(header.shape, dtype);
  if (!byte_count) throw context.error("shape overflows 64-bit sizes");
  NpyLayout layout;
  layout.data_start = header_start + header_length;
  layout.data_size = *byte_count;
  const std::uint64_t expected = *byte_count;
  const std::uint64_t found = total - layout.data_start;
  TensorView& view = layout.view;
  view.shape = std::move(header.shape);
  if (found < expected) {
    throw context.error("data is truncated: shape " + view.shape_string() + " of '" + header.descr +
                        "' needs " + std::to_string(expected) + " bytes, found " +
                        std::to_string(found));
  }
  if (found > expected) {
    throw context.error(std::to_string(found - expected) +
                        " unexpected bytes after the data (shape " + view.shape_string() + " of '" +
                        header.descr + "' needs " + std::to_string(expected) + ")");
  }
  view.name = tensor_name;
  view.file = context.file;
  view.dtype = dtype;
  view.fortran_order = header.fortran_order && view.shape.size() >= 2;
  return layout;
}

TensorView parse_npy_in(std::span<const std::byte> bytes, const Context& context,
                        const std::string& tensor_name, const NpyOptions& options) {
  NpyLayout layout = parse_npy_layout(bytes, bytes.size(), context, tensor_name, options);
  layout.view.bytes = bytes.subspan(layout.data_start, layout.data_size);
  return std::move(layout.view);
}

// A deflated NPZ member, inflated (and its CRC checked) when its data is first needed.
class InflatedMember final : public DeferredBytes {
 public:
  InflatedMember(detail::ZipMember member, std::string file_name, std::string tensor_name,
                 std::uint64_t data_start, std::uint64_t data_size)
      : member_(std::move(member)),
        file_(std::move(file_name)),
        tensor_(std::move(tensor_name)),
        data_start_(data_start),
        data_size_(data_size) {}

  std::size_t size() const noexcept override { return data_size_; }

  std::span<const std::byte> get() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!inflated_) {
      // The member is inflated into exactly its claimed size, which the header has been checked
      // against: nothing beyond the tensor's own bytes is ever allocated.
      inflated_ = std::make_unique<std::vector<std::byte>>(detail::inflate_member(member_, file_));
    }
    return std::span<const std::byte>(*inflated_).subspan(data_start_, data_size_);
  }

  void release() const noexcept override {
    const std::lock_guard<std::mutex> lock(mutex_);
    inflated_.reset();
  }

 private:
  detail::ZipMember member_;
  std::string file_;
  std::string tensor_;
  std::uint64_t data_start_;
  std::uint64_t data_size_;
  mutable std::mutex mutex_;
  mutable std::unique_ptr<std::vector<std::byte>> inflated_;
};

// The first bytes of a deflated member, enough to hold its NPY header (or all of it when shorter).
std::vector<std::byte> inflate_npy_header(const detail::ZipMember& member,
                                          const std::string& file_name) {
  constexpr std::size_t kUsualHeader = 4096;  // numpy writes headers of 128 bytes or so
  std::vector<std::byte> prefix = detail::inflate_member(member, file_name, kUsualHeader);
  if (prefix.size() < 12 || std::memcmp(prefix.data(), kMagic.data(), kMagic.size()) != 0)
    return prefix;  // parse_npy_layout() reports what is wrong
  const int length_width = static_cast<int>(prefix[6]) == 1 ? 2 : 4;
  const std::uint64_t header_end =
      8 + length_width + std::min<std::uint64_t>(read_le(prefix, 8, length_width), kMaxNpyHeader);
  if (header_end <= prefix.size()) return prefix;
  return detail::inflate_member(member, file_name, header_end);
}

}  // namespace

TensorView parse_npy(std::span<const std::byte> bytes, const std::string& file_name,
                     const std::string& tensor_name, const NpyOptions& options) {
  const std::string no_tensor;
  return parse_npy_in(bytes, Context{file_name, no_tensor}, tensor_name, options);
}

std::vector<NpzMember> parse_npz(std::span<const std::byte> bytes, const std::string& file_name,
                                 const NpyOptions& options) {
  std::vector<NpzMember> members;
  for (const detail::ZipMember& member : detail::read_zip_directory(bytes, file_name)) {
    if (!member.name.ends_with(".npy")) {
      throw Error(file_name, member.name, "member is not an .npy array");
    }
    const std::string tensor_name = member.name.substr(0, member.name.size() - 4);
    const Context context{file_name, tensor_name};
    NpzMember result;
    if (member.method == 0) {
      detail::verify_stored_member(member, file_name);
      result.tensor = parse_npy_in(member.data, context, tensor_name, options);
    } else {
      // Only the header is inflated now; the data when a tensor is converted (DeferredBytes).
      const std::vector<std::byte> prefix = inflate_npy_header(member, file_name);
      NpyLayout layout =
          parse_npy_layout(prefix, member.uncompressed_size, context, tensor_name, options);
      result.tensor = std::move(layout.view);
      result.tensor.deferred = std::make_shared<InflatedMember>(
          member, file_name, tensor_name, layout.data_start, layout.data_size);
    }
    members.push_back(std::move(result));
  }
  return members;
}

}  // namespace kvrank

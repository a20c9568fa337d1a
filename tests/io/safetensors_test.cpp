#include "kvrank/io/safetensors.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

// A safetensors image: 8-byte little-endian header size, the header text, `data_bytes` zero bytes.
std::vector<std::byte> image(const std::string& header, std::size_t data_bytes,
                             std::uint64_t header_size) {
  std::vector<std::byte> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::byte>(header_size >> (8 * i)));
  std::vector<std::byte> text = test::to_bytes(header);
  bytes.insert(bytes.end(), text.begin(), text.end());
  bytes.resize(bytes.size() + data_bytes, std::byte{0});
  return bytes;
}

std::vector<std::byte> image(const std::string& header, std::size_t data_bytes) {
  return image(header, data_bytes, header.size());
}

SafetensorsFile parsed(const std::vector<std::byte>& bytes) {
  return parse_safetensors(bytes, "m.safetensors");
}

// One tensor "a" with the given dtype/shape/offsets text, and `data` bytes of buffer.
std::vector<std::byte> one(const std::string& dtype, const std::string& shape,
                           const std::string& offsets, std::size_t data) {
  return image(R"({"a": {"dtype": ")" + dtype + R"(", "shape": )" + shape +
                   R"(, "data_offsets": )" + offsets + "}}",
               data);
}

}  // namespace

TEST_CASE("safetensors: tensors are views in header order, metadata kept",
          "[readers][safetensors]") {
  const std::string header = R"({"__metadata__": {"format": "pt"}, )"
                             R"("z": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [8, 20]}, )"
                             R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
                             R"("e": {"dtype": "F16", "shape": [0, 5], "data_offsets": [20, 20]}, )"
                             R"("p": {"dtype": "I64", "shape": [], "data_offsets": [20, 28]}}  )";
  std::vector<std::byte> bytes = image(header, 28);
  SafetensorsFile file = parsed(bytes);
  REQUIRE(file.tensors.size() == 4);
  CHECK(file.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  const TensorView& z = file.tensors[0];
  CHECK(z.name == "z");
  CHECK(z.file == "m.safetensors");
  CHECK(z.dtype == DType::BF16);
  CHECK(z.shape == std::vector<std::int64_t>{2, 3});
  CHECK(z.bytes.data() == bytes.data() + 8 + header.size() + 8);
  CHECK(z.bytes.size() == 12);
  CHECK(file.tensors[1].name == "a");
  CHECK(file.tensors[1].bytes.data() == bytes.data() + 8 + header.size());
  CHECK(file.tensors[2].numel() == 0);
  CHECK(file.tensors[3].dtype == DType::I64);
  CHECK(file.tensors[3].shape.empty());
  CHECK(file.tensors[3].numel() == 1);
}

TEST_CASE("safetensors: an empty header object and zero-size tensors are valid",
          "[readers][safetensors]") {
  CHECK(parsed(image("{}", 0)).tensors.empty());
  SafetensorsFile file = parsed(image(
      R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]},)"
      R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
      R"( "c": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},)"
      // Huge extents are fine beside a zero one: the byte count (0) is what must fit.
      R"( "d": {"dtype": "U8", "shape": [4611686018427387904, 3, 0], "data_offsets": [4, 4]}})",
      4));
  REQUIRE(file.tensors.size() == 4);
  CHECK(file.tensors[3].numel() == 0);
}

TEST_CASE("safetensors: every rule gives its exact message", "[readers][safetensors]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(parsed(test::to_bytes("abcd")),
                    "m.safetensors: file is 4 bytes; a safetensors file needs at least 8 (the "
                    "header size)");
  CHECK_THROWS_WITH(parsed(image("{}", 0, 100'000'001)),
                    "m.safetensors: header size 100000001 exceeds the limit of 100000000 bytes");
  CHECK_THROWS_WITH(parsed(image("{}", 0, 3)),
                    "m.safetensors: header size 3 runs past the end of the file (2 bytes follow "
                    "the size field)");
  CHECK_THROWS_WITH(parsed(image("{\"a\xC3\x28\": 1}", 0)),
                    "m.safetensors: header is not valid UTF-8 (byte 3 of the header)");
  CHECK_THROWS_WITH(parsed(image("{\"\xED\xA0\x80\": 1}", 0)),  // a UTF-16 surrogate
                    "m.safetensors: header is not valid UTF-8 (byte 2 of the header)");
  CHECK_THROWS_WITH(parsed(image("{oops}", 0)),
                    Contains("m.safetensors: header is not valid JSON: parse error at line 1, "
                             "column 2"));
  CHECK_THROWS_WITH(parsed(image("[]", 0)),
                    "m.safetensors: header is not a JSON object (found array)");
  CHECK_THROWS_WITH(parsed(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                                 R"( "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                                 8)),
                    "m.safetensors: a: appears more than once in the header");
  CHECK_THROWS_WITH(parsed(image(R"({"a": {"dtype": "F32", "shape": [1], "shape": [1]}})", 0)),
                    "m.safetensors: duplicate key \"shape\" in the header");
  CHECK_THROWS_WITH(parsed(image(R"({"__metadata__": {"step": 1}})", 0)),
                    "m.safetensors: \"__metadata__\" is not an object of string values");
  CHECK_THROWS_WITH(parsed(image(R"({"a": [1]})", 0)),
                    "m.safetensors: a: entry is not an object with dtype, shape and data_offsets "
                    "(found array)");
  CHECK_THROWS_WITH(parsed(image(R"({"a": {"shape": [], "data_offsets": [0, 4]}})", 4)),
                    "m.safetensors: a: missing \"dtype\"");
  CHECK_THROWS_WITH(parsed(image(R"({"a": {"dtype": "F32", "data_offsets": [0, 4]}})", 4)),
                    "m.safetensors: a: missing \"shape\"");
  CHECK_THROWS_WITH(parsed(image(R"({"a": {"dtype": "F32", "shape": []}})", 4)),
                    "m.safetensors: a: missing \"data_offsets\"");
  CHECK_THROWS_WITH(parsed(one("F7", "[1]", "[0, 4]", 4)),
                    "m.safetensors: a: unknown dtype \"F7\"");
  CHECK_THROWS_WITH(parsed(one("F4", "[2]", "[0, 1]", 1)),
                    "m.safetensors: a: dtype F4 is not supported by kvrank");
  CHECK_THROWS_WITH(parsed(image(R"({"a": {"dtype": 1, "shape": [], "data_offsets": [0, 4]}})", 4)),
                    "m.safetensors: a: \"dtype\" is not a string (found number)");
  CHECK_THROWS_WITH(parsed(one("F32", "[-1]", "[0, 4]", 4)),
                    "m.safetensors: a: \"shape\" is not a list of non-negative integers (found "
                    "[-1])");
  CHECK_THROWS_WITH(parsed(one("F32", "[1.5]", "[0, 4]", 4)),
                    "m.safetensors: a: \"shape\" is not a list of non-negative integers (found "
                    "[1.5])");
  CHECK_THROWS_WITH(parsed(one("F32", "[9223372036854775808]", "[0, 4]", 4)),
                    Contains("\"shape\" is not a list of non-negative integers"));
  CHECK_THROWS_WITH(
      parsed(one("F32", "[1]", "[-4, 0]", 4)),
      "m.safetensors: a: \"data_offsets\" is not two unsigned integers (found [-4,0])");
  CHECK_THROWS_WITH(parsed(one("F32", "[1]", "[0, 4.0]", 4)),
                    "m.safetensors: a: \"data_offsets\" is not two unsigned integers (found "
                    "[0,4.0])");
  CHECK_THROWS_WITH(parsed(one("F32", "[1]", "[0, \"4\"]", 4)),
                    Contains("\"data_offsets\" is not two unsigned integers"));
  CHECK_THROWS_WITH(parsed(one("F32", "[1]", "[0]", 4)),
                    Contains("\"data_offsets\" is not two unsigned integers"));
  CHECK_THROWS_WITH(parsed(one("F32", "[1]", "[4, 0]", 4)),
                    "m.safetensors: a: data_offsets [4, 0] have begin > end");
  CHECK_THROWS_WITH(parsed(one("F32", "[4611686018427387904, 4]", "[0, 4]", 4)),
                    "m.safetensors: a: shape [4611686018427387904, 4] of F32 overflows 64-bit "
                    "sizes");
  CHECK_THROWS_WITH(parsed(one("BF16", "[3]", "[0, 4]", 4)),
                    "m.safetensors: a: shape [3] of BF16 needs 6 bytes but data_offsets [0, 4] "
                    "hold 4");
  CHECK_THROWS_WITH(parsed(one("F32", "[1]", "[4, 8]", 8)),
                    "m.safetensors: a: data_offsets [4, 8] leave a gap after byte 0 (tensors "
                    "must tile the data buffer from 0)");
  CHECK_THROWS_WITH(parsed(one("F32", "[2]", "[0, 8]", 4)),
                    "m.safetensors: a: data_offsets [0, 8] run past the end of the 4-byte data "
                    "buffer (file truncated?)");
  CHECK_THROWS_WITH(parsed(one("F32", "[1]", "[0, 4]", 12)),
                    "m.safetensors: tensors use 4 bytes of the 12-byte data buffer (8 bytes "
                    "unaccounted for)");
  CHECK_THROWS_WITH(
      parsed(image(R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},)"
                   R"( "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                   12)),
      "m.safetensors: b: data_offsets [4, 12] overlap tensor \"a\" (which ends at 8)");
  CHECK_THROWS_WITH(
      parsed(image(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                   R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}})",
                   16)),
      "m.safetensors: b: data_offsets [12, 16] leave a gap after byte 8 (tensors must tile the "
      "data buffer from 0)");
}

TEST_CASE("safetensors: errors are kvrank::Error with file and tensor", "[readers][safetensors]") {
  try {
    parsed(one("F32", "[3]", "[0, 8]", 8));
    FAIL("expected an error");
  } catch (const Error& error) {
    CHECK(error.file() == "m.safetensors");
    CHECK(error.tensor() == "a");
  }
}

}  // namespace kvrank

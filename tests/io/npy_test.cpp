#include "kvrank/io/npy.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/base/mapped_file.hpp"
#include "support/catch.hpp"
#include "support/readers_test_files.hpp"

namespace kvrank {
namespace {

// An NPY image: magic, version, little-endian header length (2 bytes for v1, 4 otherwise), the
// header text as given, then `data_bytes` zero bytes.
std::vector<std::byte> npy(const std::string& header, std::size_t data_bytes, int version = 1) {
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(version);
  bytes += '\0';
  const int width = version == 1 ? 2 : 4;
  for (int i = 0; i < width; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  bytes += header;
  bytes.append(data_bytes, '\0');
  return test::to_bytes(bytes);
}

std::string dict(const std::string& descr, const std::string& fortran, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape +
         ", }         \n";
}

TensorView npy_of(const std::vector<std::byte>& bytes, NpyOptions options = {}) {
  return parse_npy(bytes, "a.npy", "a", options);
}

}  // namespace

TEST_CASE("npy: headers of every version and shape form", "[readers][npy]") {
  std::vector<std::byte> v1 = npy(dict("<f4", "False", "(2, 3)"), 24);
  TensorView view = npy_of(v1);
  CHECK(view.name == "a");
  CHECK(view.file == "a.npy");
  CHECK(view.dtype == DType::F32);
  CHECK(view.shape == std::vector<std::int64_t>{2, 3});
  CHECK_FALSE(view.fortran_order);
  CHECK(view.bytes.data() == v1.data() + v1.size() - 24);

  CHECK(npy_of(npy(dict("<f8", "True", "(2, 3)"), 48, 2)).fortran_order);
  CHECK(npy_of(npy(dict("<f2", "False", "(5,)"), 10, 3)).shape == std::vector<std::int64_t>{5});
  CHECK(npy_of(npy(dict("<f4", "False", "()"), 4)).shape.empty());
  CHECK(npy_of(npy(dict("<f4", "True", "(4,)"), 16)).fortran_order == false);  // 1-D: no order
  CHECK(npy_of(npy(dict("<f4", "False", "(0, 3)"), 0)).numel() == 0);
  CHECK(npy_of(npy("{\"shape\":(1,1,),\"fortran_order\":False,\"descr\":\"=f4\"}", 4)).dtype ==
        DType::F32);
  CHECK(npy_of(npy(dict("|V2", "False", "(2,)"), 4), NpyOptions{.bf16_void = true}).dtype ==
        DType::BF16);
  CHECK(npy_of(npy(dict("<i8", "False", "(2,)"), 16)).dtype == DType::I64);
  CHECK(npy_of(npy(dict("|b1", "False", "(2,)"), 2)).dtype == DType::BOOL);
}

TEST_CASE("npy: every rule gives its exact message", "[readers][npy]") {
  CHECK_THROWS_WITH(npy_of(test::to_bytes("\x93NUMPY")),
                    "a.npy: file is 6 bytes, too small for an NPY header (at least 10)");
  CHECK_THROWS_WITH(npy_of(test::to_bytes("PK\x03\x04 not an npy file")),
                    "a.npy: not an NPY file (the first bytes are not \\x93NUMPY)");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "(1,)"), 4, 4)),
                    "a.npy: unsupported NPY version 4.0 (expected 1.0, 2.0 or 3.0)");
  std::vector<std::byte> long_header = npy(dict("<f4", "False", "(1,)"), 4);
  long_header[8] = std::byte{0xFF};
  long_header[9] = std::byte{0x7F};
  CHECK_THROWS_WITH(npy_of(long_header),
                    "a.npy: NPY header length 32767 runs past the end of the file (71 bytes "
                    "follow)");
  std::vector<std::byte> huge_header = npy(dict("<f4", "False", "(1,)"), 4, 2);
  huge_header[11] = std::byte{0x10};
  CHECK_THROWS_WITH(npy_of(huge_header),
                    Catch::Matchers::Contains("exceeds the limit of 1048576 bytes"));
  CHECK_THROWS_WITH(
      npy_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4)),
      "a.npy: NPY header dict is invalid at byte 56: unexpected key 'x' (expected "
      "descr, fortran_order and shape)");
  CHECK_THROWS_WITH(npy_of(npy("{'descr': '<f4', 'fortran_order': False}", 4)),
                    "a.npy: NPY header dict is invalid at byte 40: missing key 'shape'");
  CHECK_THROWS_WITH(npy_of(npy("{'descr': '<f4', 'descr': '<f4'}", 4)),
                    "a.npy: NPY header dict is invalid at byte 17: key 'descr' appears twice");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "false", "(1,)"), 4)),
                    "a.npy: NPY header dict is invalid at byte 34: expected True or False");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "(1)"), 4)),
                    "a.npy: NPY header dict is invalid at byte 52: a one-element shape needs a "
                    "trailing comma, as in (n,)");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "[1]"), 4)),
                    "a.npy: NPY header dict is invalid at byte 50: expected '('");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "(-1,)"), 4)),
                    "a.npy: NPY header dict is invalid at byte 51: expected a non-negative "
                    "integer in the shape");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "(9223372036854775808,)"), 4)),
                    "a.npy: NPY header dict is invalid at byte 51: shape entry is too large");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "(20000000000000000000,)"), 4)),
                    "a.npy: NPY header dict is invalid at byte 51: shape entry is too large");
  CHECK(npy_of(npy(dict("<f4", "False", "(9223372036854775807, 0)"), 0)).numel() == 0);
  CHECK_THROWS_WITH(npy_of(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4)),
                    "a.npy: NPY header dict is invalid at byte 56: unexpected text after the "
                    "closing '}'");
  CHECK_THROWS_WITH(npy_of(npy("{'descr': os.system('x')}", 4)),
                    "a.npy: NPY header dict is invalid at byte 10: expected a quoted string");
  CHECK_THROWS_WITH(npy_of(npy(dict("<c8", "False", "(1,)"), 8)),
                    "a.npy: unsupported descr '<c8' (expected '<f8', '<f4' or '<f2')");
  CHECK_THROWS_WITH(npy_of(npy(dict(">f4", "False", "(1,)"), 4)),
                    "a.npy: big-endian descr '>f4' is not supported (expected '<f4')");
  CHECK_THROWS_WITH(npy_of(npy(dict("<V2", "False", "(1,)"), 2)),
                    "a.npy: descr '<V2' holds raw 2-byte values; pass --npy-dtype bf16 to read "
                    "them as bfloat16");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "(4294967296, 4294967296)"), 4)),
                    "a.npy: shape overflows 64-bit sizes");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "(2, 3)"), 20)),
                    "a.npy: data is truncated: shape [2, 3] of '<f4' needs 24 bytes, found 20");
  CHECK_THROWS_WITH(npy_of(npy(dict("<f4", "False", "(2, 3)"), 25)),
                    "a.npy: 1 unexpected bytes after the data (shape [2, 3] of '<f4' needs 24)");
}

TEST_CASE("npz: stored and deflated archives written by numpy", "[readers][npy]") {
  for (const char* name : {"stored.npz", "compressed.npz"}) {
    INFO(name);
    const auto path = test::generated_files("valid") / name;
    MappedFile file(path);
    std::vector<NpzMember> members = parse_npz(file.bytes(), path.string());
    REQUIRE(members.size() == 3);
    std::vector<std::string> names;
    for (const NpzMember& member : members) {
      names.push_back(member.tensor.name);
      CHECK(member.tensor.file == path.string());
      // Deflated members are inflated on first use; stored ones point into the archive.
      CHECK((member.tensor.deferred != nullptr) == (std::string(name) == "compressed.npz"));
    }
    CHECK(names == std::vector<std::string>{"q", "k", "big"});
    CHECK(members[1].tensor.fortran_order);
    CHECK(members[2].tensor.shape == std::vector<std::int64_t>{100, 50});
  }
}

TEST_CASE("npz: errors name the archive and the member", "[readers][npy]") {
  // An archive with one stored member "x.npy" whose content is not NPY.
  const auto path = test::generated_files("malformed") / "npz_bad_member.npz";
  MappedFile file(path);
  try {
    parse_npz(file.bytes(), "b.npz");
    FAIL("expected an error");
  } catch (const Error& error) {
    CHECK(error.file() == "b.npz");
    CHECK(error.tensor() == "x");
    CHECK(std::string(error.what()) ==
          "b.npz: x: not an NPY file (the first bytes are not \\x93NUMPY)");
  }
  CHECK_THROWS_WITH(parse_npz(test::to_bytes("PK"), "c.npz"),
                    "c.npz: file is 2 bytes, too small for a zip archive (at least 22)");
  CHECK_THROWS_WITH(parse_npz(test::to_bytes(std::string(40, 'x')), "c.npz"),
                    "c.npz: not a zip archive (no end-of-central-directory record)");
}

}  // namespace kvrank

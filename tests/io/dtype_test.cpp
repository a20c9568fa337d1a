#include "kvrank/io/dtype.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kvrank/base/mapped_file.hpp"
#include "kvrank/io/npy.hpp"
#include "support/catch.hpp"
#include "support/readers_test_files.hpp"

namespace kvrank {
namespace {

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);  // -0 ≠ +0
}

// A float32 table written by write_test_files.py (decoded there with numpy / the OCP formulas).
std::vector<float> python_table(const std::string& name) {
  const auto path = test::generated_files("valid") / "tables" / (name + ".npy");
  MappedFile file(path);
  TensorView view = parse_npy(file.bytes(), path.string(), name);
  REQUIRE(view.dtype == DType::F32);
  std::vector<float> values(static_cast<std::size_t>(view.numel()));
  convert_to_f32(DType::F32, view.bytes, values);  // not to_f32: the tables hold NaN and Inf
  return values;
}

template <typename Bits>
std::vector<std::byte> all_patterns() {
  constexpr std::size_t count = std::size_t{1} << (8 * sizeof(Bits));
  std::vector<std::byte> bytes(count * sizeof(Bits));
  for (std::size_t i = 0; i < count; ++i) {
    const auto bits = static_cast<Bits>(i);
    std::memcpy(bytes.data() + i * sizeof(Bits), &bits, sizeof(Bits));
  }
  return bytes;
}

// Checks the scalar decoder and the bulk loop of convert_to_f32 against the Python table.
template <typename Bits>
void check_against_table(DType dtype, float (*decode)(Bits), const std::string& table_name) {
  const std::vector<float> expected = python_table(table_name);
  const std::vector<std::byte> raw = all_patterns<Bits>();
  REQUIRE(expected.size() == raw.size() / sizeof(Bits));
  std::vector<float> bulk(expected.size());
  convert_to_f32(dtype, raw, bulk);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO(table_name << " bits 0x" << std::hex << i);
    REQUIRE(same_float(decode(static_cast<Bits>(i)), expected[i]));
    REQUIRE(same_float(bulk[i], expected[i]));
  }
}

}  // namespace

TEST_CASE("dtype names, sizes and the float/storage split", "[readers][dtype]") {
  const DType all[] = {DType::F64,     DType::F32,  DType::F16, DType::BF16, DType::F8_E4M3,
                       DType::F8_E5M2, DType::BOOL, DType::U8,  DType::I8,   DType::I16,
                       DType::U16,     DType::I32,  DType::U32, DType::I64,  DType::U64};
  const std::size_t sizes[] = {8, 4, 2, 2, 1, 1, 1, 1, 1, 2, 2, 4, 4, 8, 8};
  for (std::size_t i = 0; i < std::size(all); ++i) {
    INFO(dtype_name(all[i]));
    CHECK(dtype_size(all[i]) == sizes[i]);
    CHECK(any_dtype_from_name(dtype_name(all[i])) == all[i]);
    CHECK(is_float_dtype(all[i]) == (i < 6));
    CHECK(dtype_from_name(dtype_name(all[i])).has_value() == (i < 6));
  }
  CHECK(dtype_name(DType::F8_E4M3) == "F8_E4M3");
  CHECK(dtype_from_name("BF16") == DType::BF16);
  CHECK_FALSE(dtype_from_name("bf16"));
  CHECK_FALSE(any_dtype_from_name("F7"));
  CHECK_FALSE(any_dtype_from_name(""));
}

TEST_CASE("16-bit floats decode to the values of their spec", "[readers][dtype]") {
  CHECK(bf16_to_f32(0x3F80) == 1.0f);
  CHECK(bf16_to_f32(0x3F81) == 1.0078125f);  // 1 + 2^-7: the last mantissa bit
  CHECK(bf16_to_f32(0xC2F7) == -123.5f);
  CHECK(std::isinf(bf16_to_f32(0x7F80)));
  CHECK(std::isnan(bf16_to_f32(0x7FC0)));

  CHECK(f16_to_f32(0x3C00) == 1.0f);
  CHECK(f16_to_f32(0x0001) == 0x1p-24f);         // smallest subnormal
  CHECK(f16_to_f32(0x03FF) == 1023 * 0x1p-24f);  // largest subnormal
  CHECK(f16_to_f32(0x0400) == 0x1p-14f);         // smallest normal
  CHECK(f16_to_f32(0x7BFF) == 65504.0f);         // largest finite
  CHECK(f16_to_f32(0xC000) == -2.0f);
  CHECK(f16_to_f32(0x7C00) == std::numeric_limits<float>::infinity());
  CHECK(f16_to_f32(0xFC00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(f16_to_f32(0x7E00)));
  CHECK(std::signbit(f16_to_f32(0x8000)));
  CHECK(f16_to_f32(0x8000) == 0.0f);
}

TEST_CASE("FP8 E4M3 (fn) and E5M2 decode to the values of the OCP spec", "[readers][dtype]") {
  CHECK(fp8_e4m3_to_f32(0x38) == 1.0f);
  CHECK(fp8_e4m3_to_f32(0x7E) == 448.0f);  // max: no infinities in the fn variant
  CHECK(fp8_e4m3_to_f32(0xFE) == -448.0f);
  CHECK(fp8_e4m3_to_f32(0x01) == 0x1p-9f);
  CHECK(fp8_e4m3_to_f32(0x07) == 7 * 0x1p-9f);
  CHECK(fp8_e4m3_to_f32(0x08) == 0x1p-6f);
  CHECK(fp8_e4m3_to_f32(0x78) == 256.0f);  // S.1111.000 is a number, not infinity
  CHECK(std::isnan(fp8_e4m3_to_f32(0x7F)));
  CHECK(std::isnan(fp8_e4m3_to_f32(0xFF)));
  for (int bits = 0; bits < 256; ++bits)
    CHECK_FALSE(std::isinf(fp8_e4m3_to_f32(std::uint8_t(bits))));

  CHECK(fp8_e5m2_to_f32(0x3C) == 1.0f);
  CHECK(fp8_e5m2_to_f32(0x7B) == 57344.0f);
  CHECK(fp8_e5m2_to_f32(0x01) == 0x1p-16f);
  CHECK(fp8_e5m2_to_f32(0x04) == 0x1p-14f);
  CHECK(fp8_e5m2_to_f32(0x7C) == std::numeric_limits<float>::infinity());
  CHECK(fp8_e5m2_to_f32(0xFC) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(fp8_e5m2_to_f32(0x7D)));
}

TEST_CASE("every bit pattern decodes like numpy / the Python OCP formulas", "[readers][dtype]") {
  check_against_table<std::uint16_t>(DType::BF16, bf16_to_f32, "bf16");
  check_against_table<std::uint16_t>(DType::F16, f16_to_f32, "f16");
  check_against_table<std::uint8_t>(DType::F8_E4M3, fp8_e4m3_to_f32, "e4m3");
  check_against_table<std::uint8_t>(DType::F8_E5M2, fp8_e5m2_to_f32, "e5m2");
}

TEST_CASE("convert_to_f32 reads unaligned little-endian data", "[readers][dtype]") {
  const double f64[] = {0.1, 1.0 + 0x1p-24, 1.0 + 3 * 0x1p-24, -2.5};
  std::vector<std::byte> raw(1 + sizeof f64);
  std::memcpy(raw.data() + 1, f64, sizeof f64);  // offset by one byte: unaligned
  std::vector<float> out(4);
  convert_to_f32(DType::F64, std::span(raw).subspan(1), out);
  CHECK(out[0] == 0.1f);
  CHECK(out[1] == 1.0f);             // a tie rounds to even
  CHECK(out[2] == 1.0f + 0x1p-22f);  // a tie rounds to even (upwards here)
  CHECK(out[3] == -2.5f);

  const std::int64_t ints[] = {-3, 1LL << 40};
  std::vector<std::byte> int_raw(sizeof ints);
  std::memcpy(int_raw.data(), ints, sizeof ints);
  std::vector<float> int_out(2);
  convert_to_f32(DType::I64, int_raw, int_out);
  CHECK(int_out[0] == -3.0f);
  CHECK(int_out[1] == 0x1p40f);
}

}  // namespace kvrank

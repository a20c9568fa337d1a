// Tests of `kvrank synth` (write_synthetic_checkpoint) and its private safetensors writer.
#include "kvrank/synth/synth.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors_writer.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/io/safetensors.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace fs = std::filesystem;
using kvrank::DType;
using kvrank::SynthOptions;
using kvrank::test::TempDir;

namespace {

/// The message of the kvrank::Error that `options` raise ("" when they are accepted).
std::string error_of(const SynthOptions& options) {
  TempDir dir;
  try {
    kvrank::write_synthetic_checkpoint(options, dir / "out");
  } catch (const kvrank::Error& error) {
    CHECK_FALSE(fs::exists(dir / "out"));  // options are validated before anything is written
    return error.what();
  }
  return "";
}

SynthOptions options(std::string family, std::string variant = "") {
  SynthOptions o;
  o.family = std::move(family);
  o.variant = std::move(variant);
  o.layers = 2;
  o.heads = 4;
  o.head_dim = 8;
  o.rank = 3;
  o.kv_lora_rank = 12;
  return o;
}

/// A safetensors file read back: the parsed header plus the bytes the views point into.
struct ReadBack {
  std::string bytes;
  kvrank::SafetensorsFile file;

  const kvrank::TensorView& tensor(const std::string& name) const {
    for (const auto& t : file.tensors) {
      if (t.name == name) return t;
    }
    FAIL("no tensor " << name);
    throw;
  }

  /// F32 values of a tensor (decoded here with memcpy, not with the library).
  std::vector<float> floats(const std::string& name) const {
    const kvrank::TensorView& t = tensor(name);
    REQUIRE(t.dtype == DType::F32);
    std::vector<float> values(t.bytes.size() / 4);
    std::memcpy(values.data(), t.bytes.data(), t.bytes.size());
    return values;
  }
};

ReadBack read_back(const fs::path& path) {
  ReadBack result;
  result.bytes = kvrank::test::read_file(path);
  const std::span<const std::byte> span(reinterpret_cast<const std::byte*>(result.bytes.data()),
                                        result.bytes.size());
  result.file = kvrank::parse_safetensors(span, path.string());
  return result;
}

nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(kvrank::test::read_file(path));
}

std::map<std::string, std::vector<std::int64_t>> shapes_of(const ReadBack& read) {
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (const auto& t : read.file.tensors) shapes[t.name] = t.shape;
  return shapes;
}

/// Rows [first, first + count) of a row-major matrix with `cols` columns.
std::vector<float> rows(const std::vector<float>& matrix, std::int64_t cols, std::int64_t first,
                        std::int64_t count) {
  return {matrix.begin() + first * cols, matrix.begin() + (first + count) * cols};
}

}  // namespace

// ---- encodings ---------------------------------------------------------------------------------

TEST_CASE("f32_to_bf16 rounds to nearest even", "[synth]") {
  using kvrank::f32_to_bf16;
  const auto from_bits = [](std::uint32_t bits) { return std::bit_cast<float>(bits); };
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(-2.0f) == 0xC000);
  CHECK(f32_to_bf16(from_bits(0x3F808000)) == 0x3F80);  // tie, kept bit even: down
  CHECK(f32_to_bf16(from_bits(0x3F818000)) == 0x3F82);  // tie, kept bit odd: up
  CHECK(f32_to_bf16(from_bits(0x3F808001)) == 0x3F81);  // just above the tie: up
  CHECK(f32_to_bf16(from_bits(0x3F807FFF)) == 0x3F80);  // just below: down
  CHECK(f32_to_bf16(from_bits(0x7F7FFFFF)) == 0x7F80);  // largest float rounds to infinity
  CHECK(f32_to_bf16(from_bits(0x7F800000)) == 0x7F80);
  const std::uint16_t nan = f32_to_bf16(std::nanf(""));
  CHECK((nan & 0x7F80) == 0x7F80);
  CHECK((nan & 0x007F) != 0);
  CHECK(f32_to_bf16(from_bits(0x7F800001)) != 0x7F80);  // a NaN whose payload is in the low bits

  // Property over many floats: the result is the nearer of the two bf16 neighbours, ties to even.
  for (std::uint64_t i = 0; i < (1ull << 32); i += 65537 * 13) {
    const auto bits = static_cast<std::uint32_t>(i);
    const float x = from_bits(bits);
    if (!std::isfinite(x) || std::fabs(x) >= 3.38e38f) continue;
    const std::uint32_t down = bits & 0xFFFF0000u, up = down + 0x10000u;
    const double error_down = std::fabs(static_cast<double>(x) - from_bits(down));
    const double error_up = std::fabs(static_cast<double>(x) - from_bits(up));
    const std::uint16_t got = f32_to_bf16(x);
    const auto expected = static_cast<std::uint16_t>(
        (error_down < error_up || (error_down == error_up && ((down >> 16) & 1) == 0)) ? down >> 16
                                                                                       : up >> 16);
    REQUIRE(got == expected);
  }
}

TEST_CASE("f32_to_f16 rounds to nearest even with subnormals and overflow", "[synth]") {
  using kvrank::f32_to_f16;
  CHECK(f32_to_f16(1.0f) == 0x3C00);
  CHECK(f32_to_f16(-2.0f) == 0xC000);
  CHECK(f32_to_f16(65504.0f) == 0x7BFF);    // largest half
  CHECK(f32_to_f16(65519.996f) == 0x7BFF);  // below the midpoint to infinity
  CHECK(f32_to_f16(65520.0f) == 0x7C00);    // the midpoint rounds to even: infinity
  CHECK(f32_to_f16(1e10f) == 0x7C00);
  CHECK(f32_to_f16(-1e10f) == 0xFC00);
  CHECK(f32_to_f16(std::ldexp(1.0f, -14)) == 0x0400);     // smallest normal
  CHECK(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);     // smallest subnormal
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);     // half of it: tie to even zero
  CHECK(f32_to_f16(std::ldexp(1.5f, -25)) == 0x0001);     // above the tie
  CHECK(f32_to_f16(std::ldexp(3.0f, -25)) == 0x0002);     // 1.5 subnormal units: tie to even 2
  CHECK(f32_to_f16(std::ldexp(1023.5f, -24)) == 0x0400);  // largest subnormal rounds up to normal
  CHECK(f32_to_f16(1.0f / 3.0f) == 0x3555);
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie, even: down
  CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie, odd: up
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  const std::uint16_t nan = f32_to_f16(std::nanf(""));
  CHECK((nan & 0x7C00) == 0x7C00);
  CHECK((nan & 0x03FF) != 0);

#ifdef __FLT16_MAX__
  // The compiler's own conversion is an independent reference.
  for (std::uint64_t i = 0; i < (1ull << 32); i += 4099 * 7) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(i));
    if (std::isnan(x)) continue;
    const auto expected = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
    REQUIRE(f32_to_f16(x) == expected);
  }
#endif
}

TEST_CASE("safetensors_header is padded and sorted with offsets in declared order", "[synth]") {
  const std::vector<kvrank::TensorSpec> specs = {
      {"zeta", DType::F32, {2, 3}}, {"alpha", DType::BF16, {5}}, {"mid", DType::F16, {1, 1, 3}}};
  const std::string header = kvrank::safetensors_header(specs, {{"format", "pt"}});
  std::uint64_t size = 0;
  std::memcpy(&size, header.data(), 8);
  REQUIRE(header.size() == 8 + size);
  CHECK(header.size() % 8 == 0);
  const std::string json = header.substr(8);
  const std::size_t last = json.find_last_not_of(' ');
  CHECK(json[last] == '}');
  CHECK(json.size() - last - 1 < 8);
  CHECK(json.find("\"__metadata__\"") < json.find("\"alpha\""));
  CHECK(json.find("\"alpha\"") < json.find("\"mid\""));
  CHECK(json.find("\"mid\"") < json.find("\"zeta\""));
  const auto parsed = nlohmann::json::parse(json);
  CHECK(parsed["zeta"]["data_offsets"] == nlohmann::json({0, 24}));
  CHECK(parsed["alpha"]["data_offsets"] == nlohmann::json({24, 34}));
  CHECK(parsed["mid"]["data_offsets"] == nlohmann::json({34, 40}));
  CHECK(parsed["alpha"]["dtype"] == "BF16");
  CHECK(parsed["mid"]["shape"] == nlohmann::json({1, 1, 3}));

  CHECK_THROWS_AS(kvrank::safetensors_header({{"a", DType::F32, {1}}, {"a", DType::F32, {1}}}, {}),
                  kvrank::Error);
}

TEST_CASE("SafetensorsWriter output parses back with the values written", "[synth]") {
  TempDir dir;
  const std::vector<float> a = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 7.0f};
  const std::vector<float> b = {0.5f, 1.0f / 3.0f, -65504.0f};
  {
    kvrank::SafetensorsWriter writer(
        dir / "t.safetensors", {{"b.weight", DType::F32, {2, 3}}, {"a.weight", DType::BF16, {3}}});
    writer.write("b.weight", a);
    CHECK_THROWS_AS(writer.write("b.weight", a), std::logic_error);  // out of order
    writer.write("a.weight", b);
    writer.close();
  }
  const ReadBack read = read_back(dir / "t.safetensors");
  CHECK(read.floats("b.weight") == a);
  const auto& bf16 = read.tensor("a.weight");
  REQUIRE(bf16.bytes.size() == 6);
  std::uint16_t halves[3];
  std::memcpy(halves, bf16.bytes.data(), 6);
  CHECK(halves[0] == 0x3F00);  // 0.5
  CHECK(halves[1] == kvrank::f32_to_bf16(1.0f / 3.0f));
  CHECK(halves[2] == 0xC780);  // -65504 rounds to -65536 in bf16
}

// ---- option validation -------------------------------------------------------------------------

TEST_CASE("synth rejects invalid options and names the option", "[synth]") {
  auto o = options("llama");
  o.kv_heads = 4;
  o.heads = 6;
  CHECK(error_of(o) == "--heads 6 is not a multiple of --kv-heads 4");
  o.kv_heads = 8;
  CHECK(error_of(o) == "--kv-heads 8 must not exceed --heads 6");
  o.kv_heads = 0;
  CHECK(error_of(o) == "--kv-heads 0 must be positive");

  o = options("bert");
  CHECK(error_of(o) ==
        "--family bert is not one of llama, gpt2, gpt_neox, falcon, phi3, deepseek_v2, lrkv");
  o = options("llama", "xqa");
  CHECK(error_of(o) == "--variant xqa is not one of mha, gqa, mqa, mla, lrkv");
  o = options("llama");
  o.layers = 0;
  CHECK(error_of(o) == "--layers 0 must be positive");
  o = options("llama");
  o.heads = -3;
  CHECK(error_of(o) == "--heads -3 must be positive");
  o = options("llama");
  o.head_dim = 0;
  CHECK(error_of(o) == "--head-dim 0 must be positive");
  o = options("llama");
  o.d_model = 0;
  CHECK(error_of(o) == "--d-model 0 must be positive");
  o = options("llama");
  o.heads = 2'000'000;
  CHECK(error_of(o) == "--heads 2000000 exceeds the limit 1048576");
  o = options("lrkv");
  o.rank = 0;
  CHECK(error_of(o) == "--rank 0 must be positive");
  o = options("deepseek_v2");
  o.kv_lora_rank = -1;
  CHECK(error_of(o) == "--kv-lora-rank -1 must be positive");
  o = options("llama");
  o.dtype = "f64";
  CHECK(error_of(o) == "--dtype f64 is not one of f32, bf16, f16");
  o = options("llama");
  o.shards = 0;
  CHECK(error_of(o) == "--shards 0 must be positive");
  o = options("gpt2");  // 2 layers × 6 tensors + the embedding = 13 tensors
  o.shards = 14;
  CHECK(error_of(o) == "--shards 14 exceeds the 13 tensors of the checkpoint");
}

TEST_CASE("synth checks redundancy values and their count", "[synth]") {
  auto o = options("llama");
  o.redundancy = {1.5};
  CHECK(error_of(o) == "--redundancy 1.5 is outside [0, 1]");
  o.redundancy = {0.0, -0.25};
  CHECK(error_of(o) == "--redundancy -0.25 is outside [0, 1]");
  o.redundancy = {std::nan("")};
  CHECK(error_of(o) == "--redundancy nan is outside [0, 1]");
  o.redundancy = {0.0, 0.5, 1.0};
  CHECK(error_of(o) == "--redundancy has 3 values; expected 1 or one per layer (--layers 2)");
  o.redundancy = {};
  CHECK(error_of(o) == "--redundancy has 0 values; expected 1 or one per layer (--layers 2)");
  o.redundancy = {0.0, 1.0};
  CHECK(error_of(o).empty());
}

TEST_CASE("synth checks that the variant fits the family and the head counts", "[synth]") {
  CHECK(error_of(options("llama", "mla")) ==
        "--variant mla needs --family deepseek_v2 (found llama)");
  CHECK(error_of(options("gpt2", "lrkv")) ==
        "--variant lrkv needs --family lrkv or llama (found gpt2)");
  CHECK(error_of(options("gpt2", "gqa")) == "--variant gqa needs --kv-heads");
  CHECK(error_of(options("gpt_neox", "mqa")) ==
        "--family gpt_neox supports only --variant mha (found mqa)");
  CHECK(error_of(options("deepseek_v2", "gqa")) ==
        "--family deepseek_v2 supports only --variant mla (found gqa)");
  CHECK(error_of(options("lrkv", "mha")) ==
        "--family lrkv supports only --variant lrkv (found mha)");
  auto o = options("lrkv");
  o.kv_heads = 2;
  CHECK(error_of(o) ==
        "--kv-heads 2 does not apply to --variant lrkv (every query head has its own key; leave it "
        "out or use --heads 4)");
  o = options("llama", "gqa");
  o.kv_heads = 1;
  CHECK(error_of(o) == "--variant gqa does not match --kv-heads 1 with --heads 4 (that is mqa)");
  o = options("llama", "mha");
  o.kv_heads = 2;
  CHECK(error_of(o) == "--variant mha does not match --kv-heads 2 with --heads 4 (that is gqa)");
  o = options("falcon", "mqa");
  o.heads = 1;
  CHECK(error_of(o) == "--variant mqa needs --heads > 1 (found 1)");
  o = options("phi3");
  o.d_model = 40;
  CHECK(error_of(o) ==
        "--d-model 40 must equal --heads × --head-dim = 32 for --family phi3 (its configs have no "
        "head_dim)");
  o = options("llama", "mqa");  // no --kv-heads needed: mqa means one
  CHECK(error_of(o).empty());
  o = options("llama", "lrkv");  // llama + lrkv is the lrkv family
  CHECK(error_of(o).empty());
}

// ---- what is written ---------------------------------------------------------------------------

TEST_CASE("synth writes config.json and tensors of each family", "[synth]") {
  struct Case {
    SynthOptions options;
    nlohmann::json config;                                    // fields that must be present
    std::map<std::string, std::vector<std::int64_t>> layer1;  // layer 1's attention tensors
  };
  // d = 32, H = 4, d_h = 8 unless said otherwise.
  auto llama = options("llama");
  llama.kv_heads = 2;
  auto falcon = options("falcon", "gqa");
  falcon.kv_heads = 2;
  auto falcon_mqa = options("falcon", "mqa");
  auto phi3 = options("phi3");
  phi3.kv_heads = 1;
  auto mla = options("deepseek_v2");
  mla.d_model = 24;
  auto lrkv = options("llama", "lrkv");
  const std::vector<Case> cases = {
      {llama,
       {{"model_type", "llama"},
        {"hidden_size", 32},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 2},
        {"head_dim", 8},
        {"num_hidden_layers", 2},
        {"torch_dtype", "float32"}},
       {{"model.layers.1.self_attn.q_proj.weight", {32, 32}},
        {"model.layers.1.self_attn.k_proj.weight", {16, 32}},
        {"model.layers.1.self_attn.v_proj.weight", {16, 32}},
        {"model.layers.1.self_attn.o_proj.weight", {32, 32}}}},
      {options("gpt2"),
       {{"model_type", "gpt2"}, {"n_embd", 32}, {"n_head", 4}, {"n_layer", 2}},
       {{"h.1.attn.c_attn.weight", {32, 96}}, {"h.1.attn.c_proj.weight", {32, 32}}}},
      {options("gpt_neox"),
       {{"model_type", "gpt_neox"},
        {"hidden_size", 32},
        {"num_attention_heads", 4},
        {"num_hidden_layers", 2}},
       {{"gpt_neox.layers.1.attention.query_key_value.weight", {96, 32}},
        {"gpt_neox.layers.1.attention.dense.weight", {32, 32}}}},
      {falcon,
       {{"model_type", "falcon"},
        {"new_decoder_architecture", true},
        {"multi_query", false},
        {"num_kv_heads", 2},
        {"hidden_size", 32},
        {"num_attention_heads", 4}},
       {{"transformer.h.1.self_attention.query_key_value.weight", {64, 32}},
        {"transformer.h.1.self_attention.dense.weight", {32, 32}}}},
      {falcon_mqa,
       {{"model_type", "falcon"}, {"new_decoder_architecture", false}, {"multi_query", true}},
       {{"transformer.h.1.self_attention.query_key_value.weight", {48, 32}}}},
      {phi3,
       {{"model_type", "phi3"},
        {"hidden_size", 32},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 1}},
       {{"model.layers.1.self_attn.qkv_proj.weight", {48, 32}},
        {"model.layers.1.self_attn.o_proj.weight", {32, 32}}}},
      {mla,
       {{"model_type", "deepseek_v2"},
        {"hidden_size", 24},
        {"kv_lora_rank", 12},
        {"q_lora_rank", nullptr},
        {"qk_nope_head_dim", 8},
        {"qk_rope_head_dim", 4},
        {"v_head_dim", 8},
        {"num_attention_heads", 4}},
       {{"model.layers.1.self_attn.q_proj.weight", {48, 24}},
        {"model.layers.1.self_attn.kv_a_proj_with_mqa.weight", {16, 24}},
        {"model.layers.1.self_attn.kv_a_layernorm.weight", {12}},
        {"model.layers.1.self_attn.kv_b_proj.weight", {64, 12}},
        {"model.layers.1.self_attn.o_proj.weight", {24, 32}}}},
      {lrkv,
       {{"model_type", "llama"},
        {"attention_variant", "lrkv"},
        {"lrkv_rank", 3},
        {"num_attention_heads", 4}},
       {{"model.layers.1.self_attn.q_proj.weight", {32, 32}},
        {"model.layers.1.self_attn.k_shared_proj.weight", {8, 32}},
        {"model.layers.1.self_attn.v_shared_proj.weight", {8, 32}},
        {"model.layers.1.self_attn.k_lora_a.weight", {12, 32}},
        {"model.layers.1.self_attn.k_lora_b.weight", {32, 3}},
        {"model.layers.1.self_attn.v_lora_a.weight", {12, 32}},
        {"model.layers.1.self_attn.v_lora_b.weight", {32, 3}},
        {"model.layers.1.self_attn.o_proj.weight", {32, 32}}}},
  };
  for (const Case& c : cases) {
    INFO("family " << c.options.family << " variant " << c.options.variant);
    TempDir dir;
    kvrank::write_synthetic_checkpoint(c.options, dir.path());
    const nlohmann::json config = read_json(dir / "config.json");
    for (const auto& [key, value] : c.config.items()) {
      INFO("config " << key);
      CHECK(config.at(key) == value);
    }
    const ReadBack read = read_back(dir / "model.safetensors");
    const auto shapes = shapes_of(read);
    for (const auto& [name, shape] : c.layer1) {
      INFO("tensor " << name);
      REQUIRE(shapes.count(name) == 1);
      CHECK(shapes.at(name) == shape);
    }
    for (const auto& t : read.file.tensors) CHECK(t.dtype == DType::F32);
    CHECK(read.file.metadata.at("format") == "pt");
  }
}

TEST_CASE("synth is deterministic: the same seed gives the same bytes", "[synth]") {
  auto o = options("falcon", "gqa");
  o.kv_heads = 2;
  o.layers = 3;
  o.dtype = "bf16";
  o.shards = 2;
  o.redundancy = {0.3};
  o.seed = 42;
  TempDir first, second, other;
  kvrank::write_synthetic_checkpoint(o, first.path());
  kvrank::write_synthetic_checkpoint(o, second.path());
  o.seed = 43;
  kvrank::write_synthetic_checkpoint(o, other.path());
  for (const char* name : {"config.json", "model-00001-of-00002.safetensors",
                           "model-00002-of-00002.safetensors", "model.safetensors.index.json"}) {
    INFO(name);
    CHECK(kvrank::test::read_file(first / name) == kvrank::test::read_file(second / name));
  }
  CHECK(kvrank::test::read_file(first / "model-00001-of-00002.safetensors") !=
        kvrank::test::read_file(other / "model-00001-of-00002.safetensors"));
}

TEST_CASE("synth redundancy blends each head with a shared block", "[synth]") {
  // Same seed, three redundancies: the own and shared draws do not depend on r, so
  // block(r) = (1 − r)·block(0) + r·block(1) head by head.
  auto o = options("llama");
  o.kv_heads = 2;
  o.layers = 1;
  std::map<double, ReadBack> by_r;
  for (double r : {0.0, 0.25, 1.0}) {
    TempDir dir;
    o.redundancy = {r};
    kvrank::write_synthetic_checkpoint(o, dir.path());
    by_r[r] = read_back(dir / "model.safetensors");
  }
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  const std::string k = "model.layers.0.self_attn.k_proj.weight";
  const std::string out = "model.layers.0.self_attn.o_proj.weight";
  const auto q0 = by_r[0.0].floats(q), q1 = by_r[1.0].floats(q), qr = by_r[0.25].floats(q);
  for (std::size_t i = 0; i < q0.size(); ++i) {
    REQUIRE(qr[i] == Approx(0.75 * q0[i] + 0.25 * q1[i]).margin(1e-6));
  }
  // r = 1: every head block identical (queries 4 × 8 rows, keys 2 × 8 rows, output 4 × 8 columns);
  // r = 0: no two alike.
  for (const std::string& name : {q, k}) {
    const auto one = by_r[1.0].floats(name), zero = by_r[0.0].floats(name);
    const std::int64_t blocks = static_cast<std::int64_t>(one.size()) / (8 * 32);
    for (std::int64_t h = 1; h < blocks; ++h) {
      CHECK(rows(one, 32, 8 * h, 8) == rows(one, 32, 0, 8));
      CHECK(rows(zero, 32, 8 * h, 8) != rows(zero, 32, 0, 8));
    }
  }
  const auto o1 = by_r[1.0].floats(out);  // [32, 32]: head h owns columns [8h, 8h + 8)
  for (int row = 0; row < 32; ++row) {
    for (int h = 1; h < 4; ++h) {
      for (int c = 0; c < 8; ++c) REQUIRE(o1[row * 32 + h * 8 + c] == o1[row * 32 + c]);
    }
  }
  // The values look like N(0, 1/d): a loose check that catches a wrong scale or a broken stream.
  double sum = 0, squares = 0;
  for (float v : q0) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(q0.size());
  CHECK(std::fabs(sum / n) < 0.03);
  CHECK(squares / n == Approx(1.0 / 32).epsilon(0.15));
}

TEST_CASE("synth shards by layer with an index", "[synth]") {
  auto o = options("llama");
  o.layers = 5;
  o.shards = 3;
  TempDir dir;
  kvrank::write_synthetic_checkpoint(o, dir.path());
  CHECK_FALSE(fs::exists(dir / "model.safetensors"));
  const nlohmann::json index = read_json(dir / "model.safetensors.index.json");
  std::uint64_t total = 0;
  std::map<std::string, std::string> where;
  std::map<int, std::set<std::string>> files_of_layer;
  for (int shard = 1; shard <= 3; ++shard) {
    const std::string name = "model-0000" + std::to_string(shard) + "-of-00003.safetensors";
    const ReadBack read = read_back(dir / name);
    REQUIRE_FALSE(read.file.tensors.empty());
    for (const auto& t : read.file.tensors) {
      CHECK(where.count(t.name) == 0);
      where[t.name] = name;
      total += t.bytes.size();
      if (t.name.rfind("model.layers.", 0) == 0) {
        files_of_layer[std::stoi(t.name.substr(13))].insert(name);
      }
    }
  }
  CHECK(index.at("metadata").at("total_size") == total);
  CHECK(index.at("weight_map").get<std::map<std::string, std::string>>() == where);
  CHECK(where.size() == 1 + 5 * 6);
  REQUIRE(files_of_layer.size() == 5);
  for (const auto& [layer, files] : files_of_layer) CHECK(files.size() == 1);  // layers not split

  // More shards than layers: tensors are spread one by one. And a rewrite as one file removes the
  // old shards, so no stale index is left next to the new model.safetensors.
  o.layers = 1;
  o.shards = 7;
  kvrank::write_synthetic_checkpoint(o, dir.path());
  CHECK(fs::exists(dir / "model-00007-of-00007.safetensors"));
  CHECK_FALSE(fs::exists(dir / "model-00001-of-00003.safetensors"));
  o.shards = 1;
  kvrank::write_synthetic_checkpoint(o, dir.path());
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path()))
    names.insert(entry.path().filename());
  CHECK(names == std::set<std::string>{"config.json", "model.safetensors"});
}

TEST_CASE("synth reports a folder it cannot create", "[synth]") {
  TempDir dir;
  kvrank::test::write_file(dir / "file", std::string("x"));
  const fs::path target = dir / "file" / "sub";
  try {
    kvrank::write_synthetic_checkpoint(options("llama"), target);
    FAIL("expected an error");
  } catch (const kvrank::Error& error) {
    CHECK(error.file() == target.string());
    CHECK(std::string(error.detail()).rfind("cannot create the output folder", 0) == 0);
  }
}

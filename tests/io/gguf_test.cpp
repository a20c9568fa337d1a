#include "kvrank/io/gguf.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "layout/family_detail.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

// GGUF metadata value types and GGML tensor types used below (ggml docs/gguf.md).
constexpr std::uint32_t kU8 = 0, kU32 = 4, kF32 = 6, kBool = 7, kString = 8, kArray = 9;
constexpr std::uint32_t kU16 = 2, kI32 = 5, kU64 = 10;
constexpr std::uint32_t kTypeF32 = 0, kTypeF16 = 1, kTypeQ8_0 = 8, kTypeQ4_K = 12;
constexpr std::uint32_t kTypeIQ2_XXS = 16;  // 256 values in 66 bytes; kvrank does not read it

// Builds a GGUF image field by field, little-endian, exactly as the format lays it out.
class Image {
 public:
  Image& raw(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), bytes, bytes + size);
    return *this;
  }
  template <typename T>
  Image& put(T value) {
    return raw(&value, sizeof value);
  }
  Image& string(const std::string& text) {
    put<std::uint64_t>(text.size());
    return raw(text.data(), text.size());
  }
  Image& header(std::uint64_t tensors, std::uint64_t kvs, std::uint32_t version = 3) {
    raw("GGUF", 4);
    put(version);
    put(tensors);
    return put(kvs);
  }
  Image& kv_u32(const std::string& key, std::uint32_t value) {
    string(key);
    put(kU32);
    return put(value);
  }
  Image& kv_string(const std::string& key, const std::string& value) {
    string(key);
    put(kString);
    return string(value);
  }
  /// Five entries: general.architecture, and one layer of `heads` heads of `head_dim`.
  Image& hyperparameters(const std::string& arch, std::uint32_t d_model, std::uint32_t heads,
                         std::uint32_t head_dim) {
    return kv_string("general.architecture", arch)
        .kv_u32(arch + ".block_count", 1)
        .kv_u32(arch + ".embedding_length", d_model)
        .kv_u32(arch + ".attention.head_count", heads)
        .kv_u32(arch + ".attention.key_length", head_dim);
  }
  Image& tensor(const std::string& name, std::vector<std::uint64_t> ne, std::uint32_t type,
                std::uint64_t offset) {
    string(name);
    put<std::uint32_t>(static_cast<std::uint32_t>(ne.size()));
    for (std::uint64_t extent : ne) put(extent);
    put(type);
    return put(offset);
  }
  Image& align(std::size_t alignment = 32) {
    bytes_.resize((bytes_.size() + alignment - 1) / alignment * alignment, std::byte{0});
    return *this;
  }
  Image& zeros(std::size_t count) {
    bytes_.resize(bytes_.size() + count, std::byte{0});
    return *this;
  }
  std::size_t size() const { return bytes_.size(); }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

GgufFile gguf_of(const Image& image) { return parse_gguf(image.bytes(), "m.gguf"); }

void check_error(const Image& image, const std::string& message) {
  CHECK_THROWS_WITH(gguf_of(image), message);
}

// A llama GGUF: one layer, 2 heads of head_dim 2, d_model 4, F32 weights [out, in] = [4, 4]
// (K and V [2, 4] for one KV head), values 0, 1, 2, ... per tensor.
Image llama_image(const std::string& arch = "llama", std::uint32_t q_type = kTypeF32) {
  Image image;
  image.header(5, 6).hyperparameters(arch, 4, 2, 2).kv_u32(arch + ".attention.head_count_kv", 1);
  image.tensor("blk.0.attn_q.weight", {4, 4}, q_type, 0)
      .tensor("blk.0.attn_k.weight", {4, 2}, kTypeF32, 64)
      .tensor("blk.0.attn_v.weight", {4, 2}, kTypeF32, 96)
      .tensor("blk.0.attn_output.weight", {4, 4}, kTypeF32, 128)
      .tensor("token_embd.weight", {4, 3}, kTypeF32, 192)
      .align();
  for (int tensor = 0; tensor < 5; ++tensor) {
    const int count = tensor == 0 || tensor == 3 ? 16 : tensor == 4 ? 12 : 8;
    for (int i = 0; i < count; ++i) image.put(static_cast<float>(i));
    if (tensor < 4) image.align();  // no padding after the last tensor: every prefix is short
  }
  return image;
}

}  // namespace

TEST_CASE("gguf: header, metadata and tensor views in PyTorch order", "[readers][gguf]") {
  Image image;
  image.header(2, 5)
      .kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 3)
      .string("tokenizer.ggml.tokens")
      .put(kArray)
      .put(kString)
      .put<std::uint64_t>(2)
      .string("a")
      .string("bc")
      .string("llama.rope.freq_base")
      .put(kF32)
      .put(10000.0f)
      .string("flag")
      .put(kBool)
      .put<std::uint8_t>(1);
  image.tensor("w", {3, 2}, kTypeF16, 0).tensor("q", {32, 1}, kTypeQ8_0, 32).align();
  const std::size_t data_start = image.size();
  image.zeros(32 + 34);
  const GgufFile file = gguf_of(image);
  CHECK(file.version == 3);
  CHECK(file.alignment == 32);
  CHECK(file.metadata.at("general.architecture") == "llama");
  CHECK(file.metadata.at("llama.block_count") == 3);
  CHECK(file.metadata.at("llama.rope.freq_base") == 10000.0);
  CHECK(file.metadata.at("flag") == true);
  CHECK(file.metadata.at("tokenizer.ggml.tokens") ==
        nlohmann::json{{"array_of", "string"}, {"length", 2}});
  REQUIRE(file.tensors.size() == 2);
  const TensorView& w = file.tensors[0];
  CHECK(w.name == "w");
  CHECK(w.dtype == DType::F16);
  CHECK(w.shape == std::vector<std::int64_t>{2, 3});  // ne [3, 2] = 2 rows of 3
  CHECK(w.bytes.data() == image.bytes().data() + data_start);
  CHECK(w.bytes.size() == 12);
  const TensorView& q = file.tensors[1];
  CHECK(q.dtype == DType::Q8_0);
  CHECK(q.shape == std::vector<std::int64_t>{1, 32});
  CHECK(q.bytes.size() == 34);
  CHECK(q.bytes.data() == image.bytes().data() + data_start + 32);
}

TEST_CASE("gguf: general.alignment, version 2, short numeric arrays kept", "[readers][gguf]") {
  Image image;
  image.header(1, 2, 2)
      .kv_u32("general.alignment", 64)
      .string("llama.attention.head_count")
      .put(kArray)
      .put(kI32)
      .put<std::uint64_t>(2)
      .put<std::int32_t>(8)
      .put<std::int32_t>(8);
  image.tensor("t", {2}, kTypeF32, 64).align(64).zeros(72);
  const GgufFile file = gguf_of(image);
  CHECK(file.version == 2);
  CHECK(file.alignment == 64);
  CHECK(file.metadata.at("llama.attention.head_count") == nlohmann::json{8, 8});
  CHECK(file.tensors[0].bytes.data() == image.bytes().data() + image.size() - 8);
}

TEST_CASE("gguf: tensors of types kvrank does not dequantize are listed, not refused",
          "[readers][gguf]") {
  Image image;
  image.header(1, 0).tensor("blk.0.ffn_up.weight", {256, 2}, kTypeIQ2_XXS, 0).align().zeros(132);
  const GgufFile file = gguf_of(image);
  CHECK(file.tensors.empty());
  REQUIRE(file.unsupported.size() == 1);
  CHECK(file.unsupported[0].name == "blk.0.ffn_up.weight");
  CHECK(file.unsupported[0].ggml_type == "IQ2_XXS");
  CHECK(file.unsupported[0].shape == std::vector<std::int64_t>{2, 256});
}

TEST_CASE("gguf: every malformed header is an error with its reason", "[readers][gguf]") {
  check_error(Image().raw("GGU", 3), "m.gguf: not a GGUF file (it does not start with \"GGUF\")");
  check_error(Image().raw("GGML", 4).zeros(20),
              "m.gguf: not a GGUF file (it does not start with \"GGUF\")");
  check_error(Image().header(0, 0, 1),
              "m.gguf: GGUF version 1 is not supported (expected version 2 or 3)");
  check_error(Image().header(0, 0, 0x03000000),
              "m.gguf: big-endian GGUF file (version field 50331648); kvrank reads little-endian "
              "GGUF only");
  check_error(Image().header(0, 0, 4), "m.gguf: unknown GGUF version 4 (expected 2 or 3)");
  check_error(Image().raw("GGUF", 4).put<std::uint32_t>(3).put<std::uint32_t>(0),
              "m.gguf: truncated: tensor count at byte 8 needs 8 bytes, the file has 4 left");
  check_error(Image().header(1ull << 40, 0),
              "m.gguf: tensor count 1099511627776 is more than the 8 bytes left in the file can "
              "hold");
  check_error(Image().header(0, 2).zeros(20),
              "m.gguf: metadata count 2 is more than the 20 bytes left in the file can hold");
}

TEST_CASE("gguf: every malformed metadata entry is an error with its reason", "[readers][gguf]") {
  check_error(Image().header(0, 1).string("k").put(kU32),
              "m.gguf: truncated: metadata value at byte 37 needs 4 bytes, the file has 0 left");
  check_error(Image().header(0, 1).string("k").put<std::uint32_t>(13).zeros(4),
              "m.gguf: metadata \"k\": unknown value type 13");
  check_error(Image().header(0, 1).put<std::uint64_t>(70000).zeros(70000),
              "m.gguf: metadata key at byte 24 is 70000 bytes long (the limit is 65535)");
  check_error(Image().header(0, 1).put<std::uint64_t>(10).raw("ab", 2).zeros(3),
              "m.gguf: truncated: metadata key at byte 32 needs 10 bytes, the file has 5 left");
  check_error(Image().header(0, 1).string("k").put(kString).put<std::uint64_t>(1ull << 62),
              "m.gguf: truncated: metadata string at byte 45 needs 4611686018427387904 bytes, the "
              "file has 0 left");
  check_error(Image().header(0, 1).string("\xff").put(kU8).put<std::uint8_t>(0),
              "m.gguf: metadata key is not valid UTF-8 (byte 0 of 1)");
  check_error(Image().header(0, 1).string("k").put(kString).string("\xc3"),
              "m.gguf: metadata \"k\" is not valid UTF-8 (byte 0 of 1)");
  check_error(Image().header(0, 2).kv_u32("k", 1).kv_u32("k", 2),
              "m.gguf: metadata \"k\": appears more than once in the metadata");
  check_error(Image().header(0, 1).string("k").put(kBool).put<std::uint8_t>(2).zeros(8),
              "m.gguf: metadata \"k\": bool value 2 is not 0 or 1");
  check_error(
      Image().header(0, 1).string("k").put(kArray).put(kArray).put<std::uint64_t>(0).zeros(8),
      "m.gguf: metadata \"k\": nested arrays are not supported");
  check_error(Image()
                  .header(0, 1)
                  .string("k")
                  .put(kArray)
                  .put(kU64)
                  .put<std::uint64_t>(1ull << 61)
                  .zeros(8),
              "m.gguf: metadata \"k\": array of 2305843009213693952 uint64 values is longer than "
              "the 8 bytes left in the file");
  check_error(Image().header(0, 1).string("general.alignment").put(kU64).put<std::uint64_t>(64),
              "m.gguf: metadata \"general.alignment\": expected a uint32, found uint64");
  check_error(Image().header(0, 1).kv_u32("general.alignment", 48),
              "m.gguf: metadata \"general.alignment\": 48 is not a power of two");
  check_error(Image().header(0, 1).kv_u32("general.alignment", 0),
              "m.gguf: metadata \"general.alignment\": 0 is not a power of two");
}

TEST_CASE("gguf: every malformed tensor info is an error naming the tensor", "[readers][gguf]") {
  check_error(Image().header(1, 0).tensor("t", {1, 1, 1, 1, 1}, kTypeF32, 0),
              "m.gguf: t: has 5 dimensions (GGUF allows at most 4)");
  check_error(Image().header(1, 0).tensor("t", {1ull << 63}, kTypeF32, 0),
              "m.gguf: t: dimension 0 is 9223372036854775808 (more than 2^63 - 1)");
  check_error(Image().header(1, 0).tensor("t", {4}, 4, 0), "m.gguf: t: unknown GGML type 4");
  check_error(Image().header(1, 0).tensor("t", {4}, 99, 0), "m.gguf: t: unknown GGML type 99");
  check_error(Image().header(1, 0).tensor("t", {4}, kTypeF32, 16),
              "m.gguf: t: data offset 16 is not a multiple of the alignment 32");
  check_error(Image().header(1, 0).tensor("t", {100}, kTypeQ4_K, 0),
              "m.gguf: t: ne[0] = 100 is not a whole number of Q4_K blocks (256 values)");
  check_error(Image().header(1, 0).tensor("t", {}, kTypeQ8_0, 0),
              "m.gguf: t: a 0-dimensional tensor cannot be of block type Q8_0");
  check_error(Image().header(1, 0).tensor("t", {1ull << 62, 1ull << 62}, kTypeF32, 0),
              "m.gguf: t: dims [4611686018427387904, 4611686018427387904] of F32 overflow 64-bit "
              "sizes");
  check_error(Image().header(2, 0).tensor("t", {4}, kTypeF32, 0).tensor("t", {4}, kTypeF32, 32),
              "m.gguf: t: tensor name appears more than once");
  check_error(Image().header(1, 0).put<std::uint64_t>(1).raw("\x80", 1).zeros(24),
              "m.gguf: tensor name is not valid UTF-8 (byte 0 of 1)");
  check_error(
      Image().header(1, 0).tensor("t", {4}, kTypeF32, 0).align().zeros(15),
      "m.gguf: t: data at offset 0 (16 bytes) runs past the end of the file (79 bytes, data "
      "section from byte 64; file truncated?)");
  check_error(Image().header(1, 0).tensor("t", {4}, kTypeF32, 1ull << 63),
              "m.gguf: t: data at offset 9223372036854775808 (16 bytes) runs past the end of the "
              "file (57 bytes, data section from byte 64; file truncated?)");
  check_error(Image()
                  .header(2, 0)
                  .tensor("a", {16}, kTypeF32, 0)
                  .tensor("b", {4}, kTypeF32, 32)
                  .align()
                  .zeros(64),
              "m.gguf: b: data at offset 32 overlaps tensor \"a\" (which ends at offset 64)");
  check_error(Image().header(1, 0).tensor("t", {4}, kTypeF32, 0).zeros(0),
              "m.gguf: t: data at offset 0 (16 bytes) runs past the end of the file (57 bytes, "
              "data section from byte 64; file truncated?)");
  check_error(Image().header(1, 0).string("t").put<std::uint32_t>(1),
              "m.gguf: tensor count 1 is more than the 21 bytes left in the file can hold");
}

TEST_CASE("gguf: every prefix of a valid file is refused as truncated, never read past",
          "[readers][gguf]") {
  const Image full = llama_image();
  const std::vector<std::byte>& bytes = full.bytes();
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    std::span<const std::byte> prefix(bytes.data(), size);
    CHECK_THROWS_AS(parse_gguf(prefix, "m.gguf"), Error);
  }
  CHECK_NOTHROW(parse_gguf(bytes, "m.gguf"));
}

TEST_CASE("gguf: a llama GGUF opens as a Hugging Face checkpoint with a synthesized config",
          "[readers][gguf]") {
  test::TempDir dir;
  test::write_file(dir / "m.gguf", llama_image().bytes());
  const Checkpoint checkpoint = Checkpoint::open(dir / "m.gguf");
  REQUIRE(checkpoint.config());
  CHECK(*checkpoint.config() == nlohmann::json{{"gguf_architecture", "llama"},
                                               {"num_attention_heads", 2},
                                               {"num_key_value_heads", 1},
                                               {"head_dim", 2},
                                               {"hidden_size", 4},
                                               {"num_hidden_layers", 1}});
  CHECK(checkpoint.config_path() == dir / "m.gguf");
  CHECK(detail::model_type_of(checkpoint) == "llama");  // model_type.hpp's row of "llama"
  const TensorView& q = checkpoint.at("model.layers.0.self_attn.q_proj.weight");
  CHECK(q.stored_name == "blk.0.attn_q.weight");
  CHECK(q.shape == std::vector<std::int64_t>{4, 4});
  CHECK(to_f32(q)[5] == 5.0f);
  CHECK(checkpoint.at("model.layers.0.self_attn.k_proj.weight").shape ==
        std::vector<std::int64_t>{2, 4});
  CHECK(checkpoint.find("model.layers.0.self_attn.o_proj.weight"));
  const TensorView& embedding = checkpoint.at("token_embd.weight");
  CHECK(embedding.stored_name.empty());
  CHECK(embedding.shape == std::vector<std::int64_t>{3, 4});

  // Ollama's blobs have no extension: the magic bytes tell.
  test::write_file(dir / "sha256-0123", llama_image().bytes());
  CHECK(Checkpoint::open(dir / "sha256-0123").find("model.layers.0.self_attn.v_proj.weight"));
}

TEST_CASE("gguf: architecture and hyperparameter errors name the file and key", "[readers][gguf]") {
  test::TempDir dir;
  const auto open_error = [&](const Image& image) -> std::string {
    test::write_file(dir / "m.gguf", image.bytes());
    try {
      (void)Checkpoint::open(dir / "m.gguf");
    } catch (const Error& error) {
      return error.what();
    }
    return "no error";
  };
  const std::string file = (dir / "m.gguf").string();
  // An architecture opens (`inspect` lists its tensors); the model-type table refuses to read it.
  test::write_file(dir / "m.gguf", llama_image("mamba").bytes());
  CHECK(test::error_message([&] { detect_layout(Checkpoint::open(dir / "m.gguf")); }) ==
        file +
            ": GGUF architecture \"mamba\" is not supported (kvrank reads llama, qwen2, qwen2moe, "
            "qwen3, qwen3moe, gemma, gemma2, gemma3, olmo2, phi3, starcoder2, granite, deepseek2)");
  CHECK(open_error(Image().header(0, 0)) ==
        file + ": metadata has no \"general.architecture\" string");
  CHECK(open_error(Image().header(0, 1).kv_string("general.architecture", "llama")) ==
        file +
            ": metadata has no \"llama.attention.head_count\" (needed for the attention "
            "geometry)");
  Image strings;
  strings.header(0, 2)
      .kv_string("general.architecture", "qwen2")
      .kv_string("qwen2.attention.head_count", "8");
  CHECK(open_error(strings) ==
        file +
            ": metadata \"qwen2.attention.head_count\": expected a non-negative integer, "
            "found \"8\"");
  Image per_layer;
  per_layer.header(0, 2).kv_string("general.architecture", "llama");
  per_layer.string("llama.attention.head_count_kv").put(kArray).put(kU32).put<std::uint64_t>(2);
  per_layer.put<std::uint32_t>(8).put<std::uint32_t>(4);
  CHECK(open_error(per_layer) ==
        file +
            ": metadata \"llama.attention.head_count_kv\": per-layer values [8,4] are not "
            "supported");
  CHECK(open_error(llama_image("llama", kTypeIQ2_XXS)).find("m.gguf: blk.0.attn_q.weight: ") !=
        std::string::npos);
  Image split;
  split.header(0, 2).kv_string("general.architecture", "llama");
  split.string("split.count").put(kU16).put<std::uint16_t>(3);
  CHECK(open_error(split) == file +
                                 ": this is the first part of a GGUF split into 3 files, but its "
                                 "name does not end in -00001-of-00003.gguf (llama-gguf-split's "
                                 "naming), so the other parts cannot be found");
}

TEST_CASE("gguf: long strings, keys and arrays are quoted as excerpts", "[readers][gguf]") {
  test::TempDir dir;
  const std::string file = (dir / "m.gguf").string();
  const auto open_error = [&](const Image& image) {
    test::write_file(dir / "m.gguf", image.bytes());
    return test::error_message([&] { (void)Checkpoint::open(dir / "m.gguf"); });
  };
  // An 8 MB architecture string gave an 8 MB error line.
  const std::string huge(std::size_t{8} << 20, 'x');
  // An 8 MB architecture string gave an 8 MB error line; the first key read from it is cut too.
  const std::string architecture_error =
      open_error(Image().header(0, 1).kv_string("general.architecture", huge));
  CHECK(architecture_error.size() < 300);
  CHECK(architecture_error.find(std::string(60, 'x') + "... (") != std::string::npos);
  Image string_value;
  string_value.header(0, 2)
      .kv_string("general.architecture", "qwen2")
      .kv_string("qwen2.attention.head_count", huge);
  CHECK(open_error(string_value) == file +
                                        ": metadata \"qwen2.attention.head_count\": expected a "
                                        "non-negative integer, found \"" +
                                        std::string(60, 'x') + "... (8388608 bytes)\"");
  Image per_layer;
  per_layer.header(0, 2).kv_string("general.architecture", "llama");
  per_layer.string("llama.attention.head_count_kv").put(kArray).put(kU32).put<std::uint64_t>(4000);
  for (std::uint32_t i = 0; i < 4000; ++i) per_layer.put<std::uint32_t>(100000 + i);
  const std::string message = open_error(per_layer);
  CHECK(message.starts_with(file + ": metadata \"llama.attention.head_count_kv\": per-layer "
                                   "values [100000,100001,"));
  CHECK(message.find("... (28001 bytes) are not supported") != std::string::npos);
  Image long_key;
  long_key.header(0, 1).string(std::string(60'000, 'k')).put<std::uint32_t>(99);
  CHECK(test::error_message([&] { (void)gguf_of(long_key); }) ==
        "m.gguf: metadata \"" + std::string(60, 'k') +
            "... (60000 bytes)\": unknown value type 99");
}

TEST_CASE("gguf: metadata and tensor counts are bounded before any entry is read",
          "[readers][gguf]") {
  // Millions of 13-byte entries took ~5× the file in memory; the counts are bounded first.
  Image entries;
  entries.header(0, kMaxGgufMetadata + 1).zeros((kMaxGgufMetadata + 1) * 13);
  CHECK(test::error_message([&] { (void)gguf_of(entries); }) ==
        "m.gguf: metadata count 65537 is more than kvrank reads (65536)");
  Image tensors;
  tensors.header(kMaxGgufTensors + 1, 0).zeros((kMaxGgufTensors + 1) * 24);
  CHECK(test::error_message([&] { (void)gguf_of(tensors); }) ==
        "m.gguf: tensor count 262145 is more than kvrank reads (262144)");
  // At the limit the entries are read (here: the first one is malformed).
  Image at_limit;
  at_limit.header(0, kMaxGgufMetadata).zeros(kMaxGgufMetadata * 13);
  CHECK(test::error_message([&] { (void)gguf_of(at_limit); }).find("count") == std::string::npos);
}

TEST_CASE("gguf: an attention tensor of a type kvrank cannot dequantize is refused when read",
          "[readers][gguf]") {
  Image image;
  image.header(1, 5).hyperparameters("llama", 256, 1, 1);
  image.tensor("blk.0.attn_k.weight", {256, 1}, kTypeIQ2_XXS, 0).align().zeros(66);
  test::TempDir dir;
  test::write_file(dir / "m.gguf", image.bytes());
  const Checkpoint checkpoint = Checkpoint::open(dir / "m.gguf");  // opens: its shape is known
  const TensorView& k = checkpoint.at("model.layers.0.self_attn.k_proj.weight");
  CHECK(k.shape == std::vector<std::int64_t>{1, 256});
  CHECK(k.stored_name == "blk.0.attn_k.weight");
  CHECK_THROWS_WITH(to_f32(k), (dir / "m.gguf").string() +
                                   ": blk.0.attn_k.weight: GGML type IQ2_XXS is not supported by "
                                   "kvrank (it dequantizes F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                                   "Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS)");
}

TEST_CASE("gguf: Gemma's 1 + w norm gains are kept as stored, deepseek2 maps to MLA fields",
          "[readers][gguf]") {
  test::TempDir dir;
  Image gemma;
  gemma.header(1, 5).hyperparameters("gemma3", 4, 1, 2);
  gemma.tensor("blk.0.attn_q_norm.weight", {2}, kTypeF32, 0).align();
  gemma.put(1.5f).put(0.25f);
  test::write_file(dir / "g.gguf", gemma.bytes());
  const Checkpoint g = Checkpoint::open(dir / "g.gguf");
  CHECK(detail::model_type_of(g) == "gemma3_text");
  const TensorView& gain = g.at("model.layers.0.self_attn.q_norm.weight");
  CHECK(gain.stored_name == "blk.0.attn_q_norm.weight");
  CHECK(to_f32(gain) == std::vector<float>{1.5f, 0.25f});  // the layout applies them as they are

  Image mla;
  mla.header(0, 9)
      .kv_string("general.architecture", "deepseek2")
      .kv_u32("deepseek2.block_count", 2)
      .kv_u32("deepseek2.embedding_length", 64)
      .kv_u32("deepseek2.attention.head_count", 4)
      .kv_u32("deepseek2.attention.kv_lora_rank", 16)
      .kv_u32("deepseek2.attention.q_lora_rank", 0)
      .kv_u32("deepseek2.rope.dimension_count", 4)
      .kv_u32("deepseek2.attention.key_length", 12)
      .kv_u32("deepseek2.attention.value_length", 6);
  test::write_file(dir / "d.gguf", mla.bytes());
  CHECK(detail::model_type_of(Checkpoint::open(dir / "d.gguf")) == "deepseek_v2");
  CHECK(*Checkpoint::open(dir / "d.gguf").config() ==
        nlohmann::json{{"gguf_architecture", "deepseek2"},
                       {"kv_lora_rank", 16},
                       {"qk_rope_head_dim", 4},
                       {"qk_nope_head_dim", 8},
                       {"v_head_dim", 6},
                       {"num_attention_heads", 4},
                       {"hidden_size", 64},
                       {"num_hidden_layers", 2}});

  // llama.cpp's MLA-absorbing converter: key/value_length are the latent sizes, the per-head sizes
  // are in *_mla; V3's sigmoid expert gating names the family.
  Image absorbed;
  absorbed.header(0, 11)
      .kv_string("general.architecture", "deepseek2")
      .kv_u32("deepseek2.block_count", 2)
      .kv_u32("deepseek2.embedding_length", 64)
      .kv_u32("deepseek2.attention.head_count", 4)
      .kv_u32("deepseek2.attention.kv_lora_rank", 16)
      .kv_u32("deepseek2.attention.q_lora_rank", 24)
      .kv_u32("deepseek2.rope.dimension_count", 4)
      .kv_u32("deepseek2.attention.key_length", 20)
      .kv_u32("deepseek2.attention.key_length_mla", 12)
      .kv_u32("deepseek2.attention.value_length_mla", 6)
      .kv_u32("deepseek2.expert_gating_func", 2);
  test::write_file(dir / "v3.gguf", absorbed.bytes());
  const nlohmann::json v3 = *Checkpoint::open(dir / "v3.gguf").config();
  CHECK(detail::model_type_of(Checkpoint::open(dir / "v3.gguf")) == "deepseek_v3");
  CHECK(v3.at("q_lora_rank") == 24);
  CHECK(v3.at("qk_nope_head_dim") == 8);
  CHECK(v3.at("v_head_dim") == 6);
}

// ---- dequantization, one hand-computed block per type -------------------------------------------

namespace {

std::uint16_t half_bits(float value) {  // exact for the values used below
  if (value == 0.5f) return 0x3800;
  if (value == 0.25f) return 0x3400;
  if (value == 2.0f) return 0x4000;
  if (value == 1.0f) return 0x3C00;
  FAIL("no half spelling for this value");
  return 0;
}

TensorView block_view(DType dtype, std::int64_t elements, const std::vector<std::uint8_t>& raw) {
  TensorView view;
  view.name = "t";
  view.file = "m.gguf";
  view.dtype = dtype;
  view.shape = {1, elements};
  view.bytes =
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(raw.data()), raw.size());
  REQUIRE(checked_byte_count(view.shape, dtype) == raw.size());
  return view;
}

void put_half(std::vector<std::uint8_t>& raw, std::size_t at, float value) {
  const std::uint16_t bits = half_bits(value);
  raw[at] = static_cast<std::uint8_t>(bits & 0xFF);
  raw[at + 1] = static_cast<std::uint8_t>(bits >> 8);
}

}  // namespace

TEST_CASE("gguf dequantization: Q8_0 is d times the int8 values", "[readers][gguf][dequant]") {
  std::vector<std::uint8_t> raw(34);
  put_half(raw, 0, 0.5f);
  for (int i = 0; i < 32; ++i)
    raw[2 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(i - 16));
  const std::vector<float> values = to_f32(block_view(DType::Q8_0, 32, raw));
  for (int i = 0; i < 32; ++i) CHECK(values[i] == 0.5f * static_cast<float>(i - 16));
}

TEST_CASE("gguf dequantization: Q4_0 is d times (nibble - 8), low nibbles first",
          "[readers][gguf][dequant]") {
  std::vector<std::uint8_t> raw(18);
  put_half(raw, 0, 2.0f);
  for (int j = 0; j < 16; ++j) raw[2 + j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  const std::vector<float> values = to_f32(block_view(DType::Q4_0, 32, raw));
  for (int j = 0; j < 16; ++j) {
    CHECK(values[j] == 2.0f * static_cast<float>(j - 8));
    CHECK(values[16 + j] == 2.0f * static_cast<float>(7 - j));
  }
}

namespace {

// The 12 packed bytes of eight 6-bit (scale, min) pairs, as ggml's get_scale_min_k4 unpacks them.
void pack_k_scales(std::vector<std::uint8_t>& raw, std::size_t at, const int (&scale)[8],
                   const int (&min)[8]) {
  for (int j = 0; j < 4; ++j) {
    raw[at + j] = static_cast<std::uint8_t>((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    raw[at + j + 4] = static_cast<std::uint8_t>((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    raw[at + j + 8] = static_cast<std::uint8_t>((scale[j + 4] & 0xF) | ((min[j + 4] & 0xF) << 4));
  }
}

constexpr int kScales[8] = {1, 2, 3, 63, 17, 33, 48, 62};
constexpr int kMins[8] = {0, 5, 63, 1, 40, 16, 31, 57};

// Value l of sub-block s in the Q4_K/Q5_K tests: a pattern using every nibble.
int k_nibble(int s, int l) { return (l + 3 * s) % 16; }

}  // namespace

TEST_CASE("gguf dequantization: Q4_K sub-blocks use their 6-bit scales and mins",
          "[readers][gguf][dequant]") {
  std::vector<std::uint8_t> raw(144);
  put_half(raw, 0, 0.5f);   // d
  put_half(raw, 2, 0.25f);  // dmin
  pack_k_scales(raw, 4, kScales, kMins);
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      std::uint8_t& byte = raw[16 + 32 * (s / 2) + l];
      byte = static_cast<std::uint8_t>(byte | (k_nibble(s, l) << (4 * (s % 2))));
    }
  }
  const std::vector<float> values = to_f32(block_view(DType::Q4_K, 256, raw));
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const float expected =
          0.5f * static_cast<float>(kScales[s]) * static_cast<float>(k_nibble(s, l)) -
          0.25f * static_cast<float>(kMins[s]);
      CHECK(values[32 * s + l] == expected);
    }
  }
}

TEST_CASE("gguf dequantization: Q5_K adds bit s of qh[l] as 16", "[readers][gguf][dequant]") {
  std::vector<std::uint8_t> raw(176);
  put_half(raw, 0, 0.25f);
  put_half(raw, 2, 1.0f);
  pack_k_scales(raw, 4, kScales, kMins);
  const auto high = [](int s, int l) { return (l + s) % 3 == 0 ? 1 : 0; };
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      std::uint8_t& byte = raw[48 + 32 * (s / 2) + l];
      byte = static_cast<std::uint8_t>(byte | (k_nibble(s, l) << (4 * (s % 2))));
      raw[16 + l] = static_cast<std::uint8_t>(raw[16 + l] | (high(s, l) << s));
    }
  }
  const std::vector<float> values = to_f32(block_view(DType::Q5_K, 256, raw));
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 32; ++l) {
      const int q = k_nibble(s, l) + 16 * high(s, l);
      const float expected = 0.25f * static_cast<float>(kScales[s]) * static_cast<float>(q) -
                             1.0f * static_cast<float>(kMins[s]);
      CHECK(values[32 * s + l] == expected);
    }
  }
}

TEST_CASE("gguf dequantization: Q6_K is d times int8 scale times (6-bit value - 32)",
          "[readers][gguf][dequant]") {
  // Value v (0..255) gets the 6-bit code (v * 7) % 64 and sub-block v / 16 the scale 8 - v / 16·3.
  const auto code = [](int v) { return (v * 7) % 64; };
  const auto scale = [](int sub) { return 8 - 3 * sub; };  // from 8 down to -37: signed
  std::vector<std::uint8_t> raw(210);
  for (int v = 0; v < 256; ++v) {
    const int half = v / 128, k = (v % 128) / 32, l = v % 32;
    std::uint8_t& low = raw[64 * half + l + 32 * (k % 2)];
    low = static_cast<std::uint8_t>(low | ((code(v) & 0xF) << (k < 2 ? 0 : 4)));
    std::uint8_t& high = raw[128 + 32 * half + l];
    high = static_cast<std::uint8_t>(high | ((code(v) >> 4) << (2 * k)));
  }
  for (int sub = 0; sub < 16; ++sub)
    raw[192 + sub] = static_cast<std::uint8_t>(static_cast<std::int8_t>(scale(sub)));
  put_half(raw, 208, 0.5f);
  const std::vector<float> values = to_f32(block_view(DType::Q6_K, 256, raw));
  for (int v = 0; v < 256; ++v) {
    const float expected =
        0.5f * static_cast<float>(scale(v / 16)) * static_cast<float>(code(v) - 32);
    CHECK(values[v] == expected);
  }
}

TEST_CASE("gguf dequantization: Q4_1 and Q5_1 add the block minimum, Q5_0 centres on 16",
          "[readers][gguf][dequant]") {
  // Value j: nibble j (low nibble of byte j for j < 16, else high nibble of byte j − 16) and, for
  // the 5-bit types, bit j of the little-endian uint32 qh as 16.
  const auto nibbles = [](std::vector<std::uint8_t>& raw, std::size_t at) {
    for (int j = 0; j < 16; ++j) raw[at + j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  };
  const auto nibble = [](int j) { return j < 16 ? j : 15 - (j - 16); };
  std::vector<std::uint8_t> q4_1(20);
  put_half(q4_1, 0, 0.5f);
  put_half(q4_1, 2, 2.0f);
  nibbles(q4_1, 4);
  std::vector<float> values = to_f32(block_view(DType::Q4_1, 32, q4_1));
  for (int j = 0; j < 32; ++j) CHECK(values[j] == 0.5f * static_cast<float>(nibble(j)) + 2.0f);

  const std::uint32_t high = 0x80000005u;  // values 0, 2 and 31 get 16
  const auto fifth = [&](int j) { return ((high >> j) & 1) ? 16 : 0; };
  std::vector<std::uint8_t> q5_0(22);
  put_half(q5_0, 0, 0.25f);
  std::memcpy(q5_0.data() + 2, &high, 4);
  nibbles(q5_0, 6);
  values = to_f32(block_view(DType::Q5_0, 32, q5_0));
  for (int j = 0; j < 32; ++j)
    CHECK(values[j] == 0.25f * static_cast<float>(nibble(j) + fifth(j) - 16));

  std::vector<std::uint8_t> q5_1(24);
  put_half(q5_1, 0, 0.5f);
  put_half(q5_1, 2, 1.0f);
  std::memcpy(q5_1.data() + 4, &high, 4);
  nibbles(q5_1, 8);
  values = to_f32(block_view(DType::Q5_1, 32, q5_1));
  for (int j = 0; j < 32; ++j)
    CHECK(values[j] == 0.5f * static_cast<float>(nibble(j) + fifth(j)) + 1.0f);
}

TEST_CASE("gguf dequantization: IQ4_NL and IQ4_XS index ggml's non-linear grid",
          "[readers][gguf][dequant]") {
  constexpr int kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};
  std::vector<std::uint8_t> nl(18);
  put_half(nl, 0, 0.5f);
  for (int j = 0; j < 16; ++j) nl[2 + j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  std::vector<float> values = to_f32(block_view(DType::IQ4_NL, 32, nl));
  for (int j = 0; j < 16; ++j) {
    CHECK(values[j] == 0.5f * static_cast<float>(kGrid[j]));
    CHECK(values[16 + j] == 0.5f * static_cast<float>(kGrid[15 - j]));
  }
  // IQ4_XS: sub-block i's 6-bit scale: low 4 bits in nibble i % 2 of scales_l[i / 2], top 2 in
  // bits 2i of scales_h; x = d·(scale − 32)·grid. Sub-block i has scale 32 + i − 4 + 16·(i == 7).
  std::vector<std::uint8_t> xs(136);
  put_half(xs, 0, 0.25f);
  int scale[8];
  std::uint16_t scales_high = 0;
  for (int i = 0; i < 8; ++i) {
    scale[i] = 32 + i - 4 + (i == 7 ? 16 : 0);
    xs[4 + i / 2] = static_cast<std::uint8_t>(xs[4 + i / 2] | ((scale[i] & 0xF) << (4 * (i % 2))));
    scales_high = static_cast<std::uint16_t>(scales_high | ((scale[i] >> 4) << (2 * i)));
  }
  std::memcpy(xs.data() + 2, &scales_high, 2);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 16; ++j) xs[8 + 16 * i + j] = static_cast<std::uint8_t>(j | (j << 4));
  values = to_f32(block_view(DType::IQ4_XS, 256, xs));
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 32; ++j)
      CHECK(values[32 * i + j] ==
            0.25f * static_cast<float>(scale[i] - 32) * static_cast<float>(kGrid[j % 16]));
}

TEST_CASE("gguf dequantization: Q2_K and Q3_K take two bits per value in 16 sub-blocks",
          "[readers][gguf][dequant]") {
  // Value v = 128n + 32j + 16h + l: bits 2j of qs[32n + 16h + l]; its sub-block is v / 16.
  const auto two_bits = [](int v) { return (v / 16 + v) % 4; };
  std::vector<std::uint8_t> q2(84);
  for (int v = 0; v < 256; ++v) {
    const int n = v / 128, j = (v % 128) / 32, hl = v % 32;
    q2[16 + 32 * n + hl] = static_cast<std::uint8_t>(q2[16 + 32 * n + hl] | (two_bits(v) << 2 * j));
  }
  for (int s = 0; s < 16; ++s) q2[s] = static_cast<std::uint8_t>((s % 16) | ((15 - s) << 4));
  put_half(q2, 80, 0.5f);
  put_half(q2, 82, 0.25f);
  std::vector<float> values = to_f32(block_view(DType::Q2_K, 256, q2));
  for (int v = 0; v < 256; ++v) {
    const int s = v / 16;
    CHECK(values[v] == 0.5f * static_cast<float>(s) * static_cast<float>(two_bits(v)) -
                           0.25f * static_cast<float>(15 - s));
  }
  // Q3_K: the same two bits, minus 4 unless bit 4n + j of hmask[16h + l] is set; 6-bit scales
  // s_i − 32 (low 4 bits in the nibbles of bytes 0..7, top 2 in bits 2(i / 4) of byte 8 + i % 4).
  std::vector<std::uint8_t> q3(110);
  std::copy(q2.begin() + 16, q2.begin() + 80, q3.begin() + 32);
  const auto high_bit = [](int v) { return v % 3 == 0; };
  for (int v = 0; v < 256; ++v) {
    const int n = v / 128, j = (v % 128) / 32;
    if (high_bit(v)) q3[v % 32] = static_cast<std::uint8_t>(q3[v % 32] | (1 << (4 * n + j)));
  }
  const auto q3_scale = [](int i) { return 3 * i + 10; };  // 10 .. 55, below and above 32
  for (int i = 0; i < 16; ++i) {
    q3[96 + i % 8] =
        static_cast<std::uint8_t>(q3[96 + i % 8] | ((q3_scale(i) & 0xF) << 4 * (i / 8)));
    q3[104 + i % 4] =
        static_cast<std::uint8_t>(q3[104 + i % 4] | ((q3_scale(i) >> 4) << 2 * (i / 4)));
  }
  put_half(q3, 108, 0.5f);
  values = to_f32(block_view(DType::Q3_K, 256, q3));
  for (int v = 0; v < 256; ++v) {
    const int q = two_bits(v) - (high_bit(v) ? 0 : 4);
    CHECK(values[v] == 0.5f * static_cast<float>(q3_scale(v / 16) - 32) * static_cast<float>(q));
  }
}

TEST_CASE("gguf dequantization: rows of several blocks, and a NaN scale is refused by name",
          "[readers][gguf][dequant]") {
  std::vector<std::uint8_t> raw(2 * 34);
  put_half(raw, 0, 1.0f);
  put_half(raw, 34, 2.0f);
  raw[2] = 3;
  raw[34 + 2 + 31] = 0xFF;  // -1
  std::vector<float> values = to_f32(block_view(DType::Q8_0, 64, raw));
  CHECK(values[0] == 3.0f);
  CHECK(values[63] == -2.0f);
  raw[34] = 0x00;
  raw[35] = 0x7E;  // f16 NaN
  CHECK_THROWS_WITH(
      to_f32(block_view(DType::Q8_0, 64, raw)),
      "m.gguf: t: contains NaN at element 32 (index [0, 32]) (expected finite values)");
}

TEST_CASE("gguf dequantization: block types are not dtype names in other formats",
          "[readers][gguf][dequant]") {
  CHECK(dtype_name(DType::Q4_K) == "Q4_K");
  CHECK_FALSE(any_dtype_from_name("Q4_K"));
  CHECK_FALSE(dtype_from_name("Q8_0"));
  CHECK(dtype_block_elements(DType::Q6_K) == 256);
  CHECK(dtype_block_elements(DType::F16) == 1);
  CHECK_FALSE(checked_byte_count({2, 100}, DType::Q8_0));
  CHECK(checked_byte_count({2, 64}, DType::Q8_0) == 4 * 34);
  CHECK(checked_byte_count({0, 100}, DType::Q8_0) == 0);
}

}  // namespace kvrank

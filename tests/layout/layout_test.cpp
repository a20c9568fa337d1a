// Detection and per-head factors of the dense layouts, on tiny safetensors written in memory.
//
// Factors are checked against their definition: the explicit d×d matrix A_h built from the
// HeadFactors (basisᵀ C_h) must equal W_Q^h (W_K^h)ᵀ computed from the matrices that were written.
#include "kvrank/layout/layout.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using test::error_message;
using test::expand_head;
using test::TempDir;

struct NamedMatrix {
  std::string name;
  RowMatrixF value;
};

/// A minimal F32 safetensors file (header, then the tensors back to back).
void write_safetensors(const std::filesystem::path& path, const std::vector<NamedMatrix>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, value] : tensors) {
    const std::size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(value.data()), value.size() * sizeof(float));
    header[name] = {{"dtype", "F32"},
                    {"shape", {value.rows(), value.cols()}},
                    {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  test::write_file(path, bytes + text + data);
}

RowMatrixF random_matrix(Index rows, Index cols) { return RowMatrixF::Random(rows, cols); }

MatrixD explicit_form(const HeadFactors& factors, int head) {
  const MatrixD left = expand_head(factors.left, head);
  return left * (factors.symmetric ? left : expand_head(factors.right, head)).transpose();
}

/// A_h = (row block a of `left`)ᵀ (row block b of `right`), from [out, in] matrices.
MatrixD expected_form(const RowMatrixF& left, Index a, const RowMatrixF& right, Index b,
                      Index rows) {
  return left.middleRows(a * rows, rows).cast<double>().transpose() *
         right.middleRows(b * rows, rows).cast<double>();
}

struct LlamaWeights {
  RowMatrixF q, k, v, o;
};

/// A llama-layout folder: `layers` layers of GQA attention plus an embedding to be ignored.
LlamaWeights write_llama(const std::filesystem::path& dir, int layers, int heads, int kv_heads,
                         int head_dim, int d_model, bool with_config = true,
                         bool with_queries = true) {
  LlamaWeights weights{
      random_matrix(heads * head_dim, d_model), random_matrix(kv_heads * head_dim, d_model),
      random_matrix(kv_heads * head_dim, d_model), random_matrix(d_model, heads * head_dim)};
  std::vector<NamedMatrix> tensors{{"model.embed_tokens.weight", random_matrix(10, d_model)}};
  for (int i = 0; i < layers; ++i) {
    const std::string base = "model.layers." + std::to_string(i) + ".self_attn.";
    if (with_queries) {
      tensors.push_back({base + "q_proj.weight", weights.q});
      tensors.push_back({base + "o_proj.weight", weights.o});
    }
    tensors.push_back({base + "k_proj.weight", weights.k});
    tensors.push_back({base + "v_proj.weight", weights.v});
  }
  std::filesystem::create_directories(dir);
  write_safetensors(dir / "model.safetensors", tensors);
  if (with_config) {
    nlohmann::json config = {{"model_type", "mistral"},
                             {"hidden_size", d_model},
                             {"num_attention_heads", heads},
                             {"num_key_value_heads", kv_heads},
                             {"num_hidden_layers", layers}};
    if (head_dim * heads != d_model) config["head_dim"] = head_dim;
    test::write_file(dir / "config.json", config.dump());
  }
  return weights;
}

}  // namespace

TEST_CASE("parse_repr and repr_name round-trip, unknown names are usage errors", "[families]") {
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v})
    CHECK(parse_repr(repr_name(repr)) == repr);
  CHECK(repr_name(Repr::ov) == "ov");
  CHECK(error_message([] { parse_repr("kq"); }) == "--repr: expected qk, ov, k or v, found \"kq\"");
  // A long value is quoted as an excerpt, not whole.
  CHECK(error_message([] { parse_repr(std::string(1000, 'q')); }) ==
        "--repr: expected qk, ov, k or v, found \"" + std::string(60, 'q') + "... (1000 bytes)\"");
}

TEST_CASE("llama-like GQA with explicit head_dim: geometry from config.json", "[families]") {
  TempDir dir;
  write_llama(dir.path(), 3, 4, 2, 6, 16);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const ModelLayout layout = detect_layout(checkpoint);
  CHECK(layout.family == Family::llama);
  CHECK(layout.variant == Variant::gqa);
  CHECK(layout.heads == 4);
  CHECK(layout.kv_heads == 2);
  CHECK(layout.head_dim == 6);
  CHECK(layout.d_model == 16);
  CHECK(layout.num_layers == 3);
  CHECK(layout.has_queries);
  CHECK(layout.has_outputs);
  CHECK(layer_tensor_names(layout, 2) ==
        std::vector<std::string>{
            "model.layers.2.self_attn.q_proj.weight", "model.layers.2.self_attn.k_proj.weight",
            "model.layers.2.self_attn.v_proj.weight", "model.layers.2.self_attn.o_proj.weight"});
}

TEST_CASE("an unknown model type read by the llama reader is warned about, with detail",
          "[families]") {
  TempDir dir;
  write_llama(dir.path(), 2, 4, 2, 6, 16);
  CHECK(unknown_model_type_warning(detect_layout(Checkpoint::open(dir.path()))).empty());
  test::write_file(dir / "config.json", nlohmann::json{{"model_type", "mystery_lm"},
                                                       {"num_attention_heads", 4},
                                                       {"num_key_value_heads", 2}}
                                            .dump());
  const ModelLayout layout = detect_layout(Checkpoint::open(dir.path()));
  CHECK(unknown_model_type_warning(layout) ==
        "model type \"mystery_lm\" is not one kvrank knows: read by the llama reader, from its "
        "tensor names; if its attention differs, name the tensors with --map (docs/families.md)");
  LayoutOverrides named;
  named.family = "llama";
  CHECK(unknown_model_type_warning(layout, named).empty());
  CHECK(layout_reading_detail(layout) ==
        "llama reader: heads 4, kv_heads 2, head_dim 6, d_model 16, 2 attention layers; layer 0 "
        "read from model.layers.0.self_attn.q_proj.weight, model.layers.0.self_attn.k_proj.weight, "
        "model.layers.0.self_attn.v_proj.weight, model.layers.0.self_attn.o_proj.weight");
}

TEST_CASE("llama factors equal W_Q^h W_K^hᵀ (query head h uses KV head h / group)", "[families]") {
  TempDir dir;
  const LlamaWeights w = write_llama(dir.path(), 2, 6, 2, 4, 12);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const ModelLayout layout = detect_layout(checkpoint);
  const HeadFactors qk = layer_factors(checkpoint, layout, 1, Repr::qk);
  const HeadFactors ov = layer_factors(checkpoint, layout, 1, Repr::ov);
  const HeadFactors k = layer_factors(checkpoint, layout, 1, Repr::k);
  REQUIRE(qk.num_heads() == 6);
  CHECK(k.symmetric);
  for (int h = 0; h < 6; ++h) {
    const Index g = h / 3;
    CHECK(explicit_form(qk, h).isApprox(expected_form(w.q, h, w.k, g, 4), 1e-6));
    CHECK(explicit_form(k, h).isApprox(expected_form(w.k, g, w.k, g, 4), 1e-6));
    // ov: A_h = W_O^h W_V^h, W_O^h = columns [4h, 4h+4) of o_proj.
    const MatrixD w_o = w.o.middleCols(h * 4, 4).cast<double>();
    CHECK(explicit_form(ov, h).isApprox(w_o * w.v.middleRows(g * 4, 4).cast<double>(), 1e-6));
  }
  // Shared KV blocks enter the key basis once.
  CHECK(qk.right.basis.rows() == 2 * 4);
}

TEST_CASE("falcon new_decoder_architecture: grouped fused rows", "[families]") {
  // rows [H_kv, H/H_kv + 2, d_h]: group g holds its query heads, then its key, then its value.
  const int heads = 4, kv_heads = 2, head_dim = 3, d_model = 12, group = 2;
  const RowMatrixF q = random_matrix(heads * head_dim, d_model);
  const RowMatrixF k = random_matrix(kv_heads * head_dim, d_model);
  const RowMatrixF v = random_matrix(kv_heads * head_dim, d_model);
  RowMatrixF fused((heads + 2 * kv_heads) * head_dim, d_model);
  Index row = 0;
  auto append = [&](const RowMatrixF& source, Index block) {
    fused.middleRows(row, head_dim) = source.middleRows(block * head_dim, head_dim);
    row += head_dim;
  };
  for (int g = 0; g < kv_heads; ++g) {
    for (int j = 0; j < group; ++j) append(q, g * group + j);
    append(k, g);
    append(v, g);
  }
  TempDir dir;
  write_safetensors(dir / "model.safetensors",
                    {{"transformer.h.0.self_attention.query_key_value.weight", fused},
                     {"transformer.h.0.self_attention.dense.weight", random_matrix(12, 12)}});
  test::write_file(dir / "config.json", nlohmann::json{{"model_type", "falcon"},
                                                       {"hidden_size", d_model},
                                                       {"num_attention_heads", heads},
                                                       {"num_kv_heads", kv_heads},
                                                       {"new_decoder_architecture", true}}
                                            .dump());
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const ModelLayout layout = detect_layout(checkpoint);
  CHECK(layout.family == Family::falcon);
  CHECK(layout.variant == Variant::gqa);
  CHECK(layout.head_dim == 3);
  const HeadFactors qk = layer_factors(checkpoint, layout, 0, Repr::qk);
  const HeadFactors vv = layer_factors(checkpoint, layout, 0, Repr::v);
  for (int h = 0; h < heads; ++h) {
    CHECK(explicit_form(qk, h).isApprox(expected_form(q, h, k, h / group, head_dim), 1e-6));
    CHECK(explicit_form(vv, h).isApprox(expected_form(v, h / group, v, h / group, head_dim), 1e-6));
  }
}

TEST_CASE("without config.json the head count must come from --heads", "[families]") {
  TempDir dir;
  const LlamaWeights w = write_llama(dir.path(), 1, 4, 2, 6, 16, /*with_config=*/false);
  const Checkpoint checkpoint = Checkpoint::open(dir / "model.safetensors");
  CHECK_THAT(error_message([&] { detect_layout(checkpoint); }),
             Catch::Matchers::Contains("--heads"));
  LayoutOverrides overrides;
  overrides.heads = 4;
  const ModelLayout layout = detect_layout(checkpoint, overrides);
  CHECK(layout.heads == 4);
  CHECK(layout.head_dim == 6);  // 24 query rows / 4 heads
  CHECK(layout.kv_heads == 2);  // 12 key rows / head_dim 6
  CHECK(layout.d_model == 16);
}

TEST_CASE("config head counts that do not fit the tensors name both", "[families]") {
  TempDir dir;
  write_llama(dir.path(), 1, 4, 2, 4, 16);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  LayoutOverrides overrides;
  overrides.kv_heads = 4;  // the file holds 2 KV heads: k_proj has 8 rows, not 16
  const std::string message = error_message([&] { detect_layout(checkpoint, overrides); });
  CHECK_THAT(message, Catch::Matchers::Contains("model.layers.0.self_attn.k_proj.weight") &&
                          Catch::Matchers::Contains("4 kv heads × head_dim 4 = 16 rows") &&
                          Catch::Matchers::Contains("config.json") &&
                          Catch::Matchers::Contains("--kv-heads") &&
                          Catch::Matchers::Contains("found [8, 16]"));
  overrides.kv_heads = 3;
  CHECK_THAT(error_message([&] { detect_layout(checkpoint, overrides); }),
             Catch::Matchers::Contains("heads 4 is not a multiple of kv_heads 3"));
}

TEST_CASE("K/V-only checkpoints: k and v only", "[families]") {
  TempDir dir;
  write_llama(dir.path(), 2, 4, 4, 4, 16, /*with_config=*/false, /*with_queries=*/false);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  LayoutOverrides overrides;
  overrides.kv_heads = 4;
  const ModelLayout layout = detect_layout(checkpoint, overrides);
  CHECK_FALSE(layout.has_queries);
  CHECK_FALSE(layout.has_outputs);
  CHECK(layout.heads == 4);
  CHECK(layout.head_dim == 4);
  CHECK(layer_factors(checkpoint, layout, 1, Repr::v).num_heads() == 4);
  CHECK_THAT(error_message([&] { layer_factors(checkpoint, layout, 0, Repr::qk); }),
             Catch::Matchers::Contains("only key/value"));
  CHECK_THAT(error_message([&] { layer_factors(checkpoint, layout, 2, Repr::k); }),
             Catch::Matchers::Contains("layer 2 out of range"));
}

TEST_CASE("A checkpoint without v_proj is read for the representations that need no values",
          "[families]") {
  TempDir dir;
  const RowMatrixF q = random_matrix(8, 8), k = random_matrix(4, 8);
  write_safetensors(dir / "model.safetensors", {{"model.layers.0.self_attn.q_proj.weight", q},
                                                {"model.layers.0.self_attn.k_proj.weight", k}});
  test::write_file(dir / "config.json", R"({"model_type": "llama", "num_attention_heads": 2,
                                            "num_key_value_heads": 1, "hidden_size": 8})");
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const ModelLayout layout = detect_layout(checkpoint);
  CHECK_FALSE(layout.has_values);
  CHECK(layer_factors(checkpoint, layout, 0, Repr::qk).num_heads() == 2);
  CHECK(layer_factors(checkpoint, layout, 0, Repr::k).num_heads() == 2);
  CHECK(layer_tensor_names(layout, 0) ==
        std::vector<std::string>{"model.layers.0.self_attn.q_proj.weight",
                                 "model.layers.0.self_attn.k_proj.weight"});
  CHECK_THAT(error_message([&] { layer_factors(checkpoint, layout, 0, Repr::v); }),
             Catch::Matchers::EndsWith(
                 ": --repr v needs value projections, but this checkpoint has none (use --repr "
                 "qk,k)"));
}

TEST_CASE("A --map file names the tensors of any layout, its mistakes are named", "[families]") {
  TempDir dir;
  const RowMatrixF q = random_matrix(8, 8), k = random_matrix(4, 8), v = random_matrix(4, 8);
  write_safetensors(dir / "model.safetensors", {{"blk.0.wq", q}, {"blk.0.wk", k}, {"blk.0.wv", v}});
  auto with_map = [&](const nlohmann::json& map) {
    test::write_file(dir / "map.json", map.dump());
    LayoutOverrides overrides;
    overrides.map_file = dir / "map.json";
    return detect_layout(Checkpoint::open(dir / "model.safetensors"), overrides);
  };
  const nlohmann::json good = {
      {"q", "blk.{i}.wq"}, {"k", "blk.{i}.wk"}, {"v", "blk.{i}.wv"}, {"heads", 4}, {"kv_heads", 2}};
  const ModelLayout layout = with_map(good);
  CHECK(layout.family == Family::map);
  CHECK(layout.head_dim == 2);
  CHECK(layout.variant == Variant::gqa);
  CHECK_FALSE(layout.has_outputs);

  nlohmann::json typo = good;
  typo["kv_head"] = 2;
  CHECK_THAT(error_message([&] { with_map(typo); }),
             Catch::Matchers::Contains("unknown key \"kv_head\""));
  nlohmann::json no_slot = good;
  no_slot["q"] = "blk.0.wq";
  CHECK_THAT(error_message([&] { with_map(no_slot); }), Catch::Matchers::Contains("\"{i}\""));
  nlohmann::json bad_layout = good;
  bad_layout["layout"] = "rows";
  CHECK_THAT(error_message([&] { with_map(bad_layout); }), Catch::Matchers::Contains("in_out"));
}

TEST_CASE("a config.json promising more layers than the tensors hold names the first missing one",
          "[families]") {
  TempDir dir;
  write_llama(dir.path(), 2, 4, 4, 4, 16);
  auto config = nlohmann::json::parse(test::read_file(dir / "config.json"));
  config["num_hidden_layers"] = 3;
  test::write_file(dir / "config.json", config.dump());
  CHECK_THAT(error_message([&] { detect_layout(Checkpoint::open(dir.path())); }),
             Catch::Matchers::Contains("model.layers.2.self_attn.k_proj.weight") &&
                 Catch::Matchers::Contains("says 3 layers"));
}

TEST_CASE("The --family flag picks or restricts the family", "[families]") {
  TempDir dir;
  write_llama(dir.path(), 1, 4, 2, 4, 16);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  LayoutOverrides overrides;
  overrides.family = "qwen2";  // a llama-like model type
  CHECK(detect_layout(checkpoint, overrides).family == Family::llama);
  overrides.family = "gpt2";
  CHECK_THAT(error_message([&] { detect_layout(checkpoint, overrides); }),
             Catch::Matchers::Contains("found no tensors of family gpt2"));
  overrides.family = "bogus";
  CHECK_THAT(error_message([&] { detect_layout(checkpoint, overrides); }),
             Catch::Matchers::StartsWith("--family: expected a family (llama, ") &&
                 Catch::Matchers::Contains(") or a model type (mistral, mixtral, qwen2, ") &&
                 Catch::Matchers::EndsWith(", found \"bogus\""));
}

TEST_CASE("unknown layouts point to --map", "[families]") {
  TempDir dir;
  write_safetensors(dir / "odd.safetensors", {{"blocks.0.w", random_matrix(4, 4)}});
  CHECK_THAT(error_message([&] { detect_layout(Checkpoint::open(dir / "odd.safetensors")); }),
             Catch::Matchers::Contains("--map"));
}

TEST_CASE("data/tiny: the trained models are detected as their README table says", "[families]") {
  // data/README.md: 4 layers, d_model 128, 8 query heads of d_h 16; GQA with 2 KV heads, MQA 1.
  struct Expected {
    const char* model;
    const char* family;
    const char* variant;
    int kv_heads;
  };
  for (const Expected& want :
       {Expected{"mha", "llama", "mha", 8}, Expected{"gqa", "llama", "gqa", 2},
        Expected{"mqa", "llama", "mqa", 1}, Expected{"lrkv-r2", "lrkv", "lrkv", 8}}) {
    INFO(want.model);
    const ModelLayout layout = detect_layout(Checkpoint::open(test::tiny_model(want.model)));
    CHECK(family_name(layout.family) == want.family);
    CHECK(variant_name(layout.variant) == want.variant);
    CHECK(layout.heads == 8);
    CHECK(layout.kv_heads == want.kv_heads);
    CHECK(layout.head_dim == 16);
    CHECK(layout.d_model == 128);
    CHECK(layout.num_layers == 4);
  }
  const ModelLayout mla = detect_layout(Checkpoint::open(test::tiny_model("mla")));
  CHECK((mla.variant == Variant::mla && mla.mla_kv_lora_rank == 64 && mla.num_layers == 4));
}

TEST_CASE("stories260K is detected as llama GQA", "[.shared][families]") {
  const Checkpoint checkpoint = Checkpoint::open(test::shared_stories260k());
  const ModelLayout layout = detect_layout(checkpoint);
  CHECK(layout.family == Family::llama);
  CHECK(layout.variant == Variant::gqa);
  CHECK(layout.heads == 8);
  CHECK(layout.kv_heads == 4);
  CHECK(layout.head_dim == 8);
  CHECK(layout.d_model == 64);
  CHECK(layout.num_layers == 5);
}

}  // namespace kvrank

// MLA (DeepSeek-V2/V3): FP8 block dequantization, detection, and latent-basis factors that equal
// the explicit per-head products written by tests/writers/write_latent_checkpoints.py (independent
// numpy).
#include <string>
#include <variant>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "layout/fp8_blocks.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

using namespace kvrank;
using kvrank::test::check_factors_match_reference;
using kvrank::test::error_message;
using kvrank::test::TempDir;

namespace {

/// Writes `write_latent_checkpoints.py FAMILY` into dir/ckpt and dir/ref.
void write_latent(const TempDir& dir, const std::string& family, const std::string& options) {
  test::write_reference_checkpoint(dir, "write_latent_checkpoints.py", family, options);
}

}  // namespace

TEST_CASE("FP8 block scales multiply each block, ragged edges included", "[mla]") {
  RowMatrixF weight(5, 7);
  for (Index i = 0; i < 5; ++i)
    for (Index j = 0; j < 7; ++j) weight(i, j) = static_cast<float>(i * 7 + j + 1);
  RowMatrixF scales(3, 3);  // ceil(5/2) × ceil(7/3)
  scales << 1, 2, 3, 4, 5, 6, 7, 8, 9;
  RowMatrixF scaled = weight;
  detail::apply_block_scales(scaled, scales, {2, 3}, "f", "w_scale_inv");
  for (Index i = 0; i < 5; ++i)
    for (Index j = 0; j < 7; ++j) CHECK(scaled(i, j) == weight(i, j) * scales(i / 2, j / 3));
}

TEST_CASE("FP8 block scales of the wrong shape are named with the expected shape", "[mla]") {
  RowMatrixF weight = RowMatrixF::Ones(200, 130);
  RowMatrixF scales = RowMatrixF::Ones(1, 2);
  CHECK(error_message([&] {
          detail::apply_block_scales(weight, scales, {}, "m.safetensors", "x.weight_scale_inv");
        }) ==
        "m.safetensors: x.weight_scale_inv: expected shape [2, 2] (one scale per 128x128 "
        "block of the weight), found [1, 2]");
}

TEST_CASE("MLA detection: geometry, and dimensions inferred from shapes match config.json",
          "[mla]") {
  TempDir full, minimal;
  const std::string options =
      "--q-lora-rank 9 --kv-lora-rank 7 --nope 3 --rope 2 --v-head-dim 4 --heads 5 --hidden 24";
  write_latent(full, "mla", options);
  write_latent(minimal, "mla", options + " --minimal-config");
  for (const TempDir* dir : {&full, &minimal}) {
    const ModelLayout layout = detect_layout(Checkpoint::open(*dir / "ckpt"));
    CHECK(layout.family == Family::deepseek_v2);
    CHECK(layout.variant == Variant::mla);
    CHECK(layout.heads == 5);
    CHECK(layout.kv_heads == 5);
    CHECK(layout.head_dim == 5);
    CHECK(layout.d_model == 24);
    CHECK(layout.num_layers == 3);
    CHECK(layout.mla_kv_lora_rank == 7);
    CHECK_FALSE(layout.lrkv_rank);
    CHECK(layout.has_queries);
    CHECK(layout.has_outputs);
    const auto& tensors = std::get<MlaTensors>(layout.tensors);
    CHECK(tensors.q_lora_rank == 9);
    CHECK(tensors.kv_lora_rank == 7);
    CHECK((tensors.qk_nope_head_dim == 3 && tensors.qk_rope_head_dim == 2));
    CHECK(tensors.v_head_dim == 4);
    CHECK(tensors.prefix == "model.layers.");
  }
}

TEST_CASE("MLA latent-basis factors equal the explicit effective projections", "[mla]") {
  const std::string options =
      GENERATE(std::string("--dtype F32"), std::string("--dtype BF16 --q-lora-rank 10"),
               std::string("--dtype F16 --rope 0 --minimal-config"),
               std::string("--dtype F8_E4M3 --block 16 8 --q-lora-rank 12"),
               std::string("--dtype F8_E4M3 --hidden 160 --heads 12 --nope 8 --v-head-dim 4 "
                           "--kv-lora-rank 20 --layers 1"));
  INFO(options);
  TempDir dir;
  write_latent(dir, "mla", options);
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint);
  REQUIRE(layout.variant == Variant::mla);
  check_factors_match_reference(dir, checkpoint, layout);
}

TEST_CASE("MLA key side: the basis is the latent (scaled by γ_kv) and the shared rope rows",
          "[mla]") {
  TempDir dir;
  write_latent(dir, "mla", "--kv-lora-rank 6 --rope 2 --nope 3 --heads 2 --hidden 16");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint);
  const HeadFactors factors = layer_factors(checkpoint, layout, 0, Repr::k);
  // Cost scales with the cache: the basis has kv_lora_rank + rope rows, not H·(nope + rope).
  CHECK(factors.left.basis.rows() == 8);
  CHECK(factors.left.basis.cols() == 16);
  CHECK(factors.symmetric);
  const std::string attn = "model.layers.0.self_attn.";
  const RowMatrixF kv_a = to_matrix(checkpoint.at(attn + "kv_a_proj_with_mqa.weight"));
  const std::vector<float> gain = to_f32(checkpoint.at(attn + "kv_a_layernorm.weight"));
  for (Index i = 0; i < 8; ++i) {
    const float g = i < 6 ? gain[static_cast<std::size_t>(i)] : 1.0f;
    CHECK((factors.left.basis.row(i) - g * kv_a.row(i)).norm() <= 1e-6f * kv_a.row(i).norm());
  }
}

TEST_CASE("MLA errors name the missing tensor and the config that disagrees", "[mla]") {
  TempDir dir;
  write_latent(dir, "mla", "--drop model.layers.1.self_attn.kv_b_proj.weight");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint);
  CHECK_NOTHROW(layer_factors(checkpoint, layout, 0, Repr::qk));
  CHECK_THAT(error_message([&] { layer_factors(checkpoint, layout, 1, Repr::qk); }),
             Catch::Matchers::Contains("model.layers.1.self_attn.kv_b_proj.weight"));

  TempDir wrong;
  write_latent(wrong, "mla", "--heads 6");
  test::write_file(wrong / "ckpt" / "config.json",
                   std::string(R"({"model_type": "deepseek_v2", "num_attention_heads": 4,
                     "kv_lora_rank": 12, "q_lora_rank": null, "qk_nope_head_dim": 6,
                     "qk_rope_head_dim": 4, "v_head_dim": 5, "hidden_size": 48})"));
  const Checkpoint bad = Checkpoint::open(wrong / "ckpt");
  const std::string message =
      error_message([&] { layer_factors(bad, detect_layout(bad), 0, Repr::qk); });
  CHECK_THAT(message, Catch::Matchers::Contains("model.layers.0.self_attn.q_proj.weight: "
                                                "expected shape [40, 48]"));
  CHECK_THAT(message, Catch::Matchers::Contains("num_attention_heads 4"));
  CHECK_THAT(message, Catch::Matchers::Contains("found [60, 48]"));
}

TEST_CASE("MLA gains kept beside their rows (Bases::stored_bf16) fold to the float32 bases' bits",
          "[mla]") {
  const std::string options =
      GENERATE(std::string("--dtype BF16 --q-lora-rank 10"), std::string("--dtype BF16"),
               std::string("--dtype F32 --q-lora-rank 9 --rope 0"));
  INFO(options);
  TempDir dir;
  write_latent(dir, "mla", options);
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint);
  const bool q_lora = std::get<MlaTensors>(layout.tensors).q_lora_rank > 0;
  const std::string attn = "model.layers.1.self_attn.";
  // A side with its gain beside it holds the projection's rows as stored, bf16 ones where they lie
  // (no float32 copy); folding the gain later gives the rows (and power of two) of folding it
  // while loading, to the bit.
  auto check_side = [&](const FactorSide& beside, const FactorSide& folded, const char* rows) {
    INFO(rows);
    const TensorView& tensor = checkpoint.at(attn + rows);
    CHECK(beside.stored.has_value() == (tensor.dtype == DType::BF16));
    CHECK(beside.basis.size() == (beside.stored ? 0 : beside.rows() * beside.cols()));
    REQUIRE(beside.row_gains.size() == static_cast<std::size_t>(beside.rows()));
    const RowMatrixF copied = with_basis_copied(beside).basis;
    CHECK(copied == to_matrix(tensor).topRows(beside.rows()));
    CHECK(copied != folded.basis);  // the gains are not all 1
    const FactorSide refolded = with_float_basis(beside);
    CHECK(refolded.row_gains.empty());
    CHECK(refolded.basis == folded.basis);
    CHECK(refolded.exponent == folded.exponent);
  };
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v}) {
    INFO(repr_name(repr));
    const HeadFactors beside = layer_factors(checkpoint, layout, 1, repr, Bases::stored_bf16);
    const HeadFactors folded = layer_factors(checkpoint, layout, 1, repr);
    CHECK_FALSE(folded.has_row_gains());
    const char* latent = "kv_a_proj_with_mqa.weight";
    switch (repr) {
      case Repr::qk:
        if (q_lora) {
          check_side(beside.left, folded.left, "q_a_proj.weight");
        } else {
          CHECK(beside.left.row_gains.empty());  // q_proj has no norm before it
        }
        check_side(beside.right, folded.right, latent);
        break;
      case Repr::ov:
        CHECK(beside.left.row_gains.empty());  // o_proj
        check_side(beside.right, folded.right, latent);
        break;
      case Repr::k:
      case Repr::v:
        check_side(beside.left, folded.left, latent);
        break;
    }
  }
}

TEST_CASE(
    "MLA coefficient rows under Bases::stored_bf16 stay stored for BF16 weights only and "
    "copy to the float32 blocks' values",
    "[mla]") {
  const std::string options =
      GENERATE(std::string("--dtype BF16 --q-lora-rank 10"), std::string("--dtype F32"));
  INFO(options);
  TempDir dir;
  write_latent(dir, "mla", options);
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint);
  const bool bf16 = options.find("BF16") != std::string::npos;
  for (Repr repr : {Repr::qk, Repr::ov}) {
    INFO(repr_name(repr));
    const HeadFactors stored = layer_factors(checkpoint, layout, 1, repr, Bases::stored_bf16);
    const HeadFactors copied = layer_factors(checkpoint, layout, 1, repr);
    CHECK(stored.right.has_stored_coefficients() == bf16);  // kv_b_proj's rows
    CHECK_FALSE(copied.has_stored_coefficients());
    const HeadFactors converted = with_float_bases(stored);
    CHECK_FALSE(converted.has_stored_coefficients());
    for (auto side : {&HeadFactors::left, &HeadFactors::right}) {
      const FactorSide& got = converted.*side;
      const FactorSide& want = copied.*side;
      REQUIRE(got.heads.size() == want.heads.size());
      for (std::size_t h = 0; h < got.heads.size(); ++h) {
        REQUIRE(got.heads[h].size() == want.heads[h].size());
        for (std::size_t b = 0; b < got.heads[h].size(); ++b) {
          const CoeffBlock& block = got.heads[h][b];
          REQUIRE(block.is_identity() == want.heads[h][b].is_identity());
          if (block.is_identity()) continue;
          CHECK(block.transposed() == want.heads[h][b].transposed());
          // The heads' blocks share one copy of the rows, as they shared the stored rows.
          CHECK(block.source == got.heads[0][b].source);
        }
      }
    }
  }
}

// QK-norm gains (Qwen3, Gemma 3, OLMo 2; StableLM's and Cohere's LayerNorms with their centring)
// and the other llama-named families of today (Gemma 2,
// Mixtral, Qwen2/3-MoE, attention biases): per-head factors equal the gain-scaled per-head
// projections that tests/writers/write_family_checkpoints.py (independent numpy) wrote the
// checkpoint from, for every representation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "layout/family_detail.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

using namespace kvrank;
using kvrank::test::TempDir;

namespace {

void write_family(const TempDir& dir, const std::string& family, const std::string& options) {
  test::write_reference_checkpoint(dir, "write_family_checkpoints.py", family, options);
}

/// "weight" or "1 + weight" as the layout reads its QK-norm gains, "" when it has none.
std::string gain_text(const ModelLayout& layout) {
  const auto& tensors = std::get<DenseTensors>(layout.tensors);
  if (!tensors.q_norm && !tensors.k_norm) return "";
  return tensors.norm_gain == NormGain::one_plus_weight ? "1 + weight" : "weight";
}

}  // namespace

TEST_CASE("QK-norm gains are folded into the query and key rows of each family", "[qk_norm]") {
  struct Case {
    const char* family;
    const char* gain;  // "weight" or "1 + weight", "" when the family has no QK norm
  };
  const Case family_case = GENERATE(
      Case{"qwen3", "weight"}, Case{"gemma3", "1 + weight"}, Case{"gemma3_mm", "1 + weight"},
      Case{"olmo2", "weight"}, Case{"qwen3_moe", "weight"}, Case{"stablelm", "weight"},
      Case{"cohere", "weight"}, Case{"gemma2", ""}, Case{"mixtral", ""}, Case{"qwen2_moe", ""},
      Case{"llama_bias", ""});
  const char* dtype = GENERATE("F32", "BF16");
  INFO(family_case.family << " " << dtype);
  TempDir dir;
  // head_dim 12 ≠ d_model / heads = 8, as in Qwen3 and Gemma.
  write_family(dir, family_case.family,
               std::string("--layers 3 --heads 4 --kv-heads 2 --head-dim 12 --dtype ") + dtype);
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint, {});
  CHECK(layout.family == Family::llama);
  CHECK(layout.variant == Variant::gqa);
  CHECK((layout.heads == 4 && layout.kv_heads == 2 && layout.head_dim == 12));
  CHECK(layout.d_model == 32);
  CHECK(layout.num_layers == 3);
  CHECK(gain_text(layout) == std::string(family_case.gain));
  test::check_factors_match_reference(dir, checkpoint, layout);

  const auto names = layer_tensor_names(layout, 2);
  const bool lists_norm = std::find_if(names.begin(), names.end(), [](const std::string& name) {
                            return name.ends_with(".self_attn.q_norm.weight") ||
                                   name.ends_with(".self_attn.q_layernorm.norms.3.weight");
                          }) != names.end();
  CHECK(lists_norm == (*family_case.gain != '\0'));
}

TEST_CASE("q_norm read as 1 + weight with --family gemma3 when config.json does not say",
          "[qk_norm]") {
  TempDir dir;
  write_family(dir, "gemma3", "--layers 2 --heads 4 --head-dim 12");
  std::filesystem::remove(dir / "ckpt" / "config.json");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt" / "model.safetensors");
  LayoutOverrides overrides;
  overrides.heads = 4;
  overrides.head_dim = 12;
  CHECK(gain_text(detect_layout(checkpoint, overrides)) == "weight");
  overrides.family = "gemma3";
  const ModelLayout layout = detect_layout(checkpoint, overrides);
  CHECK(gain_text(layout) == "1 + weight");
  test::check_factors_match_reference(dir, checkpoint, layout);
}

TEST_CASE("folding a gain near float32's maximum keeps the rows exact up to one power of two",
          "[qk_norm]") {
  using detail::fold_gain;
  RowMatrixF rows(3, 2);
  rows << 1e20f, -2e20f, 3.0f, 0.5f, 1.0f, -1.0f;  // row 2 has no gain (MLA's rope rows)
  const detail::Gain gain{
      {1e20f, std::numeric_limits<float>::max()}, "m.safetensors", "q_norm.weight"};
  // In float32 both products overflowed to inf, and every head was reported "all zero".
  const detail::FoldedRows folded = fold_gain(rows, gain);
  REQUIRE(folded.rows.allFinite());
  // The largest product, |−2e20 · 1e20|, lands in [1, 2).
  CHECK(folded.exponent == std::ilogb(std::abs(static_cast<double>(rows(0, 1))) *
                                      static_cast<double>(gain.values[0])));
  const double row_gain[] = {1e20, static_cast<double>(gain.values[1]), 1.0};
  for (Index i = 0; i < rows.rows(); ++i) {
    for (Index j = 0; j < rows.cols(); ++j) {
      const double want =
          static_cast<double>(rows(i, j)) * static_cast<double>(static_cast<float>(row_gain[i]));
      CHECK(std::ldexp(static_cast<double>(folded.rows(i, j)), folded.exponent) ==
            Approx(want).epsilon(1e-7));
    }
  }
  // Within float's range nothing changes: the float32 product, exponent 0.
  const detail::FoldedRows plain = fold_gain(rows.bottomRows(2), {{1.5f, 2.0f}, "", ""});
  CHECK(plain.exponent == 0);
  CHECK(plain.rows(0, 0) == 4.5f);
  CHECK(plain.rows(1, 1) == -2.0f);
}

TEST_CASE("a non-finite folded gain is an error naming the gain tensor", "[qk_norm]") {
  const RowMatrixF rows = RowMatrixF::Ones(2, 2);
  const detail::Gain gain{{std::numeric_limits<float>::infinity(), 1.0f},
                          "m.safetensors",
                          "model.layers.0.self_attn.q_norm.weight"};
  CHECK_THROWS_WITH(detail::fold_gain(rows, gain),
                    "m.safetensors: model.layers.0.self_attn.q_norm.weight: folding this gain into "
                    "its projection rows gives non-finite values");
}

TEST_CASE("a QK LayerNorm is read as one: StableLM's per-head tensors, Cohere's 2-D gains",
          "[qk_norm]") {
  struct Case {
    const char* family;
    NormKind kind;
    std::size_t norm_tensors;  // per layer
  };
  const Case family_case =
      GENERATE(Case{"stablelm", NormKind::layer, 4 + 2}, Case{"cohere", NormKind::layer, 2},
               Case{"qwen3", NormKind::rms, 2});
  INFO(family_case.family);
  TempDir dir;
  write_family(dir, family_case.family, "--layers 1 --heads 4 --kv-heads 2 --head-dim 6");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint, {});
  CHECK(std::get<DenseTensors>(layout.tensors).qk_norm_kind == family_case.kind);
  const auto names = layer_tensor_names(layout, 0);
  CHECK(static_cast<std::size_t>(
            std::count_if(names.begin(), names.end(), [](const std::string& name) {
              return name.find("norm") != std::string::npos;
            })) == family_case.norm_tensors);
  test::check_factors_match_reference(dir, checkpoint, layout);
}

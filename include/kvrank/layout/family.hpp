// The attention families kvrank reads and writes (docs/families.md), and the attention variants:
// one table each (name_table.hpp). Detection (layout.hpp), `synth` and `inspect` read the same
// rows.
//
//   std::string_view name = family_name(Family::gpt_neox);  // "gpt_neox"
//   std::optional<Family> falcon = family_named("falcon");  // Family::falcon
//   bool mha_only = family_info(Family::gpt2).mha_only;     // true: one fused [3·H·d_h, d]
//   Variant variant = attention_variant(32, 8);             // Variant::gqa
// (this example is compiled and run by tests/header_examples_test.cpp)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvrank {

/// As reported in results ("family"): the reader of a model type (model_type.hpp) — llama also
/// stands for the llama-named model types (mistral, qwen3, gemma3 …); deepseek_v3 is MLA with
/// DeepSeek-V3's config; zamba2 reads Zamba 2's shared attention blocks; map / npy / activations
/// are inputs named by a `--map` file, NPY arrays and captured activations.
enum class Family {
  llama,
  gpt2,
  gpt_neox,
  falcon,
  phi3,
  deepseek_v2,
  deepseek_v3,
  lrkv,
  bloom,
  mpt,
  baichuan,
  qwen,
  gpt_bigcode,
  internlm2,
  chatglm,
  zamba2,  // attention blocks shared by several layers, each with its own adapters
  // encoders and encoder-decoders: one layout per attention series (layout.hpp detect_series)
  bert,
  vit,
  t5,
  whisper,
  clip,
  transformer_lens,  // a TransformerLens state dict: per-head [heads, in, out] tensors
  map,
  npy,
  activations
};

/// mha / gqa / mqa from the head counts; mla and lrkv from the family.
enum class Variant { mha, gqa, mqa, mla, lrkv };

/// mla and lrkv: the variant a family has whatever its head counts (nullopt for the others).
std::optional<Variant> family_variant(Family family) noexcept;

struct FamilyInfo {
  Family family;
  std::string_view name;
  bool synthesizable;     ///< `kvrank synth --family NAME` writes it
  bool mha_only;          ///< its fused tensor has no KV-head count (gpt2, gpt_neox)
  bool head_dim_implied;  ///< its config.json has no head_dim: d_model / heads
};

const FamilyInfo& family_info(Family family) noexcept;
std::string_view family_name(Family family) noexcept;
std::optional<Family> family_named(std::string_view name) noexcept;
/// "llama, gpt2, …": the families `synth` writes, in table order.
std::string synthesizable_family_list();

std::string_view variant_name(Variant variant) noexcept;
std::optional<Variant> variant_named(std::string_view name) noexcept;
/// "mha, gqa, mqa, mla or lrkv" (with last_separator " or ").
std::string variant_list(std::string_view last_separator = " or ");
/// mha when every query head has its own KV head, mqa for one KV head, gqa in between.
Variant attention_variant(int heads, int kv_heads) noexcept;

}  // namespace kvrank

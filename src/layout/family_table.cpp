// The family and variant tables of family.hpp.
#include <array>

#include "kvrank/base/name_table.hpp"
#include "kvrank/layout/family.hpp"

namespace kvrank {
namespace {

// family, name, synthesizable, MHA only, head_dim implied
constexpr std::array<FamilyInfo, 25> kFamilies{{
    {Family::llama, "llama", true, false, false},
    {Family::gpt2, "gpt2", true, true, true},
    {Family::gpt_neox, "gpt_neox", true, true, true},
    {Family::falcon, "falcon", true, false, true},
    {Family::phi3, "phi3", true, false, true},
    {Family::deepseek_v2, "deepseek_v2", true, false, false},
    {Family::deepseek_v3, "deepseek_v3", false, false, false},
    {Family::lrkv, "lrkv", true, false, false},
    {Family::bloom, "bloom", false, true, true},
    {Family::mpt, "mpt", false, false, true},
    {Family::baichuan, "baichuan", false, true, true},
    {Family::qwen, "qwen", false, true, true},
    {Family::gpt_bigcode, "gpt_bigcode", false, false, true},
    {Family::internlm2, "internlm2", false, false, true},
    {Family::chatglm, "chatglm", false, false, false},
    {Family::zamba2, "zamba2", false, false, false},  // head_dim: attention_head_dim = 2·d / H
    {Family::bert, "bert", false, true, true},
    {Family::vit, "vit", false, true, true},
    {Family::t5, "t5", false, true, false},  // d_kv · heads may differ from d_model
    {Family::whisper, "whisper", false, true, true},
    {Family::clip, "clip", false, true, true},
    {Family::transformer_lens, "transformer_lens", false, false, false},
    {Family::map, "map", false, false, false},
    {Family::npy, "npy", false, false, false},
    {Family::activations, "activations", false, false, false},
}};

static_assert(in_enum_order(kFamilies, &FamilyInfo::family));

constexpr std::array<Named<Variant>, 5> kVariants{{{Variant::mha, "mha"},
                                                   {Variant::gqa, "gqa"},
                                                   {Variant::mqa, "mqa"},
                                                   {Variant::mla, "mla"},
                                                   {Variant::lrkv, "lrkv"}}};
static_assert(in_enum_order(kVariants));

}  // namespace

const FamilyInfo& family_info(Family family) noexcept {
  return kFamilies[static_cast<std::size_t>(family)];
}

std::string_view family_name(Family family) noexcept { return family_info(family).name; }

std::optional<Family> family_named(std::string_view name) noexcept {
  return value_named(kFamilies, name, &FamilyInfo::family);
}

std::string synthesizable_family_list() {
  std::string text;
  for (const FamilyInfo& info : kFamilies) {
    if (!info.synthesizable) continue;
    text += (text.empty() ? "" : ", ") + std::string(info.name);
  }
  return text;
}

std::string_view variant_name(Variant variant) noexcept { return name_of(kVariants, variant); }

std::optional<Variant> variant_named(std::string_view name) noexcept {
  return value_named(kVariants, name);
}

std::string variant_list(std::string_view last_separator) {
  return name_list(kVariants, last_separator);
}

std::optional<Variant> family_variant(Family family) noexcept {
  switch (family) {
    case Family::deepseek_v2:
    case Family::deepseek_v3:
      return Variant::mla;
    case Family::lrkv:
      return Variant::lrkv;
    default:
      return std::nullopt;
  }
}

Variant attention_variant(int heads, int kv_heads) noexcept {
  if (kv_heads == heads) return Variant::mha;
  if (kv_heads == 1) return Variant::mqa;
  return Variant::gqa;
}

}  // namespace kvrank

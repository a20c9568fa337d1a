// The family and variant tables of family.hpp.
#include <array>

#include "kvrank/base/name_table.hpp"
#include "kvrank/layout/family.hpp"

namespace kvrank {
namespace {

using Kind = LayoutKind;

// family, name, reader, synthesizable, MHA only, head_dim implied
constexpr std::array<FamilyInfo, 11> kFamilies{{
    {Family::llama, "llama", Kind::dense, true, false, false},
    {Family::gpt2, "gpt2", Kind::dense, true, true, true},
    {Family::gpt_neox, "gpt_neox", Kind::dense, true, true, true},
    {Family::falcon, "falcon", Kind::dense, true, false, true},
    {Family::phi3, "phi3", Kind::dense, true, false, true},
    {Family::deepseek_v2, "deepseek_v2", Kind::mla, true, false, false},
    {Family::deepseek_v3, "deepseek_v3", Kind::mla, false, false, false},
    {Family::lrkv, "lrkv", Kind::lrkv, true, false, false},
    {Family::map, "map", Kind::dense, false, false, false},
    {Family::npy, "npy", Kind::dense, false, false, false},
    {Family::activations, "activations", Kind::activations, false, false, false},
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

Variant attention_variant(int heads, int kv_heads) noexcept {
  if (kv_heads == heads) return Variant::mha;
  if (kv_heads == 1) return Variant::mqa;
  return Variant::gqa;
}

}  // namespace kvrank

// The family and variant tables (family.hpp): every value has one name that reads back to it, and
// the rows carry the facts detection and synth rely on.
#include <set>
#include <string>

#include "kvrank/layout/family.hpp"
#include "support/catch.hpp"

namespace kvrank {
namespace {

TEST_CASE("family table: each family's name reads back to it, and names are distinct",
          "[families]") {
  std::set<std::string_view> names;
  for (int i = 0; i <= static_cast<int>(Family::activations); ++i) {
    const auto family = static_cast<Family>(i);
    INFO(family_name(family));
    CHECK(family_info(family).family == family);
    CHECK(family_named(family_name(family)) == family);
    CHECK(names.insert(family_name(family)).second);
  }
  CHECK_FALSE(family_named("Llama"));
  CHECK_FALSE(family_named(""));
}

TEST_CASE("family table: the facts synth and detection read", "[families]") {
  CHECK(synthesizable_family_list() == "llama, gpt2, gpt_neox, falcon, phi3, deepseek_v2, lrkv");
  CHECK(family_variant(Family::deepseek_v3) == Variant::mla);
  CHECK(family_variant(Family::lrkv) == Variant::lrkv);
  CHECK_FALSE(family_variant(Family::falcon));
  for (Family family : {Family::gpt2, Family::gpt_neox}) CHECK(family_info(family).mha_only);
  CHECK_FALSE(family_info(Family::falcon).mha_only);
  for (Family family : {Family::gpt2, Family::gpt_neox, Family::falcon, Family::phi3})
    CHECK(family_info(family).head_dim_implied);
  CHECK_FALSE(family_info(Family::llama).head_dim_implied);
}

TEST_CASE("variant table: names, and the variant of a head count", "[families]") {
  for (Variant variant : {Variant::mha, Variant::gqa, Variant::mqa, Variant::mla, Variant::lrkv}) {
    CHECK(variant_named(variant_name(variant)) == variant);
  }
  CHECK(variant_list() == "mha, gqa, mqa, mla or lrkv");
  CHECK(variant_list(", ") == "mha, gqa, mqa, mla, lrkv");
  CHECK(attention_variant(8, 8) == Variant::mha);
  CHECK(attention_variant(8, 2) == Variant::gqa);
  CHECK(attention_variant(8, 1) == Variant::mqa);
  CHECK(attention_variant(1, 1) == Variant::mha);  // one head: nothing is shared
}

}  // namespace
}  // namespace kvrank

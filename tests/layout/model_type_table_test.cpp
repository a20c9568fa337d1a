// The model-type table (model_type.hpp): one row per model type, from which detection, the GGUF
// mapping, `--family` and the help and error texts are built.
#include <set>
#include <string>

#include "kvrank/layout/layout.hpp"
#include "kvrank/layout/model_type.hpp"
#include "support/catch.hpp"

namespace kvrank {
namespace {

TEST_CASE("model-type table: names and GGUF architectures are distinct and read back",
          "[families]") {
  std::set<std::string_view> names, architectures;
  for (const ModelTypeInfo& row : model_types()) {
    INFO(row.name);
    CHECK(names.insert(row.name).second);
    CHECK(model_type_named(row.name) == &row);
    if (row.gguf_architecture.empty()) continue;
    CHECK(architectures.insert(row.gguf_architecture).second);
    CHECK(model_type_of_gguf(row.gguf_architecture) == &row);
  }
  CHECK_FALSE(model_type_named("mamba"));
  CHECK_FALSE(model_type_of_gguf(""));
  CHECK_FALSE(model_type_of_gguf("gpt2"));  // llama.cpp's gpt2 fuses attn_qkv in gpt2's order
}

TEST_CASE("model-type table: the facts detection and the GGUF mapping read", "[families]") {
  CHECK(model_type_named("gemma2")->norm_gain == NormGain::one_plus_weight);
  CHECK(model_type_named("gemma3_text")->norm_gain == NormGain::one_plus_weight);
  CHECK(model_type_named("qwen3")->norm_gain == NormGain::weight);
  CHECK(model_type_named("qwen3")->qk_norm == NormKind::rms);
  CHECK(model_type_named("stablelm")->qk_norm == NormKind::layer);
  CHECK(model_type_named("cohere")->qk_norm == NormKind::layer);
  CHECK(model_type_named("bloom")->family == Family::bloom);  // not falcon, whose names it shares
  CHECK(model_type_named("minicpm3")->family == Family::deepseek_v2);
  CHECK(model_type_of_gguf("gemma3")->name == "gemma3_text");
  CHECK(gguf_architecture_list() ==
        "llama, qwen2, qwen2moe, qwen3, qwen3moe, gemma, gemma2, gemma3, olmo2, phi3, starcoder2, "
        "granite, deepseek2");
  CHECK(model_type_list(Family::gpt_neox) == "gpt_neox");
  CHECK(model_type_list(Family::map).empty());
  const std::string choices = family_choice_list();
  CHECK(choices.find("a family (llama, gpt2, ") == 0);
  CHECK(choices.find("or a model type (llama, mistral, mixtral") == std::string::npos);
  CHECK(choices.find("or a model type (mistral, mixtral, qwen2, ") != std::string::npos);
}

}  // namespace
}  // namespace kvrank

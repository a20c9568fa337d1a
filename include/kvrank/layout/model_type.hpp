// One row per model type (config.json's `model_type`): the reader family that reads it, the rule
// its RMSNorm applies to a stored gain, and the GGUF architecture llama.cpp writes it as. Detection
// (layout.hpp), the GGUF mapping, `--family` and the help and error texts that list model types
// are all built from these rows: supporting a model type whose tensors a reader already knows is
// one row in src/layout/model_type_table.cpp, plus its test.
//
//   const ModelTypeInfo* qwen3 = model_type_named("qwen3");      // reader Family::llama
//   NormGain gemma = model_type_named("gemma3")->norm_gain;      // NormGain::one_plus_weight
//   const ModelTypeInfo* mla = model_type_of_gguf("deepseek2");  // the "deepseek_v2" row
// (this example is compiled and run by tests/header_examples_test.cpp)
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kvrank/layout/family.hpp"

namespace kvrank {

/// What multiplies a normalised row: the stored weight, or 1 + weight (Gemma's RMSNorm).
enum class NormGain { weight, one_plus_weight };

struct ModelTypeInfo {
  std::string_view name;  ///< config.json's model_type
  Family family;          ///< the reader, as reported in results ("family")
  NormGain norm_gain;     ///< as stored in a Hugging Face checkpoint
  /// GGUF `general.architecture` that llama.cpp writes for it; empty when kvrank reads none. A
  /// GGUF converter stores Gemma's gains already as 1 + w, so GGUF gains are always
  /// NormGain::weight.
  std::string_view gguf_architecture;
};

/// Every row, in table order.
std::span<const ModelTypeInfo> model_types() noexcept;
/// The row of a config.json model_type (nullptr when kvrank has none: tensor names decide).
const ModelTypeInfo* model_type_named(std::string_view name) noexcept;
/// The row of a GGUF `general.architecture` (nullptr when kvrank does not read it).
const ModelTypeInfo* model_type_of_gguf(std::string_view architecture) noexcept;
/// "mistral, mixtral, …": the model types read by `family`, in table order ("" when none).
std::string model_type_list(Family family);
/// "llama, qwen2, …": the GGUF architectures kvrank reads, in table order.
std::string gguf_architecture_list();

}  // namespace kvrank

// One row per model type (config.json's `model_type`): the reader family that reads it, the rule
// its RMSNorm applies to a stored gain, the GGUF architecture llama.cpp writes it as, and the few
// facts that set a model type apart (a LayerNorm as QK norm, attention in some layers only, a
// gate in q_proj). Detection (layout.hpp), the GGUF mapping, `--family` and the help and error
// texts that list model types are all built from these rows: supporting a model type whose tensors
// a reader already knows is one row in src/layout/model_type_table.cpp, plus its test.
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
/// What a QK norm does before its gain: an RMSNorm only divides by a per-token scale; a LayerNorm
/// (StableLM, Cohere) first subtracts the mean over each head's entries, a fixed projection that
/// is part of the bilinear form (docs/metric.md).
enum class NormKind { rms, layer };
/// Which layers have attention heads: all, or those config.json names (hybrids, whose other
/// layers are Mamba or linear-attention blocks: docs/families.md).
enum class AttentionLayers { all, from_config };
/// What q_proj holds per head: its d_h query rows, or those followed by d_h rows of a sigmoid gate
/// on the head's output (Qwen3-Next's gated attention; the gate rows are not read).
enum class QueryRows { query, query_then_gate };

struct ModelTypeInfo {
  std::string_view name;  ///< config.json's model_type
  Family family;          ///< the reader, as reported in results ("family")
  NormGain norm_gain;     ///< as stored in a Hugging Face checkpoint
  /// GGUF `general.architecture` that llama.cpp writes for it; empty when kvrank reads none. A
  /// GGUF converter stores Gemma's gains already as 1 + w, so GGUF gains are always
  /// NormGain::weight.
  std::string_view gguf_architecture;
  NormKind qk_norm = NormKind::rms;  ///< what its q_norm / k_norm is, when it has one
  AttentionLayers layers = AttentionLayers::all;
  QueryRows query_rows = QueryRows::query;
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

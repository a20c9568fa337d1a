// The model-type table of model_type.hpp.
#include <algorithm>
#include <array>

#include "kvrank/layout/model_type.hpp"

namespace kvrank {
namespace {

constexpr NormGain kWeight = NormGain::weight;
constexpr NormGain kOnePlus = NormGain::one_plus_weight;
constexpr AttentionLayers kSomeLayers = AttentionLayers::from_config;

// model_type, reader, norm gain, GGUF architecture and, where it is a LayerNorm, the QK norm
// (`--family` accepts each model type). MoE variants differ from their dense model only in the
// MLP. The order is that of the lists in help and error texts.
constexpr std::array<ModelTypeInfo, 54> kModelTypes{{
    {"llama", Family::llama, kWeight, "llama"},
    {"mistral", Family::llama, kWeight, ""},
    {"mixtral", Family::llama, kWeight, ""},
    {"qwen2", Family::llama, kWeight, "qwen2"},
    {"qwen2_moe", Family::llama, kWeight, "qwen2moe"},
    {"qwen3", Family::llama, kWeight, "qwen3"},
    {"qwen3_moe", Family::llama, kWeight, "qwen3moe"},
    {"gemma", Family::llama, kOnePlus, "gemma"},
    {"gemma2", Family::llama, kOnePlus, "gemma2"},
    {"gemma3", Family::llama, kOnePlus, ""},
    {"gemma3_text", Family::llama, kOnePlus, "gemma3"},
    {"olmo2", Family::llama, kWeight, "olmo2"},
    {"phi3", Family::phi3, kWeight, "phi3"},
    {"starcoder2", Family::llama, kWeight, "starcoder2"},
    {"granite", Family::llama, kWeight, "granite"},
    {"olmoe", Family::llama, kWeight, ""},
    {"gpt2", Family::gpt2, kWeight, ""},
    {"gpt_neox", Family::gpt_neox, kWeight, ""},
    {"falcon", Family::falcon, kWeight, ""},
    {"deepseek_v2", Family::deepseek_v2, kWeight, "deepseek2"},
    {"deepseek_v3", Family::deepseek_v3, kWeight, ""},
    {"minicpm3", Family::deepseek_v2, kWeight, ""},  // DeepSeek's MLA names
    {"bloom", Family::bloom, kWeight, ""},
    {"mpt", Family::mpt, kWeight, ""},
    {"baichuan", Family::baichuan, kWeight, ""},
    {"qwen", Family::qwen, kWeight, ""},
    {"gpt_bigcode", Family::gpt_bigcode, kWeight, ""},
    {"internlm2", Family::internlm2, kWeight, ""},
    {"chatglm", Family::chatglm, kWeight, ""},
    {"glm", Family::llama, kWeight, ""},
    {"opt", Family::llama, kWeight, ""},                        // out_proj
    {"phi", Family::llama, kWeight, "", NormKind::layer},       // dense; q_layernorm
    {"stablelm", Family::llama, kWeight, "", NormKind::layer},  // q_layernorm.norms.{h}
    {"cohere", Family::llama, kWeight, "", NormKind::layer},    // q_norm [heads, head_dim]
    {"llama4", Family::llama, kWeight, ""},  // weightless L2 QK norm: nothing to fold
    {"llama4_text", Family::llama, kWeight, ""},
    // Hybrids: attention heads only in the layers config.json names, Mamba or linear attention in
    // the others. Qwen3-Next's q_proj also holds a gate per head, its RMSNorms multiply by 1 + w.
    {"jamba", Family::llama, kWeight, "", NormKind::rms, kSomeLayers},
    {"granitemoehybrid", Family::llama, kWeight, "", NormKind::rms, kSomeLayers},
    {"qwen3_next", Family::llama, kOnePlus, "", NormKind::rms, kSomeLayers,
     QueryRows::query_then_gate},
    // Zamba 2: a shared attention block before some Mamba layers, its own reader
    // (family_zamba2.cpp).
    {"zamba2", Family::zamba2, kWeight, "", NormKind::rms, kSomeLayers},
    // IBM's Bamba: llama's attention names in the layers attn_layer_indices lists, Mamba 2 in the
    // others.
    {"bamba", Family::llama, kWeight, "", NormKind::rms, kSomeLayers},
    // Encoders and encoder-decoders: one series per stack and kind of attention (layout.hpp).
    {"bert", Family::bert, kWeight, ""},
    {"roberta", Family::bert, kWeight, ""},  // bert's names under roberta.
    {"vit", Family::vit, kWeight, ""},
    {"t5", Family::t5, kWeight, ""},
    {"whisper", Family::whisper, kWeight, ""},
    {"bart", Family::whisper, kWeight, ""},  // whisper's names and config keys
    {"mbart", Family::whisper, kWeight, ""},
    {"clip", Family::clip, kWeight, ""},
    {"siglip", Family::clip, kWeight, ""},  // clip's names; its pooling head is not read
    // One tower alone (Stable Diffusion's text_encoder/): its section's keys at the top level.
    {"clip_text_model", Family::clip, kWeight, ""},
    {"clip_vision_model", Family::clip, kWeight, ""},
    {"siglip_text_model", Family::clip, kWeight, ""},
    {"siglip_vision_model", Family::clip, kWeight, ""},
}};

}  // namespace

std::span<const ModelTypeInfo> model_types() noexcept { return kModelTypes; }

const ModelTypeInfo* model_type_named(std::string_view name) noexcept {
  const auto* row = std::find_if(kModelTypes.begin(), kModelTypes.end(),
                                 [&](const ModelTypeInfo& info) { return info.name == name; });
  return row == kModelTypes.end() ? nullptr : row;
}

const ModelTypeInfo* model_type_of_gguf(std::string_view architecture) noexcept {
  if (architecture.empty()) return nullptr;
  const auto* row = std::find_if(
      kModelTypes.begin(), kModelTypes.end(),
      [&](const ModelTypeInfo& info) { return info.gguf_architecture == architecture; });
  return row == kModelTypes.end() ? nullptr : row;
}

std::string model_type_list(Family family) {
  std::string text;
  for (const ModelTypeInfo& info : kModelTypes) {
    if (info.family != family) continue;
    text += (text.empty() ? "" : ", ") + std::string(info.name);
  }
  return text;
}

std::string gguf_architecture_list() {
  std::string text;
  for (const ModelTypeInfo& info : kModelTypes) {
    if (info.gguf_architecture.empty()) continue;
    text += (text.empty() ? "" : ", ") + std::string(info.gguf_architecture);
  }
  return text;
}

}  // namespace kvrank

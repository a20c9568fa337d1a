// GGUF tensor names and hyperparameters mapped to their Hugging Face equivalents (gguf.hpp).
#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/io/gguf.hpp"

namespace kvrank {
namespace {

struct Architecture {
  std::string_view gguf;        // general.architecture
  std::string_view model_type;  // config.json's model_type
};

// Architectures whose attention kvrank reads. All but deepseek2 have llama's separate (or phi3's
// fused) Q/K/V projections; MoE variants differ only in their MLPs.
constexpr std::array<Architecture, 13> kArchitectures{{
    {"llama", "llama"},
    {"qwen2", "qwen2"},
    {"qwen2moe", "qwen2_moe"},
    {"qwen3", "qwen3"},
    {"qwen3moe", "qwen3_moe"},
    {"gemma", "gemma"},
    {"gemma2", "gemma2"},
    {"gemma3", "gemma3_text"},
    {"olmo2", "olmo2"},
    {"phi3", "phi3"},
    {"starcoder2", "starcoder2"},
    {"granite", "granite"},
    {"deepseek2", "deepseek_v2"},
}};

// `blk.{i}.<gguf suffix>` -> `model.layers.{i}.self_attn.<hf suffix>`.
struct AttentionName {
  std::string_view gguf;
  std::string_view hf;
};
constexpr std::array<AttentionName, 18> kAttentionNames{{
    {"attn_q.weight", "q_proj.weight"},
    {"attn_k.weight", "k_proj.weight"},
    {"attn_v.weight", "v_proj.weight"},
    {"attn_output.weight", "o_proj.weight"},
    {"attn_q.bias", "q_proj.bias"},
    {"attn_k.bias", "k_proj.bias"},
    {"attn_v.bias", "v_proj.bias"},
    {"attn_output.bias", "o_proj.bias"},
    {"attn_qkv.weight", "qkv_proj.weight"},
    {"attn_q_norm.weight", "q_norm.weight"},
    {"attn_k_norm.weight", "k_norm.weight"},
    {"attn_q_a.weight", "q_a_proj.weight"},
    {"attn_q_a_norm.weight", "q_a_layernorm.weight"},
    {"attn_q_b.weight", "q_b_proj.weight"},
    {"attn_kv_a_mqa.weight", "kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "kv_a_layernorm.weight"},
    {"attn_kv_b.weight", "kv_b_proj.weight"},
    {"attn_qkv.bias", "qkv_proj.bias"},
}};

/// The Hugging Face name of an attention tensor, or nullopt for every other tensor.
std::optional<std::string> hf_name(std::string_view name) {
  constexpr std::string_view kBlock = "blk.";
  if (!name.starts_with(kBlock)) return std::nullopt;
  name.remove_prefix(kBlock.size());
  const std::size_t dot = name.find('.');
  const std::string_view digits = name.substr(0, dot);
  if (dot == std::string_view::npos || digits.empty() || digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const std::string_view suffix = name.substr(dot + 1);
  for (const AttentionName& entry : kAttentionNames) {
    if (entry.gguf == suffix) {
      return "model.layers." + std::string(digits) + ".self_attn." + std::string(entry.hf);
    }
  }
  return std::nullopt;
}

class Hyperparameters {
 public:
  Hyperparameters(const GgufFile& file, const std::string& file_name)
      : file_(file), name_(file_name) {}

  std::string architecture() const {
    auto it = file_.metadata.find("general.architecture");
    if (it == file_.metadata.end() || !it->second.is_string())
      throw Error(name_, "metadata has no \"general.architecture\" string");
    return it->second.get<std::string>();
  }

  /// A non-negative integer hyperparameter; a per-layer array is accepted when all layers agree.
  std::optional<int> integer(const std::string& key) const {
    auto it = file_.metadata.find(key);
    if (it == file_.metadata.end()) return std::nullopt;
    const nlohmann::json& value = it->second;
    if (value.is_array() && !value.empty()) {
      if (std::any_of(value.begin(), value.end(), [&](const auto& v) { return v != value[0]; }))
        throw error(key, "per-layer values " + detail::json_excerpt(value) + " are not supported");
      return as_int(key, value[0]);
    }
    return as_int(key, value);
  }

  int required(const std::string& key) const {
    if (auto value = integer(key)) return *value;
    throw Error(name_, "metadata has no \"" + key + "\" (needed for the attention geometry)");
  }

 private:
  Error error(const std::string& key, const std::string& what) const {
    return Error(name_, "metadata \"" + key + "\": " + what);
  }

  int as_int(const std::string& key, const nlohmann::json& value) const {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::int64_t>() > std::numeric_limits<int>::max()) {
      throw error(key, "expected a non-negative integer, found " + detail::json_excerpt(value));
    }
    return value.get<int>();
  }

  const GgufFile& file_;
  const std::string& name_;
};

const Architecture& find_architecture(const std::string& arch, const std::string& file_name) {
  for (const Architecture& entry : kArchitectures)
    if (entry.gguf == arch) return entry;
  std::string known;
  for (const Architecture& entry : kArchitectures)
    known += (known.empty() ? "" : ", ") + std::string(entry.gguf);
  throw Error(file_name, "GGUF architecture \"" + excerpt(arch) +
                             "\" is not supported (kvrank reads " + known + ")");
}

nlohmann::json mla_config(const Hyperparameters& hp, const std::string& arch,
                          const std::string& file_name) {
  const std::string attention = arch + ".attention.";
  nlohmann::json config;
  config["kv_lora_rank"] = hp.required(attention + "kv_lora_rank");
  if (int q_lora = hp.integer(attention + "q_lora_rank").value_or(0); q_lora > 0)
    config["q_lora_rank"] = q_lora;
  const int rope = hp.required(arch + ".rope.dimension_count");
  // llama.cpp's MLA-absorbing converter writes key/value_length as the latent sizes and keeps the
  // per-head sizes in key/value_length_mla.
  const bool absorbed = hp.integer(attention + "key_length_mla").has_value();
  const std::string key_length = attention + (absorbed ? "key_length_mla" : "key_length");
  const int key = hp.required(key_length);
  if (key < rope) {
    throw Error(file_name, "metadata \"" + key_length + "\" (" + std::to_string(key) +
                               ") is smaller than \"" + arch + ".rope.dimension_count\" (" +
                               std::to_string(rope) + ")");
  }
  config["qk_rope_head_dim"] = rope;
  config["qk_nope_head_dim"] = key - rope;
  config["v_head_dim"] = hp.required(attention + (absorbed ? "value_length_mla" : "value_length"));
  // DeepSeek-V3 routes its experts with a sigmoid (expert_gating_func 2), V2 with a softmax.
  if (hp.integer(arch + ".expert_gating_func") == 2) config["model_type"] = "deepseek_v3";
  return config;
}

nlohmann::json dense_config(const Hyperparameters& hp, const std::string& arch,
                            const std::string& file_name) {
  const std::string attention = arch + ".attention.";
  nlohmann::json config;
  if (auto kv_heads = hp.integer(attention + "head_count_kv"))
    config["num_key_value_heads"] = *kv_heads;
  const std::optional<int> key = hp.integer(attention + "key_length");
  const std::optional<int> value = hp.integer(attention + "value_length");
  if (key && value && *key != *value) {
    throw Error(file_name, "metadata \"" + attention + "key_length\" (" + std::to_string(*key) +
                               ") differs from \"" + attention + "value_length\" (" +
                               std::to_string(*value) +
                               "); kvrank's dense layouts need one head size");
  }
  if (key || value) config["head_dim"] = key ? *key : *value;
  return config;
}

nlohmann::json synthesize_config(const GgufFile& file, const std::string& file_name) {
  const Hyperparameters hp(file, file_name);
  const std::string arch = hp.architecture();
  const Architecture& known = find_architecture(arch, file_name);
  nlohmann::json config =
      arch == "deepseek2" ? mla_config(hp, arch, file_name) : dense_config(hp, arch, file_name);
  if (!config.contains("model_type")) config["model_type"] = known.model_type;
  config["num_attention_heads"] = hp.required(arch + ".attention.head_count");
  config["hidden_size"] = hp.required(arch + ".embedding_length");
  config["num_hidden_layers"] = hp.required(arch + ".block_count");
  return config;
}

bool is_norm_gain(const std::string& name) {
  return name.ends_with(".self_attn.q_norm.weight") || name.ends_with(".self_attn.k_norm.weight");
}

// Gemma's converter adds 1 to every RMSNorm gain; the HF gain is the stored one minus 1, produced
// as float32 when the tensor is first read (the source view stays valid with the memory map).
class UnshiftedGain final : public DeferredBytes {
 public:
  explicit UnshiftedGain(TensorView source) : source_(std::move(source)) {}

  std::size_t size() const noexcept override {
    return static_cast<std::size_t>(source_.numel()) * sizeof(float);
  }

  std::span<const std::byte> get() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (values_.empty() && source_.numel() > 0) {
      values_ = to_f32(source_);
      for (float& value : values_) value -= 1.0f;
    }
    return std::as_bytes(std::span<const float>(values_));
  }

  void release() const noexcept override {
    const std::lock_guard<std::mutex> lock(mutex_);
    values_ = {};
  }

 private:
  TensorView source_;
  mutable std::mutex mutex_;
  mutable std::vector<float> values_;
};

TensorView unshifted_gain(const TensorView& tensor) {
  TensorView copy = tensor;
  copy.dtype = DType::F32;
  copy.bytes = {};
  copy.deferred = std::make_shared<UnshiftedGain>(tensor);
  return copy;
}

void check_attention_types(const GgufFile& file, const std::string& file_name) {
  for (const GgufUnsupportedTensor& tensor : file.unsupported) {
    if (hf_name(tensor.name)) {
      throw Error(file_name, tensor.name,
                  "GGML type " + tensor.ggml_type +
                      " is not supported by kvrank (it dequantizes F32, F16, BF16, Q8_0, Q4_0, "
                      "Q4_K, Q5_K and Q6_K)");
    }
  }
}

// Newer llama.cpp converters may store MLA's kv_b_proj only split and transposed (attn_k_b,
// attn_v_b); kvrank reads the unsplit tensor.
void check_mla_kv_b(const GgufCheckpoint& result, const std::string& file_name) {
  const auto has = [&](std::string_view suffix) {
    return std::any_of(result.tensors.begin(), result.tensors.end(),
                       [&](const TensorView& t) { return t.name.ends_with(suffix); });
  };
  if (has(".attn_k_b.weight") && !has(".self_attn.kv_b_proj.weight")) {
    throw Error(file_name,
                "this MLA GGUF stores kv_b_proj only as attn_k_b/attn_v_b; kvrank needs "
                "blk.N.attn_kv_b.weight (convert with a llama.cpp that writes it)");
  }
}

// llama-gguf-split writes a model as N files whose first holds the metadata; kvrank reads one file.
void check_not_split(const GgufFile& file, const std::string& file_name) {
  const std::optional<int> count = Hyperparameters(file, file_name).integer("split.count");
  if (count && *count > 1) {
    throw Error(file_name, "this is one part of a GGUF split into " + std::to_string(*count) +
                               " files; merge them first (llama-gguf-split --merge)");
  }
}

}  // namespace

GgufCheckpoint gguf_checkpoint(GgufFile file, const std::string& file_name) {
  GgufCheckpoint result;
  check_not_split(file, file_name);
  result.config = synthesize_config(file, file_name);
  check_attention_types(file, file_name);
  const bool gemma = result.config["model_type"].get<std::string>().starts_with("gemma");
  for (TensorView& tensor : file.tensors) {
    if (std::optional<std::string> name = hf_name(tensor.name)) {
      tensor.stored_name = std::move(tensor.name);
      tensor.name = std::move(*name);
      if (gemma && is_norm_gain(tensor.name)) tensor = unshifted_gain(tensor);
    }
    result.tensors.push_back(std::move(tensor));
  }
  if (result.config.contains("kv_lora_rank")) check_mla_kv_b(result, file_name);
  return result;
}

}  // namespace kvrank

// GGUF tensor names and hyperparameters mapped to their Hugging Face equivalents (gguf.hpp).
#include <algorithm>
#include <array>
#include <functional>
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

// The GGML types kvrank dequantizes, for the refusal of the others.
constexpr std::string_view kDequantized =
    "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS";
// The key half of MLA's split kv_b (attn_k_b), under its Hugging Face-style name.
constexpr std::string_view kKeyHalf = ".self_attn.k_b_proj.weight";

// `blk.{i}.<gguf suffix>` -> `model.layers.{i}.<hf suffix>`.
struct AttentionName {
  std::string_view gguf;
  std::string_view hf;
};
constexpr std::array<AttentionName, 21> kAttentionNames{{
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_qkv.weight", "self_attn.qkv_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
    {"attn_qkv.bias", "self_attn.qkv_proj.bias"},
    {"attn_k_b.weight", "self_attn.k_b_proj.weight"},  // MLA's split kv_b (joined_kv_b below)
    {"attn_v_b.weight", "self_attn.v_b_proj.weight"},
    {"attn_norm.weight", "input_layernorm.weight"},  // --fold-input-norm
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
      return "model.layers." + std::string(digits) + "." + std::string(entry.hf);
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
    throw Error(name_,
                "metadata has no \"" + excerpt(key) + "\" (needed for the attention geometry)");
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
  // Tells DeepSeek-V3 (2: sigmoid routing) from V2 (softmax) for the model-type table.
  if (auto gating = hp.integer(arch + ".expert_gating_func"))
    config["expert_gating_func"] = *gating;
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
  const bool mla = hp.integer(arch + ".attention.kv_lora_rank").has_value();
  nlohmann::json config = mla ? mla_config(hp, arch, file_name) : dense_config(hp, arch, file_name);
  config["gguf_architecture"] = arch;  // the layout layer's model-type table reads it
  config["num_attention_heads"] = hp.required(arch + ".attention.head_count");
  config["hidden_size"] = hp.required(arch + ".embedding_length");
  config["num_hidden_layers"] = hp.required(arch + ".block_count");
  return config;
}

// Float32 values produced when first read (the sources stay valid with the memory map): an MLA
// kv_b_proj assembled from its split halves, or the refusal of a type kvrank cannot dequantize.
class ProducedValues final : public DeferredBytes {
 public:
  using Producer = std::function<std::vector<float>()>;
  ProducedValues(std::size_t count, Producer produce)
      : count_(count), produce_(std::move(produce)) {}

  std::size_t size() const noexcept override { return count_ * sizeof(float); }

  std::span<const std::byte> get() const override {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (values_.empty() && count_ > 0) values_ = produce_();
    return std::as_bytes(std::span<const float>(values_));
  }

  void release() const noexcept override {
    const std::lock_guard<std::mutex> lock(mutex_);
    values_ = {};
  }

 private:
  std::size_t count_;
  Producer produce_;
  mutable std::mutex mutex_;
  mutable std::vector<float> values_;
};

TensorView produced_tensor(std::string name, const std::string& file,
                           std::vector<std::int64_t> shape, ProducedValues::Producer produce) {
  TensorView view;
  view.name = std::move(name);
  view.file = file;
  view.dtype = DType::F32;
  view.shape = std::move(shape);
  view.deferred =
      std::make_shared<ProducedValues>(static_cast<std::size_t>(view.numel()), std::move(produce));
  return view;
}

// An attention tensor of a type kvrank cannot dequantize: listed (its shape checks like any
// other), refused by name and type only when read, so `--repr qk` is not blocked by `attn_v`.
TensorView refused_when_read(const GgufUnsupportedTensor& tensor, std::string hf,
                             const std::string& file_name) {
  TensorView view = produced_tensor(
      std::move(hf), file_name, tensor.shape,
      [file_name, stored = tensor.name, type = tensor.ggml_type]() -> std::vector<float> {
        throw Error(file_name, stored,
                    "GGML type " + type + " is not supported by kvrank (it dequantizes " +
                        std::string(kDequantized) + ")");
      });
  view.stored_name = tensor.name;
  return view;
}

// Newer llama.cpp converters store MLA's kv_b_proj [H·(n + v), c] only split: attn_k_b [H, c, n]
// (each head's key part transposed) and attn_v_b [H, v, c]. kvrank reassembles it when read.
std::optional<TensorView> joined_kv_b(const std::vector<TensorView>& tensors, const TensorView& k_b,
                                      const std::string& file_name) {
  const std::string prefix = k_b.name.substr(0, k_b.name.size() - kKeyHalf.size());
  const auto has = [&](const std::string& name) {
    return std::any_of(tensors.begin(), tensors.end(),
                       [&](const TensorView& t) { return t.name == name; });
  };
  if (has(prefix + ".self_attn.kv_b_proj.weight")) return std::nullopt;
  const auto v_b = std::find_if(tensors.begin(), tensors.end(), [&](const TensorView& t) {
    return t.name == prefix + ".self_attn.v_b_proj.weight";
  });
  const bool shapes_fit = v_b != tensors.end() && k_b.shape.size() == 3 && v_b->shape.size() == 3 &&
                          k_b.shape[0] == v_b->shape[0] && k_b.shape[1] == v_b->shape[2];
  if (!shapes_fit) {
    throw Error(file_name, k_b.stored_name,
                "expected attn_v_b beside it, of shape [heads, v_head_dim, " +
                    std::to_string(k_b.shape.size() == 3 ? k_b.shape[1] : 0) +
                    "] (MLA's split kv_b), found " +
                    (v_b == tensors.end() ? std::string("none") : v_b->shape_string()));
  }
  const std::int64_t heads = k_b.shape[0], latent = k_b.shape[1], nope = k_b.shape[2];
  const std::int64_t v_dim = v_b->shape[1];
  return produced_tensor(
      prefix + ".self_attn.kv_b_proj.weight", file_name, {heads * (nope + v_dim), latent},
      [key_half = k_b, value_half = *v_b, heads, latent, nope, v_dim]() {
        const std::vector<float> keys = to_f32(key_half), values = to_f32(value_half);
        std::vector<float> rows;
        rows.reserve(static_cast<std::size_t>(heads * (nope + v_dim) * latent));
        for (std::int64_t h = 0; h < heads; ++h) {
          for (std::int64_t r = 0; r < nope; ++r)  // column r of k_b[h]
            for (std::int64_t c = 0; c < latent; ++c)
              rows.push_back(keys[static_cast<std::size_t>((h * latent + c) * nope + r)]);
          const auto head = values.begin() + static_cast<std::ptrdiff_t>(h * v_dim * latent);
          rows.insert(rows.end(), head, head + static_cast<std::ptrdiff_t>(v_dim * latent));
        }
        return rows;
      });
}

}  // namespace

GgufCheckpoint gguf_checkpoint(GgufFile file, const std::string& file_name) {
  GgufCheckpoint result;
  result.config = synthesize_config(file, file_name);
  for (TensorView& tensor : file.tensors) {
    if (std::optional<std::string> name = hf_name(tensor.name)) {
      tensor.stored_name = std::move(tensor.name);
      tensor.name = std::move(*name);
    }
    result.tensors.push_back(std::move(tensor));
  }
  for (const GgufUnsupportedTensor& tensor : file.unsupported) {
    if (std::optional<std::string> name = hf_name(tensor.name))
      result.tensors.push_back(refused_when_read(tensor, std::move(*name), file_name));
  }
  const std::size_t count = result.tensors.size();
  for (std::size_t i = 0; i < count; ++i) {
    if (!result.tensors[i].name.ends_with(kKeyHalf)) continue;
    if (auto kv_b = joined_kv_b(result.tensors, result.tensors[i], file_name))
      result.tensors.push_back(std::move(*kv_b));
  }
  return result;
}

std::optional<GgufSplit> gguf_split(const GgufFile& file, const std::string& file_name) {
  const Hyperparameters hp(file, file_name);
  const std::optional<int> count = hp.integer("split.count");
  if (!count || *count <= 1) return std::nullopt;
  const int index = hp.integer("split.no").value_or(0);
  if (index >= *count)
    throw Error(file_name, "metadata \"split.no\" (" + std::to_string(index) +
                               ") is not below \"split.count\" (" + std::to_string(*count) + ")");
  return GgufSplit{index, *count};
}

std::string gguf_split_part_name(const std::string& first, int index, int count) {
  const auto number = [](int value) {
    std::string digits = std::to_string(value);
    return std::string(digits.size() < 5 ? 5 - digits.size() : 0, '0') + digits;
  };
  const std::string first_suffix = "-" + number(1) + "-of-" + number(count) + ".gguf";
  if (!first.ends_with(first_suffix))
    throw Error(first, "this is the first part of a GGUF split into " + std::to_string(count) +
                           " files, but its name does not end in " + first_suffix +
                           " (llama-gguf-split's naming), so the other parts cannot be found");
  return first.substr(0, first.size() - first_suffix.size()) + "-" + number(index + 1) + "-of-" +
         number(count) + ".gguf";
}

}  // namespace kvrank

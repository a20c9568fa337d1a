// Hybrids (docs/families.md): models whose layers are attention layers or Mamba / linear-attention
// blocks. Only the attention layers have heads; config.json says which they are, in one of the
// forms transformers' configurations use:
//   layer_types        ["mamba", "attention", …]                      Granite 4.0 hybrid
//                      ["linear_attention", …, "full_attention", …]   Qwen3-Next
//   layers_block_type  the same list under its older name (Jamba's and Granite's property);
//                      ["mamba", "hybrid", …]: a hybrid layer is a Mamba layer that a shared
//                      attention block precedes (Zamba 2)
//   attn_layer_period, attn_layer_offset: layer i has attention when i % period == offset (Jamba)
//   full_attention_interval n: layer i has attention when (i + 1) % n == 0 (Qwen3-Next)
//   attn_layer_indices [i, …]: the attention layers themselves, Mamba 2 in the others (Bamba)
// A layer count from config.json is checked against kvrank's limit before any list is built.
// The layer numbers reported are the model's own: a layer's index in these lists and in its tensor
// names.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/base/text.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {
namespace {

// The layer kinds of the lists, and whether such a layer has attention heads.
struct LayerKind {
  std::string_view name;
  bool attention;
};
constexpr std::array<LayerKind, 6> kLayerKinds{{{"attention", true},
                                                {"full_attention", true},
                                                {"sliding_attention", true},
                                                {"hybrid", true},
                                                {"mamba", false},
                                                {"linear_attention", false}}};

/// Each layer's kind, as config.json says it; kinds.size() is the model's layer count.
struct LayerKinds {
  std::vector<std::string> kinds;
  std::string key;  // the config.json field they come from, for errors
};

bool is_attention(const std::string& kind) {
  return std::any_of(kLayerKinds.begin(), kLayerKinds.end(),
                     [&](const LayerKind& known) { return known.attention && known.name == kind; });
}

std::string kind_list() {
  std::string text;
  for (const LayerKind& kind : kLayerKinds)
    text += (text.empty() ? "" : ", ") + std::string(kind.name);
  return text;
}

/// The kinds listed under `key`, each a known one; nullopt when config.json has no such list.
std::optional<LayerKinds> listed_kinds(const Checkpoint& checkpoint, const char* key) {
  const auto it = checkpoint.config()->find(key);
  if (it == checkpoint.config()->end() || it->is_null()) return std::nullopt;
  const std::string file = checkpoint.config_path().string();
  if (!it->is_array() || it->size() > static_cast<std::size_t>(kMaxLayers))
    throw Error(file, std::string("field \"") + key + "\": expected a list of layer kinds, found " +
                          json_excerpt(*it));
  LayerKinds listed{{}, key};
  for (const auto& entry : *it) {
    const std::string kind = entry.is_string() ? entry.get<std::string>() : "";
    const bool known =
        std::any_of(kLayerKinds.begin(), kLayerKinds.end(),
                    [&](const LayerKind& known_kind) { return known_kind.name == kind; });
    if (!known)
      throw Error(file, std::string("field \"") + key + "\": layer " +
                            std::to_string(listed.kinds.size()) + " is " + json_excerpt(entry) +
                            " (kvrank knows " + kind_list() + ")");
    listed.kinds.push_back(kind);
  }
  return listed;
}

/// config.json's layer count (num_hidden_layers, else one more than the tensors' largest layer
/// index), at most kMaxLayers: a count of 2^31 − 1 would allocate gigabytes of layer kinds.
int rule_layer_count(const Checkpoint& checkpoint, int found) {
  const int layers = config_int(checkpoint, "num_hidden_layers").value_or(found);
  if (layers > kMaxLayers)
    throw Error(checkpoint.config_path().string(),
                "field \"num_hidden_layers\": " + std::to_string(layers) +
                    " layers is more than kvrank reads (at most " + std::to_string(kMaxLayers) +
                    ")");
  return layers;
}

/// Bamba's attn_layer_indices: each a layer number below `layers`.
std::optional<LayerKinds> indexed_kinds(const Checkpoint& checkpoint, int layers) {
  const char* key = "attn_layer_indices";
  const auto it = checkpoint.config()->find(key);
  if (it == checkpoint.config()->end() || it->is_null()) return std::nullopt;
  const std::string file = checkpoint.config_path().string();
  if (!it->is_array())
    throw Error(file, std::string("field \"") + key +
                          "\": expected a list of layer numbers, found " + json_excerpt(*it));
  LayerKinds indexed{std::vector<std::string>(static_cast<std::size_t>(layers), "mamba"), key};
  for (const auto& entry : *it) {
    const bool in_range = entry.is_number_integer() && entry.get<std::int64_t>() >= 0 &&
                          entry.get<std::int64_t>() < layers;
    if (!in_range)
      throw Error(file, std::string("field \"") + key + "\": " + json_excerpt(entry) +
                            " is not a layer number of this model (0-" +
                            std::to_string(layers - 1) + ", num_hidden_layers " +
                            std::to_string(layers) + ")");
    indexed.kinds[static_cast<std::size_t>(entry.get<std::int64_t>())] = "attention";
  }
  return indexed;
}

/// The kinds of a rule (period and offset, or interval) over config.json's layer count.
LayerKinds ruled_kinds(const Checkpoint& checkpoint, int layers) {
  const auto period = config_int(checkpoint, "attn_layer_period");
  const auto offset = config_int(checkpoint, "attn_layer_offset");
  const auto interval = config_int(checkpoint, "full_attention_interval");
  if ((!period || !offset) && !interval)
    throw Error(checkpoint.config_path().string(),
                "does not say which layers of this hybrid have attention (looked for layer_types, "
                "layers_block_type, attn_layer_indices, attn_layer_period with attn_layer_offset, "
                "and full_attention_interval)");
  if (period ? *period < 1 : *interval < 1)
    throw Error(checkpoint.config_path().string(), period ? "attn_layer_period must be at least 1"
                                                          : "full_attention_interval must be "
                                                            "at least 1");
  LayerKinds ruled{{}, period ? "attn_layer_period/attn_layer_offset" : "full_attention_interval"};
  for (int layer = 0; layer < layers; ++layer) {
    const bool attention = period ? layer % *period == *offset : (layer + 1) % *interval == 0;
    ruled.kinds.emplace_back(attention ? "attention" : (period ? "mamba" : "linear_attention"));
  }
  return ruled;
}

LayerKinds layer_kinds(const Checkpoint& checkpoint, int found) {
  if (!checkpoint.config())
    throw Error(checkpoint.path().string(),
                "this hybrid's attention layers are named by config.json, which it has not");
  for (const char* key : {"layer_types", "layers_block_type"})
    if (auto listed = listed_kinds(checkpoint, key)) return *listed;
  const int layers = rule_layer_count(checkpoint, found);
  if (auto indexed = indexed_kinds(checkpoint, layers)) return *indexed;
  return ruled_kinds(checkpoint, layers);
}

/// The kinds, with layout.num_layers and layout.attention_layers set from them (num_hidden_layers,
/// when config.json has it, must agree).
LayerKinds set_layers(const Checkpoint& checkpoint, int found, ModelLayout& layout) {
  LayerKinds kinds = layer_kinds(checkpoint, found);
  const int layers = static_cast<int>(kinds.kinds.size());
  if (const auto configured = config_int(checkpoint, "num_hidden_layers");
      configured && *configured != layers)
    throw Error(checkpoint.config_path().string(), kinds.key + " lists " + std::to_string(layers) +
                                                       " layers, num_hidden_layers says " +
                                                       std::to_string(*configured));
  layout.num_layers = layers;
  layout.attention_layers.clear();
  for (int layer = 0; layer < layers; ++layer)
    if (is_attention(kinds.kinds[layer])) layout.attention_layers.push_back(layer);
  return kinds;
}

void check_some_attention(const Checkpoint& checkpoint, const LayerKinds& kinds,
                          const ModelLayout& layout) {
  if (layout.attention_layers.empty())
    throw Error(checkpoint.config_path().string(), kinds.key + " names no attention layer");
}

}  // namespace

void set_attention_layers(const Checkpoint& checkpoint, int found, ModelLayout& layout) {
  check_some_attention(checkpoint, set_layers(checkpoint, found, layout), layout);
}

void set_hybrid_layers(const Checkpoint& checkpoint, const std::vector<std::string>& templates,
                       int found, ModelLayout& layout) {
  const LayerKinds kinds = set_layers(checkpoint, found, layout);
  const int layers = layout.num_layers;
  const std::string file = checkpoint.config_path().string();
  for (int layer = 0; layer < std::max(layers, found); ++layer) {
    const bool attention = layer < layers && is_attention(kinds.kinds[layer]);
    for (const std::string& name_template : templates) {
      const std::string name = layer_name(name_template, layer);
      const bool present = checkpoint.find(name) != nullptr;
      if (present && !attention)
        throw Error(checkpoint.path().string(), name,
                    layer < layers
                        ? "layer " + std::to_string(layer) + " is " + kinds.kinds[layer] + " (" +
                              kinds.key + " in " + file + "), without attention projections"
                        : "the model has " + std::to_string(layers) + " layers (" + kinds.key +
                              " in " + file + ")");
      if (!present && attention)
        throw Error(checkpoint.path().string(), name,
                    "no such tensor in the checkpoint (" + kinds.key + " in " + file +
                        " says layer " + std::to_string(layer) + " is " + kinds.kinds[layer] + ")");
    }
  }
  check_some_attention(checkpoint, kinds, layout);
}

}  // namespace kvrank::detail

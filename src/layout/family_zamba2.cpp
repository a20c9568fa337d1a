// Zamba 2 (docs/families.md, "Zamba 2"): Mamba layers, some of them ("hybrid" in
// layers_block_type) preceded by one of `num_mem_blocks` attention blocks shared in turn: the k-th
// hybrid layer (k counts hybrid layers only) uses block k % num_mem_blocks. The block acts on the
// concatenation [hidden state; original embeddings], so q, k and v are [rows, 2·hidden_size] and
// o_proj is [hidden_size, H·d_h]. With use_shared_attention_adapter, block tensors include one
// low-rank adapter per hybrid layer that uses the block, and the k-th hybrid layer's query is
// q_proj(x) + B_k(A_k(x)): its effective W_q is W_q + B_k·A_k (k and v likewise; o has none).
//
// Tensors of block b, stored under a layer L that uses it (the block's first layer in a saved
// checkpoint; later layers' tied copies may be there or not):
//   <prefix>L.shared_transformer.self_attn.{q,k,v,o}_proj.weight
//   <prefix>L.shared_transformer.self_attn.linear_{q,k,v}_adapter_list.{k}.0.weight  A [r, 2·d]
//   <prefix>L.shared_transformer.self_attn.linear_{q,k,v}_adapter_list.{k}.1.weight  B [rows, r]
// Each layer is reported under its own number with its effective projections; layers sharing a
// block without adapters have the same heads, hence the same numbers.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/base/layer_list.hpp"
#include "layout/family_detail.hpp"
#include "layout/fp8_blocks.hpp"
#include "layout/layer_scan.hpp"

namespace kvrank::detail {

namespace {

constexpr const char* kBlock = ".shared_transformer.self_attn.";
constexpr const char* kZamba2Marker = ".shared_transformer.self_attn.q_proj.weight";

/// The k of hybrid layer `layer`: its position among the attention layers (transformers' layer_dic
/// over hybrid_layer_ids), which picks its block (k % blocks) and its adapters.
int hybrid_index(const ModelLayout& layout, int layer) {
  const auto& layers = layout.attention_layers;
  return static_cast<int>(std::lower_bound(layers.begin(), layers.end(), layer) - layers.begin());
}

/// The hybrid layers that use `layer`'s block, in order: the block's tensors are under one of them.
std::vector<int> block_layers(const ModelLayout& layout, const SharedBlockTensors& tensors,
                              int layer) {
  std::vector<int> layers;
  const int block = hybrid_index(layout, layer) % tensors.blocks;
  for (std::size_t k = block; k < layout.attention_layers.size(); k += tensors.blocks)
    layers.push_back(layout.attention_layers[k]);
  return layers;
}

std::string block_name(const SharedBlockTensors& tensors, int layer, const std::string& suffix) {
  return tensors.prefix + std::to_string(layer) + kBlock + suffix;
}

/// The block tensor `suffix` of `layer`: under the first layer of its block that has it; an error
/// naming it under the block's first layer when none has.
std::string find_block_tensor(const Checkpoint& checkpoint, const ModelLayout& layout,
                              const SharedBlockTensors& tensors, int layer,
                              const std::string& suffix) {
  const std::vector<int> layers = block_layers(layout, tensors, layer);
  for (int holder : layers)
    if (checkpoint.find(block_name(tensors, holder, suffix)))
      return block_name(tensors, holder, suffix);
  throw Error(checkpoint.path().string(), block_name(tensors, layers.front(), suffix),
              "no such tensor in the checkpoint, nor under the other layers sharing its attention "
              "block (layer " +
                  std::to_string(layer) + " uses block " +
                  std::to_string(hybrid_index(layout, layer) % tensors.blocks) + " of " +
                  std::to_string(tensors.blocks) + ", with layers " + format_layer_list(layers) +
                  ": layers_block_type and num_mem_blocks in " + checkpoint.config_path().string() +
                  ")");
}

std::string adapter_suffix(char role, int index, int part) {
  return std::string("linear_") + role + "_adapter_list." + std::to_string(index) + "." +
         std::to_string(part) + ".weight";
}

/// Rows of a role's projection: H·d_h for q, H_kv·d_h for k and v.
Index role_rows(const ModelLayout& layout, char role) {
  return Index{role == 'q' ? layout.heads : layout.kv_heads} * layout.head_dim;
}

/// W + B·A for q, k or v of `layer` (W alone without adapters).
RowMatrixF effective_projection(const Checkpoint& checkpoint, const ModelLayout& layout,
                                const SharedBlockTensors& tensors, int layer, char role) {
  const Index rows = role_rows(layout, role);
  const Index rank = tensors.adapter_rank;
  const auto load = [&](const std::string& suffix, Index shape_rows, Index shape_cols) {
    return load_dequantized(checkpoint,
                            find_block_tensor(checkpoint, layout, tensors, layer, suffix),
                            shape_rows, shape_cols, tensors.source);
  };
  RowMatrixF weight = load(std::string(1, role) + "_proj.weight", rows, layout.d_model);
  if (rank == 0) return weight;
  const int index = hybrid_index(layout, layer);
  weight.noalias() += load(adapter_suffix(role, index, 1), rows, rank) *
                      load(adapter_suffix(role, index, 0), rank, layout.d_model);
  if (!weight.allFinite())
    throw Error(
        checkpoint.path().string(),
        find_block_tensor(checkpoint, layout, tensors, layer, adapter_suffix(role, index, 1)),
        "the adapter's product B·A added to the shared weights leaves float32's range");
  return weight;
}

/// A block tensor a layer reads: its name after kBlock, and its shape.
struct BlockTensor {
  std::string suffix;
  Index rows, cols;
};

/// Every block tensor `layer` reads: the q, k, v and o projections, and its own adapters.
std::vector<BlockTensor> layer_tensors(const ModelLayout& layout, const SharedBlockTensors& tensors,
                                       int layer) {
  const Index d = layout.d_model;
  const Index rank = tensors.adapter_rank;
  const int index = hybrid_index(layout, layer);
  std::vector<BlockTensor> wanted{{"o_proj.weight", tensors.hidden_size, role_rows(layout, 'q')}};
  for (char role : {'q', 'k', 'v'}) {
    wanted.push_back({std::string(1, role) + "_proj.weight", role_rows(layout, role), d});
    if (rank == 0) continue;
    wanted.push_back({adapter_suffix(role, index, 0), rank, d});
    wanted.push_back({adapter_suffix(role, index, 1), role_rows(layout, role), rank});
  }
  return wanted;
}

int required_int(const Checkpoint& checkpoint, const char* key) {
  if (const std::optional<int> value = config_int(checkpoint, key)) return *value;
  throw Error(checkpoint.config_path().string(),
              std::string("Zamba 2 needs \"") + key + "\" in config.json");
}

/// Heads, head size and widths from config.json (transformers' Zamba2Config: attention_head_dim =
/// 2·hidden_size / num_attention_heads unless given), each flag winning.
void set_geometry(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                  ModelLayout& layout, SharedBlockTensors& tensors) {
  tensors.hidden_size = required_int(checkpoint, "hidden_size");
  layout.d_model = 2 * tensors.hidden_size;
  layout.heads = overrides.heads.value_or(required_int(checkpoint, "num_attention_heads"));
  layout.kv_heads = overrides.kv_heads.value_or(
      config_int(checkpoint, "num_key_value_heads").value_or(layout.heads));
  if (layout.heads < 1 || layout.kv_heads < 1 || layout.heads % layout.kv_heads != 0)
    throw Error(checkpoint.config_path().string(),
                "num_attention_heads (" + std::to_string(layout.heads) +
                    ") must be a positive multiple of num_key_value_heads (" +
                    std::to_string(layout.kv_heads) + ")");
  layout.head_dim = overrides.head_dim.value_or(
      config_int(checkpoint, "attention_head_dim").value_or(layout.d_model / layout.heads));
  tensors.blocks = config_int(checkpoint, "num_mem_blocks").value_or(1);
  if (tensors.blocks < 1 || layout.head_dim < 1)
    throw Error(checkpoint.config_path().string(),
                "num_mem_blocks and attention_head_dim must be at least 1");
  if (config_bool(checkpoint, "use_shared_attention_adapter").value_or(false))
    tensors.adapter_rank = config_int(checkpoint, "adapter_rank").value_or(128);
  tensors.source = "from config: hidden_size " + std::to_string(tensors.hidden_size) +
                   " (attention input 2 × " + std::to_string(tensors.hidden_size) +
                   "), num_attention_heads " + std::to_string(layout.heads) +
                   ", num_key_value_heads " + std::to_string(layout.kv_heads) + ", head_dim " +
                   std::to_string(layout.head_dim) + ", adapter_rank " +
                   std::to_string(tensors.adapter_rank);
}

/// Block tensors only in hybrid layers: a q_proj under a Mamba layer means config.json and the
/// checkpoint disagree.
void check_no_block_outside(const Checkpoint& checkpoint, const ModelLayout& layout,
                            const std::string& prefix) {
  for (const TensorView& tensor : checkpoint.tensors()) {
    const std::optional<int> layer = template_layer(tensor, prefix, kZamba2Marker);
    if (layer && !has_attention(layout, *layer))
      throw Error(checkpoint.path().string(), tensor.name,
                  "layer " + std::to_string(*layer) + " is no hybrid layer (layers_block_type in " +
                      checkpoint.config_path().string() + "), without an attention block");
  }
}

}  // namespace

bool is_zamba2(const Checkpoint& checkpoint) {
  return scan_layers(checkpoint, kZamba2Marker).count > 0;
}

ModelLayout detect_zamba2(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  const LayerScan scan = scan_layers(checkpoint, kZamba2Marker);
  if (scan.count == 0)
    throw Error(checkpoint.path().string(),
                "Zamba 2 checkpoint without shared attention blocks: expected names like "
                "model.layers.2.shared_transformer.self_attn.q_proj.weight");
  ModelLayout layout;
  layout.family = Family::zamba2;
  layout.model_type = model_type_of(checkpoint).value_or("zamba2");
  set_attention_layers(checkpoint, scan.count, layout);
  check_no_block_outside(checkpoint, layout, scan.prefix);
  SharedBlockTensors tensors;
  tensors.prefix = scan.prefix;
  set_geometry(checkpoint, overrides, layout, tensors);
  layout.variant = attention_variant(layout.heads, layout.kv_heads);
  // Every layer's tensors are checked here, from their metadata: a missing adapter is named before
  // any layer is analysed.
  for (int layer : layout.attention_layers)
    for (const BlockTensor& wanted : layer_tensors(layout, tensors, layer))
      check_matrix_shape(
          checkpoint.at(find_block_tensor(checkpoint, layout, tensors, layer, wanted.suffix)),
          wanted.rows, wanted.cols, tensors.source);
  layout.tensors = std::move(tensors);
  return layout;
}

HeadFactors zamba2_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                           const SharedBlockTensors& tensors, int layer, Repr repr) {
  return projection_factors(
      repr, layout.heads, layout.kv_heads, layout.head_dim, [&](ProjectionRole role) {
        if (role == ProjectionRole::o)
          return FoldedRows{load_dequantized(
              checkpoint, find_block_tensor(checkpoint, layout, tensors, layer, "o_proj.weight"),
              tensors.hidden_size, role_rows(layout, 'q'), tensors.source)};
        const char name = role_name(role).front();
        return FoldedRows{effective_projection(checkpoint, layout, tensors, layer, name)};
      });
}

std::vector<std::string> zamba2_tensor_names(const ModelLayout& layout,
                                             const SharedBlockTensors& tensors, int layer) {
  std::vector<std::string> names;
  for (int holder : block_layers(layout, tensors, layer))
    for (const BlockTensor& wanted : layer_tensors(layout, tensors, layer)) {
      names.push_back(block_name(tensors, holder, wanted.suffix));
      names.push_back(scale_inv_name(names.back()));
    }
  return names;
}

}  // namespace kvrank::detail

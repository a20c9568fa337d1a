// Dense layouts (layout.cpp): tensor-name templates with a "{i}" layer slot, and the dense
// layouts as data (DenseSpec), found by their tensor names.
#include <algorithm>
#include <array>
#include <string_view>
#include <utility>

#include "layout/dense.hpp"
#include "layout/family_detail.hpp"
#include "layout/layer_scan.hpp"

namespace kvrank::detail {

// ---- tensor-name templates ("model.layers.{i}.self_attn.q_proj.weight") -----------------------

std::string replace_last(std::string text, std::string_view from, std::string_view to) {
  const auto at = text.rfind(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string layer_name(const std::string& name_template, int layer) {
  std::string name = name_template;
  const auto at = name.find(kLayerSlot);
  if (at != std::string::npos) name.replace(at, kLayerSlot.size(), std::to_string(layer));
  return name;
}

/// The layer indices present for a template: [first, last], or nullopt when no tensor matches.
std::optional<std::pair<int, int>> template_layers(const Checkpoint& checkpoint,
                                                   const std::string& name_template) {
  const auto slot = name_template.find(kLayerSlot);
  const std::string_view prefix = std::string_view(name_template).substr(0, slot);
  const std::string_view suffix = std::string_view(name_template).substr(slot + kLayerSlot.size());
  std::optional<std::pair<int, int>> range;
  for (const TensorView& tensor : checkpoint.tensors()) {
    const std::optional<int> layer = detail::template_layer(tensor, prefix, suffix);
    if (!layer) continue;
    if (!range) range = {*layer, *layer};
    range->first = std::min(range->first, *layer);
    range->second = std::max(range->second, *layer);
  }
  return range;
}

namespace {

/// The template of `tensor` when its name has the marker's form ("{i}" in place of the layer).
std::optional<std::string> marker_template(const TensorView& tensor, const MarkerName& marker) {
  for (std::string_view suffix : marker.suffixes) {
    if (suffix.empty()) continue;
    const auto split = detail::split_layer_name(tensor.name, suffix);
    if (!split || !split->before.ends_with(marker.stem)) continue;
    const std::string_view outer =
        split->before.substr(0, split->before.size() - marker.stem.size());
    const bool outer_fits =
        outer.empty() || (marker.outer == kAnyOuter ? outer.back() == '.' : outer == marker.outer);
    if (!outer_fits || !detail::layer_index(tensor, split->digits)) continue;
    return std::string(split->before) + std::string(kLayerSlot) + std::string(suffix);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> find_template(const Checkpoint& checkpoint, const MarkerName& marker) {
  for (const TensorView& tensor : checkpoint.tensors()) {
    if (auto name_template = marker_template(tensor, marker)) return name_template;
  }
  return std::nullopt;
}

namespace {

// ---- dense layouts as data ----------------------------------------------------------------------

struct FusedFamily {
  Family family;
  MarkerName marker;  // the fused tensor
  const char* fused_part;
  const char* output_part;
  QkvOrder order;
  Orientation orientation;
};

// In detection order: a family whose names another shares comes after it (bloom after falcon,
// qwen and gpt_bigcode after gpt2), so without a model type the older reading wins.
constexpr std::array<FusedFamily, 12> kFusedFamilies{{
    {Family::phi3,
     {kAnyOuter, "layers.", {".self_attn.qkv_proj.weight"}},
     "qkv_proj",
     "o_proj",
     QkvOrder::stacked,
     Orientation::out_in},
    {Family::gpt2,
     {"transformer.", "h.", {".attn.c_attn.weight"}},
     "c_attn",
     "c_proj",
     QkvOrder::stacked,
     Orientation::in_out},
    {Family::gpt_neox,
     {"gpt_neox.", "layers.", {".attention.query_key_value.weight"}},
     "query_key_value",
     "dense",
     QkvOrder::grouped,
     Orientation::out_in},
    {Family::falcon,
     {"transformer.", "h.", {".self_attention.query_key_value.weight"}},
     "query_key_value",
     "dense",
     QkvOrder::grouped,
     Orientation::out_in},
    // BloomAttention: fused_qkv.view(…, heads, 3, head_dim): falcon's MHA layout.
    {Family::bloom,
     {"transformer.", "h.", {".self_attention.query_key_value.weight"}},
     "query_key_value",
     "dense",
     QkvOrder::grouped,
     Orientation::out_in},
    // MptAttention: Wqkv(x).chunk(3) (or split into d, kv, kv with kv_n_heads).
    {Family::mpt,
     {"transformer.", "blocks.", {".attn.Wqkv.weight"}},
     "Wqkv",
     "out_proj",
     QkvOrder::stacked,
     Orientation::out_in},
    // BaichuanAttention: W_pack(x).unflatten(-1, (3, hidden)).
    {Family::baichuan,
     {kAnyOuter, "layers.", {".self_attn.W_pack.weight"}},
     "W_pack",
     "o_proj",
     QkvOrder::stacked,
     Orientation::out_in},
    // QWenAttention (Qwen v1): a Linear c_attn split into q, k, v — gpt2's names, torch's [out,
    // in].
    {Family::qwen,
     {"transformer.", "h.", {".attn.c_attn.weight"}},
     "c_attn",
     "c_proj",
     QkvOrder::stacked,
     Orientation::out_in},
    // GPTBigCodeAttention: a Linear c_attn; multi-query splits q [d] then k, v [d_h] each (grouped
    // with one KV head), multi-head views it as [heads, 3·head_dim] (grouped with H_kv = H).
    {Family::gpt_bigcode,
     {"transformer.", "h.", {".attn.c_attn.weight"}},
     "c_attn",
     "c_proj",
     QkvOrder::grouped,
     Orientation::out_in},
    // InternLM2Attention: wqkv viewed as [kv_heads, heads/kv_heads + 2, head_dim].
    {Family::internlm2,
     {"model.", "layers.", {".attention.wqkv.weight"}},
     "wqkv",
     "wo",
     QkvOrder::grouped,
     Orientation::out_in},
    // ChatGLM2/3 SelfAttention: with multi_query_attention, split into heads·d_h, groups·d_h,
    // groups·d_h; without, viewed as [heads, 3·d_h] (chatglm_order).
    {Family::chatglm,
     {"transformer.encoder.", "layers.", {".self_attention.query_key_value.weight"}},
     "query_key_value",
     "dense",
     QkvOrder::stacked,
     Orientation::out_in},
    // ChatGLM-6B (v1) SelfAttention: always viewed as [heads, 3·d_h], its own names.
    {Family::chatglm,
     {"transformer.", "layers.", {".attention.query_key_value.weight"}},
     "query_key_value",
     "dense",
     QkvOrder::grouped,
     Orientation::out_in},
}};

/// ChatGLM's row order: [Q; K; V] blocks with multi_query_attention, else per head q, k, v (the
/// grouped order with one query head per KV head) — ChatGLM2/3's `mixed_x_layer.view(…, heads,
/// 3·d_h)` and split into three, as ChatGLM-6B v1 always does.
QkvOrder chatglm_order(const Checkpoint& checkpoint) {
  return config_bool(checkpoint, "multi_query_attention").value_or(false) ? QkvOrder::stacked
                                                                          : QkvOrder::grouped;
}

bool template_present(const Checkpoint& checkpoint, const std::string& name_template) {
  return template_layers(checkpoint, name_template).has_value();
}

/// Llama-like: separate q/k/v/o projections, found by their key projection (K/V-only inputs such
/// as NPY folders of `layers.{i}.k_proj` have no queries).
std::optional<DenseSpec> find_llama(const Checkpoint& checkpoint) {
  constexpr MarkerName kKey{
      kAnyOuter,
      "layers.",
      {".self_attn.k_proj.weight", ".self_attn.k_proj", ".k_proj.weight", ".k_proj"}};
  const auto key_template = find_template(checkpoint, kKey);
  if (!key_template) return std::nullopt;
  DenseSpec spec{Family::llama, {}};
  for (ProjectionRole role : {ProjectionRole::q, ProjectionRole::k, ProjectionRole::v}) {
    std::string name_template =
        replace_last(*key_template, "k_proj", std::string(role_name(role)) + "_proj");
    // Only the key projection is required: each representation checks for the others it reads
    // (a checkpoint without v_proj can still be analysed for qk and k).
    if (role == ProjectionRole::k || template_present(checkpoint, name_template))
      spec.tensors.names[role] = name_template;
  }
  for (const char* output : {"o_proj", "out_proj", "dense"}) {  // llama …, OPT, phi-2
    std::string name_template = replace_last(*key_template, "k_proj", output);
    if (!template_present(checkpoint, name_template)) continue;
    spec.tensors.names[ProjectionRole::o] = std::move(name_template);
    break;
  }
  const std::string& file =
      checkpoint.at(layer_name(*key_template, template_layers(checkpoint, *key_template)->first))
          .file;
  if (file.ends_with(".npy") || file.ends_with(".npz")) spec.family = Family::npy;
  return spec;
}

/// TransformerLens's HookedTransformer state dict: blocks.{i}.attn.W_Q [H, d, d_h], W_K and W_V
/// (or, with grouped-query attention, its parameters _W_K and _W_V) [H_kv, d, d_h], W_O [H, d_h,
/// d].
std::optional<DenseSpec> find_transformer_lens(const Checkpoint& checkpoint) {
  constexpr MarkerName kKey{kAnyOuter, "blocks.", {".attn.W_K", ".attn._W_K"}};
  const auto key_template = find_template(checkpoint, kKey);
  if (!key_template) return std::nullopt;
  const bool grouped = key_template->ends_with("._W_K");
  DenseSpec spec{Family::transformer_lens, {}};
  spec.tensors.orientation = Orientation::heads_in_out;
  spec.tensors.names[ProjectionRole::k] = *key_template;
  for (const auto& [role, name] :
       {std::pair{ProjectionRole::q, "W_Q"}, std::pair{ProjectionRole::v, grouped ? "_W_V" : "W_V"},
        std::pair{ProjectionRole::o, "W_O"}}) {
    std::string name_template = replace_last(*key_template, grouped ? "_W_K" : "W_K", name);
    if (template_present(checkpoint, name_template)) spec.tensors.names[role] = name_template;
  }
  return spec;
}

std::optional<DenseSpec> find_fused(const Checkpoint& checkpoint, const FusedFamily& family) {
  const auto fused_template = find_template(checkpoint, family.marker);
  if (!fused_template) return std::nullopt;
  DenseSpec spec{family.family, {}};
  spec.tensors.names[ProjectionRole::fused_qkv] = *fused_template;
  spec.tensors.qkv_order =
      family.family == Family::chatglm ? chatglm_order(checkpoint) : family.order;
  spec.tensors.orientation = family.orientation;
  std::string output = replace_last(*fused_template, family.fused_part, family.output_part);
  if (template_present(checkpoint, output)) spec.tensors.names[ProjectionRole::o] = output;
  return spec;
}

}  // namespace

/// The dense layout of a checkpoint by its tensor names; `only` restricts to one family.
std::optional<DenseSpec> find_dense(const Checkpoint& checkpoint, std::optional<Family> only) {
  for (const FusedFamily& family : kFusedFamilies) {
    if (only && *only != family.family) continue;
    if (auto spec = find_fused(checkpoint, family)) return spec;
  }
  if (!only || *only == Family::transformer_lens)
    if (auto spec = find_transformer_lens(checkpoint)) return spec;
  if (!only || *only == Family::llama || *only == Family::npy) return find_llama(checkpoint);
  return std::nullopt;
}

}  // namespace kvrank::detail

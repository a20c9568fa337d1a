// Dense layouts (layout.cpp): the head geometry from config.json and flags, resolved against
// the first layer's tensor shapes.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

#include "kvrank/base/error.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {
namespace {

using detail::config_bool;
using detail::config_int;
using detail::config_string;

// ---- head geometry ------------------------------------------------------------------------------

std::optional<int> first_config_int(const Checkpoint& checkpoint,
                                    std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    if (auto value = config_int(checkpoint, key)) return value;
  return std::nullopt;
}

/// Falcon's key/value head count from its three config flags (HF FalconConfig defaults).
std::optional<int> falcon_kv_heads(const Checkpoint& checkpoint, std::optional<int> heads) {
  if (config_bool(checkpoint, "new_decoder_architecture").value_or(false)) {
    auto kv = first_config_int(checkpoint, {"num_kv_heads", "n_head_kv"});
    return kv ? kv : heads;
  }
  if (config_bool(checkpoint, "multi_query").value_or(true)) return 1;
  return heads;
}

}  // namespace

Geometry config_geometry(const Checkpoint& checkpoint, Family family) {
  Geometry geometry;
  if (!checkpoint.config()) return geometry;
  geometry.heads =
      first_config_int(checkpoint, {"num_attention_heads", "n_head", "num_heads", "n_heads"});
  geometry.d_model = first_config_int(checkpoint, {"hidden_size", "n_embd", "d_model"});
  geometry.head_dim = first_config_int(checkpoint, {"head_dim", "kv_channels"});  // chatglm
  geometry.num_layers =
      first_config_int(checkpoint, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"});
  if (family == Family::falcon) {
    geometry.kv_heads = falcon_kv_heads(checkpoint, geometry.heads);
  } else if (family == Family::chatglm) {
    geometry.kv_heads = config_bool(checkpoint, "multi_query_attention").value_or(false)
                            ? config_int(checkpoint, "multi_query_group_num")
                            : geometry.heads;
  } else if (family_info(family).mha_only) {
    geometry.kv_heads = geometry.heads;
  } else {
    geometry.kv_heads =
        first_config_int(checkpoint, {"num_key_value_heads", "num_kv_heads", "n_head_kv"});
    if (!geometry.kv_heads && config_bool(checkpoint, "multi_query").value_or(false))
      geometry.kv_heads = 1;
    if (!geometry.kv_heads) geometry.kv_heads = geometry.heads;
  }
  geometry.d_model_given = geometry.d_model.has_value();
  if (geometry.heads || geometry.d_model || geometry.head_dim)
    geometry.add_source(checkpoint.config_path().string());
  return geometry;
}

void apply_overrides(const LayoutOverrides& overrides, Geometry& geometry) {
  if (overrides.heads) {
    geometry.heads = overrides.heads;
    geometry.add_source("--heads");
  }
  if (overrides.kv_heads) {
    geometry.kv_heads = overrides.kv_heads;
    geometry.add_source("--kv-heads");
  }
  if (overrides.head_dim) {
    geometry.head_dim = overrides.head_dim;
    geometry.add_source("--head-dim");
  }
}

// ---- resolving the geometry against layer shapes ------------------------------------------------

namespace {

/// A 2-D tensor's [out, in] sizes, whatever its storage orientation; a per-head tensor [n, in, out]
/// has n·out outputs.
std::pair<Index, Index> out_in_shape(const TensorView& tensor, Orientation orientation) {
  if (orientation == Orientation::heads_in_out) {
    if (tensor.shape.size() != 3)
      throw Error(
          tensor.file, tensor.name,
          "expected a 3-D per-head tensor [heads, in, out], found shape " + tensor.shape_string());
    return {static_cast<Index>(tensor.shape[0]) * tensor.shape[2],
            static_cast<Index>(tensor.shape[1])};
  }
  if (tensor.shape.size() != 2)
    throw Error(tensor.file, tensor.name,
                "expected a 2-D projection matrix, found shape " + tensor.shape_string());
  const Index first = static_cast<Index>(tensor.shape[0]);
  const Index second = static_cast<Index>(tensor.shape[1]);
  return orientation == Orientation::in_out ? std::pair{second, first} : std::pair{first, second};
}

/// total / part as an int; 0 (later reported as an invalid geometry) when it cannot be one.
int ratio(Index total, int part) {
  if (part <= 0 || total / part > std::numeric_limits<int>::max()) return 0;
  return static_cast<int>(total / part);
}

}  // namespace

namespace {

/// Per-head tensors [n, in, out] say their head counts and head_dim themselves: k's n is H_kv,
/// q's n is H (a 2-D tensor among them is named by out_in_shape).
void per_head_geometry(const Checkpoint& checkpoint, const DenseTensors& tensors, int first_layer,
                       Geometry& g) {
  const auto shape_of = [&](ProjectionRole role) -> const std::vector<std::int64_t>& {
    const TensorView& tensor = checkpoint.at(layer_name(tensors.names.at(role), first_layer));
    out_in_shape(tensor, Orientation::heads_in_out);  // 3-D, else an error naming it
    return tensor.shape;
  };
  const auto& key = shape_of(ProjectionRole::k);
  if (!g.kv_heads) g.kv_heads = ratio(key[0], 1);
  if (!g.head_dim) g.head_dim = ratio(key[2], 1);
  if (!g.heads)
    g.heads = tensors.names.count(ProjectionRole::q) ? ratio(shape_of(ProjectionRole::q)[0], 1)
                                                     : *g.kv_heads;
  g.add_source("tensor shapes");
}

}  // namespace

/// Fills what config, map and flags left open from the first layer's tensor shapes.
void infer_geometry(const Checkpoint& checkpoint, const DenseSpec& spec, int first_layer,
                    Geometry& g) {
  const DenseTensors& tensors = spec.tensors;
  if (tensors.orientation == Orientation::heads_in_out)
    per_head_geometry(checkpoint, tensors, first_layer, g);
  const auto main_role = tensors.fused() ? ProjectionRole::fused_qkv : ProjectionRole::k;
  const auto shape_of = [&](ProjectionRole role) {
    return out_in_shape(checkpoint.at(layer_name(tensors.names.at(role), first_layer)),
                        tensors.orientation);
  };
  const auto [main_out, main_in] = shape_of(main_role);
  const bool has_q = tensors.names.count(ProjectionRole::q) > 0;
  const Index q_out = has_q ? shape_of(ProjectionRole::q).first : 0;
  if (!g.d_model) {
    g.d_model = ratio(main_in, 1);
    g.add_source("tensor shapes");
  }
  if (!g.head_dim && !tensors.fused()) {  // Qwen3 / Gemma 3: a [head_dim] q_norm or k_norm says it
    g.head_dim = qk_norm_head_dim(checkpoint, tensors.names.at(ProjectionRole::k), first_layer,
                                  main_out, q_out);
    if (g.head_dim) g.add_source("the q_norm/k_norm shape");
  }
  const bool need_flag = !g.heads && !g.head_dim && !(g.kv_heads && !tensors.fused());
  if (need_flag)
    throw Error(checkpoint.path().string(),
                "cannot tell the number of attention heads: neither config.json nor a flag gives "
                "it; pass --heads "
                "(and --kv-heads, --head-dim when they differ from the defaults)");
  if (!g.head_dim) {
    if (g.heads && (tensors.fused() || g.d_model_given || !has_q)) {
      g.head_dim = ratio(*g.d_model, *g.heads);
    } else if (g.heads) {
      g.head_dim = ratio(q_out, *g.heads);
    } else {
      g.head_dim = ratio(main_out, *g.kv_heads);
    }
  }
  if (tensors.fused()) {
    if (!g.heads) g.heads = ratio(*g.d_model, *g.head_dim);
    if (!g.kv_heads) g.kv_heads = (ratio(main_out, *g.head_dim) - *g.heads) / 2;
  } else {
    if (!g.kv_heads) g.kv_heads = ratio(main_out, *g.head_dim);
    if (!g.heads) g.heads = has_q ? ratio(q_out, *g.head_dim) : *g.kv_heads;
  }
}

void check_geometry(const Checkpoint& checkpoint, const Geometry& g) {
  const std::string file =
      checkpoint.config() ? checkpoint.config_path().string() : checkpoint.path().string();
  const std::string numbers = "heads " + std::to_string(g.heads.value_or(0)) + ", kv_heads " +
                              std::to_string(g.kv_heads.value_or(0)) + ", head_dim " +
                              std::to_string(g.head_dim.value_or(0)) + ", hidden size " +
                              std::to_string(g.d_model.value_or(0));
  if (g.heads.value_or(0) < 1 || g.kv_heads.value_or(0) < 1 || g.head_dim.value_or(0) < 1 ||
      g.d_model.value_or(0) < 1)
    throw Error(file, "invalid head geometry: " + numbers + " (from " + g.source_text() + ")");
  if (*g.heads % *g.kv_heads != 0)
    throw Error(file, "heads " + std::to_string(*g.heads) + " is not a multiple of kv_heads " +
                          std::to_string(*g.kv_heads) + " (from " + g.source_text() + ")");
}

}  // namespace kvrank::detail

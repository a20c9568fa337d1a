// The layout of a dense spec (dense.hpp): its layers from the tensor names, its geometry resolved
// and checked against the first layer's shapes.
//
// Every dense layout is described by data (DenseSpec): tensor-name templates with a "{i}" layer
// slot, either one per projection (q, k, v, o) or a fused q/k/v tensor with its row order, and the
// storage orientation. Two fused row orders cover all the families:
//   stacked: all q heads, then all k heads, then all v heads     (gpt2, phi3)
//   grouped: per KV head g: its H/H_kv q heads, then k_g, then v_g (gpt_neox = [H,3,d_h]; falcon's
//            three layouts, which are this order with H_kv = num_kv_heads, 1 or H).
// layer_factors() turns a layer into canonical projections — q [H·d_h, d], k and v [H_kv·d_h, d],
// o [d, H·d_h] — and those into HeadFactors.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvrank/base/error.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {

namespace {

std::optional<int> first_layer_of(const Checkpoint& checkpoint, const DenseSpec& spec,
                                  int& num_layers) {
  std::optional<int> first;
  for (const auto& [role, name_template] : spec.tensors.names) {
    auto range = template_layers(checkpoint, name_template);
    if (!range) continue;
    first = std::min(first.value_or(range->first), range->first);
    num_layers = std::max(num_layers, range->second + 1);
  }
  return first;
}

/// The tensor-name templates of a dense layout, in a vector.
std::vector<std::string> templates_of(const DenseSpec& spec) {
  std::vector<std::string> templates;
  for (const auto& [role, name_template] : spec.tensors.names) templates.push_back(name_template);
  return templates;
}

}  // namespace

ModelLayout dense_layout(const Checkpoint& checkpoint, const DenseSpec& spec, Geometry geometry,
                         const std::string& spec_file, const std::string& model_type) {
  const auto& names = spec.tensors.names;
  const std::string& some_template = names.begin()->second;
  int num_layers = 0;
  const auto first_layer = first_layer_of(checkpoint, spec, num_layers);
  if (!first_layer)
    throw Error(spec_file,
                "no tensor matches any of the names given (e.g. \"" + some_template + "\")");
  infer_geometry(checkpoint, spec, *first_layer, geometry);
  check_geometry(checkpoint, geometry);

  ModelLayout layout;
  layout.family = spec.family;
  layout.heads = *geometry.heads;
  layout.kv_heads = *geometry.kv_heads;
  layout.head_dim = *geometry.head_dim;
  layout.d_model = *geometry.d_model;
  layout.model_type =
      model_type.empty() ? detail::model_type_of(checkpoint).value_or("") : model_type;
  const ModelTypeInfo* row = model_type_named(layout.model_type);
  if (row && row->layers == AttentionLayers::from_config) {  // a hybrid: config.json says
    detail::set_hybrid_layers(checkpoint, templates_of(spec), num_layers, layout);
  } else {  // layers come from the tensor names; config.json's count is cross-checked
    layout.num_layers = detail::checked_layer_count(checkpoint, num_layers, geometry.num_layers,
                                                    layer_name(some_template, num_layers));
  }
  layout.variant = attention_variant(layout.heads, layout.kv_heads);
  layout.has_queries = names.count(ProjectionRole::q) || spec.tensors.fused();
  layout.has_outputs = names.count(ProjectionRole::o) > 0;
  layout.has_values = names.count(ProjectionRole::v) || spec.tensors.fused();
  DenseTensors tensors = spec.tensors;
  tensors.gated_query = row && row->query_rows == QueryRows::query_then_gate;
  tensors.source = geometry.source_text();
  const Dims dims = dims_of(layout, tensors);
  layout.tensors = std::move(tensors);

  for (const auto& [role, name_template] : names)
    check_role_shape(checkpoint, dims, layer_name(name_template, *first_layer), role);
  return layout;
}

}  // namespace kvrank::detail

// Private: the dense layouts behind layout.cpp (llama-like, gpt2, gpt_neox, falcon, phi3, `--map`
// and NPY folders), one file per stage: tensor-name templates and the layouts as data
// (dense_names.cpp), the head geometry (dense_geometry.cpp), a spec's layout (dense_layout.cpp),
// the `--map` file (map_file.cpp) and the canonical projections of one layer
// (dense_projections.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {

// ---- tensor-name templates (dense_names.cpp) ---------------------------------------------------

constexpr std::string_view kLayerSlot = "{i}";

std::string layer_name(const std::string& name_template, int layer);
/// `text` with the last occurrence of `from` replaced by `to` (unchanged when absent).
std::string replace_last(std::string text, std::string_view from, std::string_view to);
/// The layer indices present for a template: [first, last], or nullopt when no tensor matches.
std::optional<std::pair<int, int>> template_layers(const Checkpoint& checkpoint,
                                                   const std::string& name_template);

/// A family's marker tensor, `<outer><stem><layer><suffix>`: <outer> is empty or `outer` (or, when
/// `outer` is kAnyOuter, anything ending in '.'), <suffix> one of `suffixes`. Matched in one pass
/// over the name (no regex: names are untrusted and may be 100,000 characters long).
struct MarkerName {
  std::string_view outer;
  std::string_view stem;
  std::array<std::string_view, 4> suffixes;  // unused ones empty
};
constexpr std::string_view kAnyOuter = "*";

/// The template of the first tensor (in name order) that is a marker ("{i}" for its layer).
std::optional<std::string> find_template(const Checkpoint& checkpoint, const MarkerName& marker);

// ---- dense layouts as data (dense_names.cpp) ---------------------------------------------------

/// A dense layout found by its tensor names (or given by a `--map` file), before its geometry.
struct DenseSpec {
  Family family;
  DenseTensors tensors;  // `source` is filled in when the geometry is known
};

/// The dense layout of a checkpoint by its tensor names; `only` restricts to one family.
std::optional<DenseSpec> find_dense(const Checkpoint& checkpoint, std::optional<Family> only);

// ---- head geometry (dense_geometry.cpp) --------------------------------------------------------

struct Geometry {
  std::optional<int> heads, kv_heads, head_dim, d_model, num_layers;
  bool d_model_given = false;        // from config, map or flag rather than a tensor shape
  std::vector<std::string> sources;  // where the numbers came from, for error messages

  void add_source(const std::string& source) {
    if (std::find(sources.begin(), sources.end(), source) == sources.end())
      sources.push_back(source);
  }
  std::string source_text() const {
    std::string text;
    for (const auto& source : sources) text += (text.empty() ? "" : " and ") + source;
    return text.empty() ? "tensor shapes" : text;
  }
};

Geometry config_geometry(const Checkpoint& checkpoint, Family family);
void apply_overrides(const LayoutOverrides& overrides, Geometry& geometry);
/// Fills what config, map and flags left open from the first layer's tensor shapes.
void infer_geometry(const Checkpoint& checkpoint, const DenseSpec& spec, int first_layer,
                    Geometry& g);
void check_geometry(const Checkpoint& checkpoint, const Geometry& g);
/// The layout of `spec` (dense_layout.cpp): its layers from the tensor names, its geometry resolved
/// and checked against the first layer's shapes; `spec_file` names where the names came from.
/// `model_type`: a model type given as `--family` (it wins), else config.json's.
ModelLayout dense_layout(const Checkpoint& checkpoint, const DenseSpec& spec, Geometry geometry,
                         const std::string& spec_file, const std::string& model_type = "");

// ---- the `--map` file (map_file.cpp) -----------------------------------------------------------

void check_map_keys(const nlohmann::json& map, const std::string& file);
DenseSpec read_map_spec(const nlohmann::json& map, const std::string& file);
Geometry map_geometry(const nlohmann::json& map, const std::string& file, Geometry geometry);

// ---- the canonical projections of one layer (dense_projections.cpp) ----------------------------

struct Dims {
  int heads, kv_heads;
  Index head_dim, d_model;
  std::string source;
  Orientation orientation;
  QkvOrder qkv_order;
  bool gated_query = false;  // q_proj holds per head its query rows, then as many gate rows
};

Dims dims_of(const ModelLayout& layout, const DenseTensors& tensors);
/// Checks a role's tensor shape from its metadata only (detection time: nothing is read).
void check_role_shape(const Checkpoint& checkpoint, const Dims& dims, const std::string& name,
                      ProjectionRole role);
HeadFactors dense_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                          const DenseTensors& tensors, int layer, Repr repr,
                          Bases bases = Bases::float32);
/// The tensor names of one layer that dense_factors() reads.
std::vector<std::string> dense_tensor_names(const DenseTensors& tensors, int layer);

// ---- QK-norm gains of Qwen3, Gemma 3, OLMo 2 … (norm_gains.cpp) --------------------------------

/// Records q_norm / k_norm beside a llama-named key projection in `tensors` (their templates, and
/// the gain convention of the layout's model type, model_type.hpp), checking the first layer's
/// shapes: [head_dim] (one gain shared by all heads) or [heads·head_dim] (one per row).
void detect_qk_norm(const Checkpoint& checkpoint, const std::string& key_template, int first_layer,
                    const ModelLayout& layout, DenseTensors& tensors);
/// head_dim from a per-head QK norm of the first layer: the size of a 1-D k_norm (q_norm) that
/// divides the key (query) rows `key_rows` (`query_rows`, 0 when none) into two or more heads;
/// nullopt when there is none (a gain over the whole projection, as OLMo 2's, says nothing).
std::optional<int> qk_norm_head_dim(const Checkpoint& checkpoint, const std::string& key_template,
                                    int first_layer, Index key_rows, Index query_rows);
/// `rows` (the q or k projection of `layer`, [count·head_dim, d]) with row j scaled by the gain
/// the dot product applies to it (detail::fold_gain); unchanged when the layout has no norm for
/// `role` (q or k).
detail::FoldedRows fold_qk_norm(const Checkpoint& checkpoint, const ModelLayout& layout,
                                const DenseTensors& tensors, int layer, ProjectionRole role,
                                RowMatrixF rows);
/// The q_norm / k_norm / input norm tensor names of one layer (those the layout folds).
std::vector<std::string> norm_tensor_names(const DenseTensors& tensors, int layer);
/// Records the pre-attention norm gain of the layer whose fused or key projection is
/// `projection_template` (`…{i}.input_layernorm.weight`, gpt2's `ln_1`, falcon's `ln_attn`) in
/// `tensors`, checking the first layer's shape [d]; throws kvrank::Error naming what it looked for
/// when there is none.
void detect_input_norm(const Checkpoint& checkpoint, const std::string& projection_template,
                       int first_layer, const ModelLayout& layout, DenseTensors& tensors);
/// `rows` (a q, k or v projection [out, d]) with column j scaled by the input norm's gain j;
/// unchanged without --fold-input-norm.
RowMatrixF fold_input_norm(const Checkpoint& checkpoint, const ModelLayout& layout,
                           const DenseTensors& tensors, int layer, RowMatrixF rows);

}  // namespace kvrank::detail

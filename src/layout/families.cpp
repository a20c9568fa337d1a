// Family detection and per-head factors for the dense layouts — llama-like, gpt2, gpt_neox, falcon,
// phi3 and `--map` — plus the shared helpers of family_detail.hpp and the dispatch to the MLA, LRKV
// and activation readers.
//
// Every dense layout is described by data (DenseSpec): tensor-name templates with a "{i}" layer
// slot, either one per projection (q, k, v, o) or a fused q/k/v tensor with its row order, and the
// storage orientation. Two fused row orders cover all the families:
//   stacked: all q heads, then all k heads, then all v heads     (gpt2, phi3)
//   grouped: per KV head g: its H/H_kv q heads, then k_g, then v_g (gpt_neox = [H,3,d_h]; falcon's
//            three layouts, which are this order with H_kv = num_kv_heads, 1 or H).
// layer_factors() turns a layer into canonical projections — q [H·d_h, d], k and v [H_kv·d_h, d],
// o [d, H·d_h] — and those into HeadFactors.
#include "kvrank/layout/families.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <utility>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/name_table.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"
#include "layout/layer_scan.hpp"

namespace kvrank {
namespace detail {

namespace {

const nlohmann::json* config_field(const Checkpoint& checkpoint, const char* key) {
  const auto& config = checkpoint.config();
  if (!config) return nullptr;
  auto it = config->find(key);
  if (it != config->end() && !it->is_null()) return &*it;
  // Multimodal checkpoints (Gemma 3, …) keep the language model's fields under "text_config".
  auto text = config->find("text_config");
  if (text == config->end() || !text->is_object()) return nullptr;
  it = text->find(key);
  if (it == text->end() || it->is_null()) return nullptr;
  return &*it;
}

Error config_type_error(const Checkpoint& checkpoint, const char* key, const char* expected,
                        const nlohmann::json& found) {
  return Error(checkpoint.config_path().string(), std::string("field \"") + key + "\": expected " +
                                                      expected + ", found " + json_excerpt(found));
}

std::string shape_text(Index rows, Index cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

}  // namespace

void check_matrix_shape(const TensorView& tensor, Index rows, Index cols, const std::string& why) {
  if (tensor.shape.size() == 2 && tensor.shape[0] == rows && tensor.shape[1] == cols) return;
  throw Error(tensor.file, tensor.name,
              "expected shape " + shape_text(rows, cols) + " (" + why + "), found " +
                  tensor.shape_string());
}

std::optional<int> config_int(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  const char* expected = "a non-negative integer";
  if (field->is_number_unsigned()) {
    auto value = field->get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
      throw config_type_error(checkpoint, key, expected, *field);
    return static_cast<int>(value);
  }
  if (field->is_number_integer()) {
    auto value = field->get<std::int64_t>();
    if (value < 0 || value > std::numeric_limits<int>::max())
      throw config_type_error(checkpoint, key, expected, *field);
    return static_cast<int>(value);
  }
  throw config_type_error(checkpoint, key, expected, *field);
}

std::optional<std::string> config_string(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  if (!field->is_string()) throw config_type_error(checkpoint, key, "a string", *field);
  return field->get<std::string>();
}

std::optional<bool> config_bool(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  if (!field->is_boolean()) throw config_type_error(checkpoint, key, "true or false", *field);
  return field->get<bool>();
}

RowMatrixF load_matrix(const Checkpoint& checkpoint, const std::string& name, Index rows,
                       Index cols, const std::string& why) {
  const TensorView& tensor = checkpoint.at(name);
  check_matrix_shape(tensor, rows, cols, why);
  return to_matrix(tensor);
}

FactorSide row_block_side(RowMatrixF rows, int heads, Index head_cols, int heads_per_block) {
  FactorSide side;
  side.basis = std::move(rows);
  side.head_cols = head_cols;
  side.heads.reserve(static_cast<std::size_t>(heads));
  for (int h = 0; h < heads; ++h) {
    const Index block = h / heads_per_block;
    side.heads.push_back({CoeffBlock::identity(block * head_cols, head_cols)});
  }
  return side;
}

FactorSide row_block_side(FoldedRows rows, int heads, Index head_cols, int heads_per_block) {
  FactorSide side = row_block_side(RowMatrixF(), heads, head_cols, heads_per_block);
  set_basis(side, std::move(rows));
  return side;
}

void set_basis(FactorSide& side, FoldedRows rows) {
  side.basis = std::move(rows.rows);
  side.exponent = rows.exponent;
}

FactorSide column_block_side(const RowMatrixF& matrix, int heads, Index head_cols) {
  return row_block_side(matrix.transpose(), heads, head_cols, 1);
}

}  // namespace detail

namespace {

using dense::apply_overrides;
using dense::check_geometry;
using dense::check_map_keys;
using dense::check_role_shape;
using dense::config_geometry;
using dense::dense_factors;
using dense::DenseSpec;
using dense::Dims;
using dense::dims_of;
using dense::find_dense;
using dense::Geometry;
using dense::infer_geometry;
using dense::layer_name;
using dense::map_geometry;
using dense::read_map_spec;
using dense::template_layers;
using detail::config_bool;
using detail::config_int;
using detail::config_string;

constexpr std::array<Named<Repr>, 4> kReprs{
    {{Repr::qk, "qk"}, {Repr::ov, "ov"}, {Repr::k, "k"}, {Repr::v, "v"}}};
static_assert(in_enum_order(kReprs));

constexpr std::array<Named<ProjectionRole>, 5> kRoles{{{ProjectionRole::k, "k"},
                                                       {ProjectionRole::o, "o"},
                                                       {ProjectionRole::q, "q"},
                                                       {ProjectionRole::fused_qkv, "qkv"},
                                                       {ProjectionRole::v, "v"}}};
static_assert(in_enum_order(kRoles));

// ---- detection ---------------------------------------------------------------------------------

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

ModelLayout dense_layout(const Checkpoint& checkpoint, const DenseSpec& spec, Geometry geometry,
                         const std::string& spec_file) {
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
  // Layers come from the tensor names; config.json's count is cross-checked.
  layout.num_layers = detail::checked_layer_count(checkpoint, num_layers, geometry.num_layers,
                                                  layer_name(some_template, num_layers));
  layout.variant = attention_variant(layout.heads, layout.kv_heads);
  layout.has_queries = names.count(ProjectionRole::q) || spec.tensors.fused();
  layout.has_outputs = names.count(ProjectionRole::o) > 0;
  layout.model_type = config_string(checkpoint, "model_type").value_or("");
  DenseTensors tensors = spec.tensors;
  tensors.source = geometry.source_text();
  layout.tensors = std::move(tensors);

  const Dims dims = dims_of(layout);
  for (const auto& [role, name_template] : names)
    check_role_shape(checkpoint, dims, layer_name(name_template, *first_layer), role);
  return layout;
}

ModelLayout map_layout(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  const std::string file = overrides.map_file->string();
  const nlohmann::json map = read_json_object(*overrides.map_file);
  check_map_keys(map, file);
  const DenseSpec spec = read_map_spec(map, file);
  Geometry geometry = map_geometry(map, file, config_geometry(checkpoint, Family::map));
  apply_overrides(overrides, geometry);
  return dense_layout(checkpoint, spec, geometry, file);
}

// Model types whose checkpoints use the llama tensor names; `--family` accepts them too.
constexpr std::array<const char*, 14> kLlamaAliases{
    "mistral", "mixtral", "qwen2",       "qwen2_moe", "qwen3",      "qwen3_moe", "gemma",
    "gemma2",  "gemma3",  "gemma3_text", "olmo2",     "starcoder2", "granite",   "olmoe"};

bool is_llama_alias(const std::string& family) {
  return std::any_of(kLlamaAliases.begin(), kLlamaAliases.end(),
                     [&](const char* name) { return family == name; });
}

/// What `--family NAME` asks for: a family (MLA also as "mla"), or a llama-like model type.
struct FamilyChoice {
  Family family;
  std::string model_type;  ///< the llama-like model type, else empty
};

FamilyChoice parse_family_choice(const std::string& name) {
  if (is_llama_alias(name)) return {Family::llama, name};
  if (name == "mla") return {Family::deepseek_v2, ""};
  const std::optional<Family> family = family_named(name);
  if (!family || *family == Family::activations)  // activations: --activations
    throw Error("", "unknown --family \"" + name +
                        "\" (expected llama or a llama-like model type such as mistral, "
                        "gpt2, gpt_neox, falcon, phi3, deepseek_v2, deepseek_v3, lrkv, map)");
  return {*family, ""};
}

ModelLayout dense_detect(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                         const std::optional<FamilyChoice>& choice) {
  const std::optional<Family> only = choice ? std::optional<Family>(choice->family) : std::nullopt;
  const auto spec = find_dense(checkpoint, only);
  if (!spec) {
    const std::string wanted =
        overrides.family ? "tensors of family " + *overrides.family
                         : "attention tensors of a known family (llama-like, gpt2, gpt_neox, "
                           "falcon, phi3, deepseek MLA, lrkv)";
    throw Error(checkpoint.path().string(), "found no " + wanted + "; name them with --map");
  }
  Geometry geometry = config_geometry(checkpoint, spec->family);
  apply_overrides(overrides, geometry);
  ModelLayout layout = dense_layout(checkpoint, *spec, geometry, checkpoint.path().string());
  if (choice && !choice->model_type.empty())  // --family gemma3 wins
    layout.model_type = choice->model_type;
  if (!spec->tensors.fused()) {
    const std::string& key_template = spec->tensors.names.at(ProjectionRole::k);
    dense::detect_qk_norm(checkpoint, key_template,
                          dense::template_layers(checkpoint, key_template)->first, layout);
  }
  return layout;
}

void check_repr_supported(const Checkpoint& checkpoint, const ModelLayout& layout, Repr repr) {
  const std::string file = checkpoint.path().string();
  if (repr == Repr::qk && !layout.has_queries)
    throw Error(file,
                "--repr qk needs query projections, but this checkpoint holds only "
                "key/value projections (use --repr k,v)");
  if (repr == Repr::ov && !layout.has_outputs)
    throw Error(file, "--repr ov needs output projections, but this checkpoint has none");
}

}  // namespace

std::string_view repr_name(Repr repr) noexcept { return name_of(kReprs, repr); }

std::string_view role_name(ProjectionRole role) noexcept { return name_of(kRoles, role); }

Repr parse_repr(std::string_view name) {
  if (const std::optional<Repr> repr = value_named(kReprs, name)) return *repr;
  throw Error("", "unknown representation \"" + std::string(name) + "\" for --repr (expected " +
                      name_list(kReprs) + ")");
}

ModelLayout detect_layout(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  if (overrides.activations) return detail::detect_activations(checkpoint, overrides);
  std::optional<FamilyChoice> choice;
  if (overrides.family) choice = parse_family_choice(*overrides.family);
  const std::optional<LayoutKind> kind =
      choice ? std::optional<LayoutKind>(family_info(choice->family).kind) : std::nullopt;
  if (overrides.map_file || (choice && choice->family == Family::map)) {
    if (!overrides.map_file) throw Error("", "--family map needs --map FILE");
    return map_layout(checkpoint, overrides);
  }
  if (kind == LayoutKind::mla || (!choice && detail::is_mla(checkpoint)))
    return detail::detect_mla(checkpoint, overrides);
  if (kind == LayoutKind::lrkv || (!choice && detail::is_lrkv(checkpoint)))
    return detail::detect_lrkv(checkpoint, overrides);
  return dense_detect(checkpoint, overrides, choice);
}

HeadFactors layer_factors(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                          Repr repr) {
  if (layer < 0 || layer >= layout.num_layers)
    throw Error(checkpoint.path().string(), "layer " + std::to_string(layer) +
                                                " out of range (the model has " +
                                                std::to_string(layout.num_layers) + " layers)");
  check_repr_supported(checkpoint, layout, repr);
  switch (family_info(layout.family).kind) {
    case LayoutKind::activations:
      return detail::activation_factors(checkpoint, layout, layer, repr);
    case LayoutKind::mla:
      return detail::mla_factors(checkpoint, layout, layer, repr);
    case LayoutKind::lrkv:
      return detail::lrkv_factors(checkpoint, layout, layer, repr);
    case LayoutKind::dense:
      break;
  }
  return dense_factors(checkpoint, layout, layer, repr);
}

std::vector<std::string> layer_tensor_names(const ModelLayout& layout, int layer) {
  switch (family_info(layout.family).kind) {
    case LayoutKind::activations:
      return detail::activation_tensor_names(layout, layer);
    case LayoutKind::mla:
      return detail::mla_tensor_names(layout, layer);
    case LayoutKind::lrkv:
      return detail::lrkv_tensor_names(layout, layer);
    case LayoutKind::dense:
      break;
  }
  std::vector<std::string> names = dense::qk_norm_tensor_names(layout, layer);
  const auto& templates = dense::dense_tensors(layout).names;
  for (ProjectionRole role : {ProjectionRole::q, ProjectionRole::k, ProjectionRole::v,
                              ProjectionRole::o, ProjectionRole::fused_qkv}) {
    auto it = templates.find(role);
    if (it != templates.end()) names.push_back(layer_name(it->second, layer));
  }
  return names;
}

}  // namespace kvrank

// Family detection and per-head factors for the dense layouts — llama-like, gpt2, gpt_neox, falcon,
// phi3 and `--map` — plus the shared helpers of family_detail.hpp and the dispatch to the MLA,
// LRKV, Zamba 2 and activation readers.
//
// Every dense layout is described by data (DenseSpec): tensor-name templates with a "{i}" layer
// slot, either one per projection (q, k, v, o) or a fused q/k/v tensor with its row order, and the
// storage orientation. Two fused row orders cover all the families:
//   stacked: all q heads, then all k heads, then all v heads     (gpt2, phi3)
//   grouped: per KV head g: its H/H_kv q heads, then k_g, then v_g (gpt_neox = [H,3,d_h]; falcon's
//            three layouts, which are this order with H_kv = num_kv_heads, 1 or H).
// layer_factors() turns a layer into canonical projections — q [H·d_h, d], k and v [H_kv·d_h, d],
// o [d, H·d_h] — and those into HeadFactors.
#include "kvrank/layout/layout.hpp"

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
#include "kvrank/base/text.hpp"
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

namespace {

/// A config field as a non-negative int, or an error naming `key`.
int config_int_value(const Checkpoint& checkpoint, const char* key, const nlohmann::json* field) {
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

}  // namespace

std::optional<int> config_int(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  return config_int_value(checkpoint, key, field);
}

std::optional<int> config_section_int(const Checkpoint& checkpoint, const char* section,
                                      const char* key) {
  const auto& config = checkpoint.config();
  if (!config) return std::nullopt;
  const auto part = config->find(section);
  if (part == config->end() || !part->is_object()) return std::nullopt;
  const auto field = part->find(key);
  if (field == part->end() || field->is_null()) return std::nullopt;
  const std::string name = std::string(section) + "." + key;
  return config_int_value(checkpoint, name.c_str(), &*field);
}

std::optional<std::string> config_string(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  if (!field->is_string()) throw config_type_error(checkpoint, key, "a string", *field);
  return field->get<std::string>();
}

std::optional<std::string> model_type_of(const Checkpoint& checkpoint) {
  if (!is_gguf(checkpoint)) return config_string(checkpoint, "model_type");
  const std::string architecture = *config_string(checkpoint, "gguf_architecture");
  const ModelTypeInfo* row = model_type_of_gguf(architecture);
  if (!row)
    throw Error(checkpoint.path().string(), "GGUF architecture \"" + excerpt(architecture) +
                                                "\" is not supported (kvrank reads " +
                                                gguf_architecture_list() + ")");
  // DeepSeek-V3 routes its experts with a sigmoid (expert_gating_func 2), V2 with a softmax.
  if (row->family == Family::deepseek_v2 && config_int(checkpoint, "expert_gating_func") == 2)
    return std::string(family_name(Family::deepseek_v3));
  return std::string(row->name);
}

bool is_gguf(const Checkpoint& checkpoint) {
  return config_field(checkpoint, "gguf_architecture") != nullptr;
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

HeadFactors projection_factors(Repr repr, int heads, int kv_heads, Index head_dim,
                               const std::function<FoldedRows(ProjectionRole)>& projection) {
  using Role = ProjectionRole;
  const int group = heads / kv_heads;
  HeadFactors factors;
  switch (repr) {
    case Repr::qk:
      factors.left = row_block_side(projection(Role::q), heads, head_dim, 1);
      factors.right = row_block_side(projection(Role::k), heads, head_dim, group);
      break;
    case Repr::ov:
      factors.left = column_block_side(projection(Role::o).rows, heads, head_dim);
      factors.right = row_block_side(projection(Role::v), heads, head_dim, group);
      break;
    case Repr::k:
    case Repr::v:
      factors.left =
          row_block_side(projection(repr == Repr::k ? Role::k : Role::v), heads, head_dim, group);
      factors.symmetric = true;
      break;
  }
  return factors;
}

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

}  // namespace detail

namespace {

using detail::apply_overrides;
using detail::check_geometry;
using detail::check_map_keys;
using detail::check_role_shape;
using detail::config_bool;
using detail::config_geometry;
using detail::config_int;
using detail::config_string;
using detail::dense_factors;
using detail::DenseSpec;
using detail::Dims;
using detail::dims_of;
using detail::find_dense;
using detail::Geometry;
using detail::infer_geometry;
using detail::layer_name;
using detail::map_geometry;
using detail::read_map_spec;
using detail::template_layers;

constexpr std::array<Named<Repr>, 4> kReprs{
    {{Repr::qk, "qk"}, {Repr::ov, "ov"}, {Repr::k, "k"}, {Repr::v, "v"}}};
static_assert(in_enum_order(kReprs));

constexpr std::array<Named<ProjectionRole>, 5> kRoles{{{ProjectionRole::k, "k"},
                                                       {ProjectionRole::o, "o"},
                                                       {ProjectionRole::q, "q"},
                                                       {ProjectionRole::fused_qkv, "qkv"},
                                                       {ProjectionRole::v, "v"}}};
static_assert(in_enum_order(kRoles));

constexpr std::array<Named<AttentionChoice>, 3> kAttentionChoices{
    {{AttentionChoice::self, "self"},
     {AttentionChoice::cross, "cross"},
     {AttentionChoice::all, "all"}}};
static_assert(in_enum_order(kAttentionChoices));

// ---- detection ---------------------------------------------------------------------------------

ModelLayout map_layout(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  const std::string file = overrides.map_file->string();
  const nlohmann::json map = read_json_object(*overrides.map_file);
  check_map_keys(map, file);
  const DenseSpec spec = read_map_spec(map, file);
  Geometry geometry = map_geometry(map, file, config_geometry(checkpoint, Family::map));
  apply_overrides(overrides, geometry);
  return dense_layout(checkpoint, spec, geometry, file);
}

/// What `--family NAME` asks for: a family (MLA also as "mla"), or a model type and its reader.
struct FamilyChoice {
  Family family;
  std::string model_type;  ///< the model type named, else empty
};

/// The families a checkpoint's tensors can be read as: all but `--map`, NPY and activations.
std::string reader_list() {
  std::string families;
  for (int i = 0; i < static_cast<int>(Family::map); ++i)
    families += (families.empty() ? "" : ", ") + std::string(family_name(static_cast<Family>(i)));
  return families;
}

}  // namespace

std::string family_choice_list() {
  const std::string families = reader_list() + ", " + std::string(family_name(Family::map)) + ", " +
                               std::string(family_name(Family::npy));
  std::string model_types;
  for (const ModelTypeInfo& row : kvrank::model_types())
    if (!family_named(row.name)) model_types += ", " + std::string(row.name);
  return "a family (" + families + ", or mla) or a model type (" + model_types.substr(2) + ")";
}

namespace {

FamilyChoice parse_family_choice(const std::string& name) {
  if (name == "mla") return {Family::deepseek_v2, ""};
  const std::optional<Family> family = family_named(name);
  if (family && *family != Family::activations) return {*family, ""};
  if (const ModelTypeInfo* row = model_type_named(name)) return {row->family, name};
  throw Error("", "unknown --family \"" + name + "\" (expected " + family_choice_list() + ")");
}

ModelLayout dense_detect(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                         const std::optional<FamilyChoice>& choice) {
  const std::optional<Family> only = choice ? std::optional<Family>(choice->family) : std::nullopt;
  const auto spec = find_dense(checkpoint, only);
  if (!spec) {
    const std::string wanted = overrides.family
                                   ? "tensors of family " + *overrides.family
                                   : "attention tensors of a known family (" + reader_list() + ")";
    throw Error(checkpoint.path().string(), "found no " + wanted + "; name them with --map");
  }
  Geometry geometry = config_geometry(checkpoint, spec->family);
  apply_overrides(overrides, geometry);
  ModelLayout layout = dense_layout(checkpoint, *spec, geometry, checkpoint.path().string(),
                                    choice ? choice->model_type : "");  // --family gemma3 wins
  auto* tensors = std::get_if<DenseTensors>(&layout.tensors);
  if (!tensors) return layout;
  const std::string& projection_template =
      tensors->names.at(tensors->fused() ? ProjectionRole::fused_qkv : ProjectionRole::k);
  const int first_layer = detail::template_layers(checkpoint, projection_template)->first;
  if (!tensors->fused())
    detail::detect_qk_norm(checkpoint, projection_template, first_layer, layout, *tensors);
  if (overrides.fold_input_norm)
    detail::detect_input_norm(checkpoint, projection_template, first_layer, layout, *tensors);
  return layout;
}

/// The layouts (one per attention series) read by the reader of `choice`'s family.
std::vector<ModelLayout> detect_family(const Checkpoint& checkpoint,
                                       const LayoutOverrides& overrides,
                                       const FamilyChoice& choice) {
  if (detail::is_encoder_family(choice.family)) {
    std::vector<ModelLayout> series =
        detail::detect_encoder_series(checkpoint, overrides, choice.family);
    if (!choice.model_type.empty())  // --family roberta wins
      for (ModelLayout& layout : series) layout.model_type = choice.model_type;
    return series;
  }
  switch (choice.family) {
    case Family::deepseek_v2:
    case Family::deepseek_v3:
      return {detail::detect_mla(checkpoint, overrides)};
    case Family::lrkv:
      return {detail::detect_lrkv(checkpoint, overrides)};
    case Family::zamba2:
      return {detail::detect_zamba2(checkpoint, overrides)};
    case Family::activations:
      return {detail::detect_activations(checkpoint, overrides)};
    default:
      return {dense_detect(checkpoint, overrides, choice)};
  }
}

/// By tensor names alone, as when the model type is unknown.
std::vector<ModelLayout> detect_by_tensors(const Checkpoint& checkpoint,
                                           const LayoutOverrides& overrides) {
  if (detail::is_mla(checkpoint)) return {detail::detect_mla(checkpoint, overrides)};
  if (detail::is_lrkv(checkpoint)) return {detail::detect_lrkv(checkpoint, overrides)};
  if (detail::is_zamba2(checkpoint)) return {detail::detect_zamba2(checkpoint, overrides)};
  // Before the llama names: whisper's and clip's self_attn.k_proj would read as a decoder's.
  if (const std::optional<Family> encoder = detail::encoder_family_by_tensors(checkpoint))
    return detail::detect_encoder_series(checkpoint, overrides, *encoder);
  return {dense_detect(checkpoint, overrides, std::nullopt)};
}

/// The model type's reader first (bloom's fused tensors have falcon's names); tensor names when
/// it has no row, or when its reader finds no tensors of its own (a `llama` config over LRKV).
/// An encoder's model type always picks its reader, which names the tensors it misses.
std::vector<ModelLayout> detect_by_model_type(const Checkpoint& checkpoint,
                                              const LayoutOverrides& overrides) {
  const std::optional<std::string> model_type = detail::model_type_of(checkpoint);
  const ModelTypeInfo* row = model_type ? model_type_named(*model_type) : nullptr;
  if (!row || detail::is_lrkv(checkpoint)) return detect_by_tensors(checkpoint, overrides);
  const bool dense = !family_variant(row->family) && !detail::is_encoder_family(row->family) &&
                     row->family != Family::zamba2;
  if (dense && !find_dense(checkpoint, row->family))
    return detect_by_tensors(checkpoint, overrides);
  return detect_family(checkpoint, overrides, {row->family, ""});
}

void check_repr_supported(const Checkpoint& checkpoint, const ModelLayout& layout, Repr repr) {
  const std::string file = checkpoint.path().string();
  if (repr == Repr::qk && !layout.has_queries)
    throw Error(file,
                "--repr qk needs query projections, but this checkpoint holds only "
                "key/value projections (use --repr k,v)");
  if (repr == Repr::ov && !layout.has_outputs)
    throw Error(file, "--repr ov needs output projections, but this checkpoint has none");
  if ((repr == Repr::ov || repr == Repr::v) && !layout.has_values)
    throw Error(file,
                "--repr " + std::string(repr_name(repr)) +
                    " needs value projections, but this checkpoint has none (use --repr qk,k)");
}

/// std::visit over lambdas, one per alternative.
template <typename... Lambdas>
struct Overloaded : Lambdas... {
  using Lambdas::operator()...;
};
// Spelled out for clang 14, which does not deduce aggregate template arguments (C++20 P1816).
template <class... Lambdas>
Overloaded(Lambdas...) -> Overloaded<Lambdas...>;

}  // namespace

std::string_view repr_name(Repr repr) noexcept { return name_of(kReprs, repr); }

std::string_view role_name(ProjectionRole role) noexcept { return name_of(kRoles, role); }

Repr parse_repr(std::string_view name) {
  if (const std::optional<Repr> repr = value_named(kReprs, name)) return *repr;
  throw Error("", "unknown representation \"" + std::string(name) + "\" for --repr (expected " +
                      name_list(kReprs) + ")");
}

namespace {

/// detect_series() before its check of --fold-input-norm.
std::vector<ModelLayout> detect_any_series(const Checkpoint& checkpoint,
                                           const LayoutOverrides& overrides) {
  if (overrides.activations) return {detail::detect_activations(checkpoint, overrides)};
  std::optional<FamilyChoice> choice;
  if (overrides.family) choice = parse_family_choice(*overrides.family);
  if (overrides.map_file || (choice && choice->family == Family::map)) {
    if (!overrides.map_file) throw Error("", "--family map needs --map FILE");
    return {map_layout(checkpoint, overrides)};
  }
  return choice ? detect_family(checkpoint, overrides, *choice)
                : detect_by_model_type(checkpoint, overrides);
}

}  // namespace

std::vector<ModelLayout> detect_series(const Checkpoint& checkpoint,
                                       const LayoutOverrides& overrides) {
  std::vector<ModelLayout> series = detect_any_series(checkpoint, overrides);
  const ModelLayout& first = series.front();
  // With the flag, the dense readers find the gain or say why not (detect_input_norm); any other
  // layout — MLA, LRKV, an encoder's series, Zamba 2, a --map, activations — found none to fold.
  const auto* dense = std::get_if<DenseTensors>(&first.tensors);
  if (overrides.fold_input_norm && !(dense && dense->input_norm))
    throw Error(checkpoint.path().string(),
                "--fold-input-norm is supported for the dense layouts, not for " +
                    std::string(family_name(first.family)));
  return series;
}

ModelLayout detect_layout(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  return detect_series(checkpoint, overrides).front();
}

AttentionChoice parse_attention_choice(std::string_view name) {
  if (const std::optional<AttentionChoice> choice = value_named(kAttentionChoices, name))
    return *choice;
  throw Error("", "unknown --attention \"" + std::string(name) + "\" (expected " +
                      name_list(kAttentionChoices) + ")");
}

std::string_view attention_choice_name(AttentionChoice choice) noexcept {
  return name_of(kAttentionChoices, choice);
}

std::vector<std::string> attention_choice_names() { return names_of(kAttentionChoices); }

std::vector<std::string> repr_names() { return names_of(kReprs); }

bool attention_chosen(AttentionChoice choice, const std::optional<AttentionSeries>& series) {
  const AttentionKind kind = series ? series->kind : AttentionKind::self;
  return choice == AttentionChoice::all ||
         (choice == AttentionChoice::self) == (kind == AttentionKind::self);
}

std::string folded_gains(const ModelLayout& layout) {
  return std::visit(
      Overloaded{[](const DenseTensors& tensors) {
                   std::string what;
                   if (tensors.q_norm) what = "q_norm";
                   if (tensors.k_norm) what += std::string(what.empty() ? "" : " and ") + "k_norm";
                   if (tensors.input_norm)
                     what += std::string(what.empty() ? "" : " and ") + "input norm";
                   if (what.empty()) return what;
                   const bool one_plus = tensors.norm_gain == NormGain::one_plus_weight;
                   return "the " + what + " gains (" + (one_plus ? "1 + w" : "w") + ")";
                 },
                 [](const auto&) { return std::string(); }},
      layout.tensors);
}

HeadFactors layer_factors(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                          Repr repr) {
  if (layer < 0 || layer >= layout.num_layers)
    throw Error(checkpoint.path().string(), "layer " + std::to_string(layer) +
                                                " out of range (the model has " +
                                                std::to_string(layout.num_layers) + " layers)");
  if (!has_attention(layout, layer))
    throw Error(checkpoint.path().string(), "layer " + std::to_string(layer) +
                                                " has no attention heads (its attention layers: " +
                                                format_layer_list(layout.attention_layers) + ")");
  check_repr_supported(checkpoint, layout, repr);
  return std::visit(
      Overloaded{[&](const DenseTensors& tensors) {
                   return dense_factors(checkpoint, layout, tensors, layer, repr);
                 },
                 [&](const MlaTensors& tensors) {
                   return detail::mla_factors(checkpoint, layout, tensors, layer, repr);
                 },
                 [&](const LrkvTensors& tensors) {
                   return detail::lrkv_factors(checkpoint, layout, tensors, layer, repr);
                 },
                 [&](const ActivationTensors& tensors) {
                   return detail::activation_factors(checkpoint, layout, tensors, layer, repr);
                 },
                 [&](const SharedBlockTensors& tensors) {
                   return detail::zamba2_factors(checkpoint, layout, tensors, layer, repr);
                 }},
      layout.tensors);
}

bool has_attention(const ModelLayout& layout, int layer) {
  if (layout.attention_layers.empty()) return layer >= 0 && layer < layout.num_layers;
  return std::binary_search(layout.attention_layers.begin(), layout.attention_layers.end(), layer);
}

std::vector<int> attention_layer_list(const ModelLayout& layout) {
  return layers_with_heads(layout.attention_layers, layout.num_layers);
}

std::vector<std::string> layer_tensor_names(const ModelLayout& layout, int layer) {
  return std::visit(
      Overloaded{
          [&](const DenseTensors& tensors) { return detail::dense_tensor_names(tensors, layer); },
          [&](const MlaTensors& tensors) { return detail::mla_tensor_names(tensors, layer); },
          [&](const LrkvTensors& tensors) { return detail::lrkv_tensor_names(tensors, layer); },
          [&](const ActivationTensors& tensors) {
            return detail::activation_tensor_names(tensors, layer);
          },
          [&](const SharedBlockTensors& tensors) {
            return detail::zamba2_tensor_names(layout, tensors, layer);
          }},
      layout.tensors);
}

}  // namespace kvrank

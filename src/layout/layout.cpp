// Detection order and dispatch (family_detail.hpp): one table of readers — MLA, LRKV, Zamba 2, the
// encoders, captured activations and the dense layouts (dense_layout.cpp) — asked by the model
// type's family when config.json or GGUF metadata names one, else in table order whether a
// checkpoint's tensor names are theirs; factors are dispatched by std::visit on the layout's
// typed tensors. The helpers the readers share are in config_fields.cpp and factor_sides.cpp.
#include "kvrank/layout/layout.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/base/text.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank {

namespace {

using detail::apply_overrides;
using detail::check_map_keys;
using detail::config_geometry;
using detail::DenseSpec;
using detail::find_dense;
using detail::Geometry;
using detail::map_geometry;
using detail::read_map_spec;

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
  throw Error("",
              "--family: expected " + family_choice_list() + ", found \"" + excerpt(name) + "\"");
}

ModelLayout dense_layout_of(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
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

// ---- the reader table
// ----------------------------------------------------------------------------

/// One reader: the families it reads, whether a checkpoint's tensor names are its own (asked in
/// table order when the model type does not decide; nullptr: only when asked for by family), and
/// its detection — `choice` is the family (and model type) asked for, nullopt when found by names.
struct Reader {
  bool (*reads)(Family family);
  bool (*owns_tensors)(const Checkpoint& checkpoint);
  std::vector<ModelLayout> (*detect)(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                                     const std::optional<FamilyChoice>& choice);
};

bool reads_mla(Family family) {
  return family == Family::deepseek_v2 || family == Family::deepseek_v3;
}
bool reads_lrkv(Family family) { return family == Family::lrkv; }
bool reads_zamba2(Family family) { return family == Family::zamba2; }
bool reads_activations(Family family) { return family == Family::activations; }
bool reads_any(Family) { return true; }

bool owns_encoder_tensors(const Checkpoint& checkpoint) {
  return detail::encoder_family_by_tensors(checkpoint).has_value();
}
bool owns_any(const Checkpoint&) { return true; }

std::vector<ModelLayout> read_mla(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                                  const std::optional<FamilyChoice>&) {
  return {detail::detect_mla(checkpoint, overrides)};
}
std::vector<ModelLayout> read_lrkv(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                                   const std::optional<FamilyChoice>&) {
  return {detail::detect_lrkv(checkpoint, overrides)};
}
std::vector<ModelLayout> read_zamba2(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                                     const std::optional<FamilyChoice>&) {
  return {detail::detect_zamba2(checkpoint, overrides)};
}
std::vector<ModelLayout> read_activations(const Checkpoint& checkpoint,
                                          const LayoutOverrides& overrides,
                                          const std::optional<FamilyChoice>&) {
  return {detail::detect_activations(checkpoint, overrides)};
}
std::vector<ModelLayout> read_dense(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                                    const std::optional<FamilyChoice>& choice) {
  return {dense_layout_of(checkpoint, overrides, choice)};
}

std::vector<ModelLayout> read_encoder(const Checkpoint& checkpoint,
                                      const LayoutOverrides& overrides,
                                      const std::optional<FamilyChoice>& choice) {
  if (!choice)
    return detail::detect_encoder_series(checkpoint, overrides,
                                         *detail::encoder_family_by_tensors(checkpoint));
  std::vector<ModelLayout> series =
      detail::detect_encoder_series(checkpoint, overrides, choice->family);
  if (!choice->model_type.empty())  // --family roberta wins
    for (ModelLayout& layout : series) layout.model_type = choice->model_type;
  return series;
}

// In the order tensor names are tried: MLA, LRKV and Zamba 2 by their own tensors; the encoders
// before the dense layouts (whisper's and clip's self_attn.k_proj would read as a decoder's); the
// dense layouts last, for every other family.
constexpr std::array<Reader, 6> kReaders{{
    {reads_mla, detail::is_mla, read_mla},
    {reads_lrkv, detail::is_lrkv, read_lrkv},
    {reads_zamba2, detail::is_zamba2, read_zamba2},
    {detail::is_encoder_family, owns_encoder_tensors, read_encoder},
    {reads_activations, nullptr, read_activations},
    {reads_any, owns_any, read_dense},
}};

const Reader& dense_reader() { return kReaders.back(); }

const Reader& reader_of(Family family) {
  return *std::find_if(kReaders.begin(), kReaders.end(),
                       [&](const Reader& reader) { return reader.reads(family); });
}

/// The layouts (one per attention series) read by the reader of `choice`'s family.
std::vector<ModelLayout> detect_family(const Checkpoint& checkpoint,
                                       const LayoutOverrides& overrides,
                                       const FamilyChoice& choice) {
  return reader_of(choice.family).detect(checkpoint, overrides, choice);
}

/// By tensor names alone, as when the model type is unknown.
std::vector<ModelLayout> detect_by_tensors(const Checkpoint& checkpoint,
                                           const LayoutOverrides& overrides) {
  const Reader& reader = *std::find_if(kReaders.begin(), kReaders.end(), [&](const Reader& r) {
    return r.owns_tensors && r.owns_tensors(checkpoint);
  });
  return reader.detect(checkpoint, overrides, std::nullopt);
}

/// The model type's reader first (bloom's fused tensors have falcon's names); tensor names when
/// it has no row, or when its reader finds no tensors of its own (a `llama` config over LRKV).
/// An encoder's model type always picks its reader, which names the tensors it misses.
std::vector<ModelLayout> detect_by_model_type(const Checkpoint& checkpoint,
                                              const LayoutOverrides& overrides) {
  const std::optional<std::string> model_type = detail::model_type_of(checkpoint);
  const ModelTypeInfo* row = model_type ? model_type_named(*model_type) : nullptr;
  if (!row || detail::is_lrkv(checkpoint)) return detect_by_tensors(checkpoint, overrides);
  const bool dense = &reader_of(row->family) == &dense_reader();
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
  throw Error("", "--repr: " + expected_name(kReprs, name));
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
  throw Error("", "--attention: " + expected_name(kAttentionChoices, name));
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

std::string unknown_model_type_warning(const ModelLayout& layout,
                                       const LayoutOverrides& overrides) {
  const bool named = overrides.family || overrides.map_file || overrides.activations;
  if (named || layout.model_type.empty() || model_type_named(layout.model_type)) return "";
  return "model type \"" + excerpt(layout.model_type) + "\" is not one kvrank knows: read by the " +
         std::string(family_name(layout.family)) +
         " reader, from its tensor names; if its attention differs, name the tensors with --map "
         "(docs/families.md)";
}

std::string layout_reading_detail(const ModelLayout& layout) {
  const std::vector<int> layers = attention_layer_list(layout);
  std::string names;
  if (!layers.empty())
    for (const std::string& name : layer_tensor_names(layout, layers.front()))
      names += (names.empty() ? "" : ", ") + excerpt(name);
  return std::string(family_name(layout.family)) + " reader: heads " +
         std::to_string(layout.heads) + ", kv_heads " + std::to_string(layout.kv_heads) +
         ", head_dim " + std::to_string(layout.head_dim) + ", d_model " +
         std::to_string(layout.d_model) + ", " + std::to_string(layers.size()) +
         " attention layers; layer " + (layers.empty() ? "-" : std::to_string(layers.front())) +
         " read from " + names;
}

HeadFactors layer_factors(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                          Repr repr, Bases bases) {
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
                   return detail::dense_factors(checkpoint, layout, tensors, layer, repr, bases);
                 },
                 [&](const MlaTensors& tensors) {
                   return detail::mla_factors(checkpoint, layout, tensors, layer, repr, bases);
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

void release_layer(const Checkpoint& checkpoint, const ModelLayout& layout, int layer) {
  std::vector<const TensorView*> tensors;
  [[maybe_unused]] std::size_t bytes = 0;  // only in the OpenMP clause
  for (const std::string& name : layer_tensor_names(layout, layer)) {
    if (const TensorView* tensor = checkpoint.find(name)) {
      tensors.push_back(tensor);
      bytes += tensor->bytes.size();
    }
  }
  // Tearing down a mapped tensor's pages takes about 1 ms for 10 MB; on the calling thread alone
  // the others waited for it between two layers (2.5B shape, 2 threads: 1–2 ms a layer). Small
  // layers stay on the calling thread: no pool started for them.
  [[maybe_unused]] constexpr std::size_t kThreadedBytes = std::size_t(16) << 20;
  const auto count = static_cast<std::ptrdiff_t>(tensors.size());
#pragma omp parallel for schedule(dynamic) if (bytes >= kThreadedBytes)
  for (std::ptrdiff_t i = 0; i < count; ++i) checkpoint.release(*tensors[i]);
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

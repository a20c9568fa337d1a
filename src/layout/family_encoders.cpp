// Encoders and encoder-decoders (docs/families.md): bert and roberta, vit, t5, whisper, clip and
// siglip. Each stack's self-attention, and a decoder's cross-attention, is its own series: one
// dense layout (separate q, k, v, o Linear projections, [out, in]) per series, found by the key
// projection's name under any outer prefix (bert., roberta., model., a bare checkpoint …), with
// the geometry of its stack from config.json. Biases are not part of W_Q W_Kᵀ and are not read;
// nor are T5's relative position bias and its missing 1/√d_h scaling, which change logits but not
// the heads' weights (docs/metric.md).
#include <array>
#include <initializer_list>
#include <span>
#include <utility>

#include "kvrank/base/error.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {
namespace {

constexpr AttentionSeries kEncoderSelf{AttentionStack::encoder, AttentionKind::self};
constexpr AttentionSeries kDecoderSelf{AttentionStack::decoder, AttentionKind::self};
constexpr AttentionSeries kDecoderCross{AttentionStack::decoder, AttentionKind::cross};
constexpr AttentionSeries kTextSelf{AttentionStack::text, AttentionKind::self};
constexpr AttentionSeries kVisionSelf{AttentionStack::vision, AttentionKind::self};

/// The names after the layer index of one series' q, k, v and o projections.
struct ProjectionSuffixes {
  std::string_view q, k, v, o;
};

// bert/roberta (BertSelfAttention + BertSelfOutput), vit (ViTSelfAttention + ViTSelfOutput), t5
// (T5Attention: SelfAttention in layer.0, EncDecAttention in the decoder's layer.1), whisper and
// clip/siglip (q_proj … out_proj).
constexpr ProjectionSuffixes kBertNames{
    ".attention.self.query.weight", ".attention.self.key.weight", ".attention.self.value.weight",
    ".attention.output.dense.weight"};
constexpr ProjectionSuffixes kVitNames{
    ".attention.attention.query.weight", ".attention.attention.key.weight",
    ".attention.attention.value.weight", ".attention.output.dense.weight"};
constexpr ProjectionSuffixes kT5Self{
    ".layer.0.SelfAttention.q.weight", ".layer.0.SelfAttention.k.weight",
    ".layer.0.SelfAttention.v.weight", ".layer.0.SelfAttention.o.weight"};
constexpr ProjectionSuffixes kT5Cross{
    ".layer.1.EncDecAttention.q.weight", ".layer.1.EncDecAttention.k.weight",
    ".layer.1.EncDecAttention.v.weight", ".layer.1.EncDecAttention.o.weight"};
constexpr ProjectionSuffixes kSelfAttn{".self_attn.q_proj.weight", ".self_attn.k_proj.weight",
                                       ".self_attn.v_proj.weight", ".self_attn.out_proj.weight"};
constexpr ProjectionSuffixes kEncoderAttn{
    ".encoder_attn.q_proj.weight", ".encoder_attn.k_proj.weight", ".encoder_attn.v_proj.weight",
    ".encoder_attn.out_proj.weight"};

/// Where a series' head geometry is in config.json: keys of `section` (nullptr: the top level);
/// a null key is not read. The layer count is the first of `layers` present.
struct SeriesConfig {
  const char* section;
  const char* heads;
  const char* d_model;
  const char* head_dim;
  std::array<const char*, 2> layers;
};

constexpr SeriesConfig kBertConfig{
    nullptr, "num_attention_heads", "hidden_size", nullptr, {"num_hidden_layers", nullptr}};
constexpr SeriesConfig kT5Encoder{nullptr, "num_heads", "d_model", "d_kv", {"num_layers", nullptr}};
// T5Config: num_decoder_layers defaults to num_layers.
constexpr SeriesConfig kT5Decoder{
    nullptr, "num_heads", "d_model", "d_kv", {"num_decoder_layers", "num_layers"}};
constexpr SeriesConfig kWhisperEncoder{
    nullptr, "encoder_attention_heads", "d_model", nullptr, {"encoder_layers", nullptr}};
constexpr SeriesConfig kWhisperDecoder{
    nullptr, "decoder_attention_heads", "d_model", nullptr, {"decoder_layers", nullptr}};
constexpr SeriesConfig kClipText{
    "text_config", "num_attention_heads", "hidden_size", nullptr, {"num_hidden_layers", nullptr}};
constexpr SeriesConfig kClipVision{
    "vision_config", "num_attention_heads", "hidden_size", nullptr, {"num_hidden_layers", nullptr}};

/// One series: its layer blocks `<outer><stem><i>` and the projections after them.
struct SeriesSpec {
  AttentionSeries series;
  std::string_view stem;
  ProjectionSuffixes names;
  SeriesConfig config;
};

struct EncoderFamily {
  Family family;
  std::array<SeriesSpec, 3> series;  ///< the first `count`, in the order results list them
  int count;
  /// The outer prefixes its own checkpoints use (besides none): without a model type, only these
  /// are taken for the family, so that a multimodal decoder's vision tower
  /// (vision_tower.vision_model.encoder.layers …, a CLIP inside LLaVA or Gemma 3) stays the
  /// decoder's.
  std::array<std::string_view, 2> wrappers;
};

// In the order tensor names are tried without a model type: clip before whisper (a clip tower's
// text_model.encoder.layers.{i}.self_attn has whisper's encoder names under an outer prefix).
constexpr std::array<EncoderFamily, 5> kEncoderFamilies{{
    {Family::clip,
     {{{kTextSelf, "text_model.encoder.layers.", kSelfAttn, kClipText},
       {kVisionSelf, "vision_model.encoder.layers.", kSelfAttn, kClipVision}}},
     2,
     {}},
    {Family::t5,
     {{{kEncoderSelf, "encoder.block.", kT5Self, kT5Encoder},
       {kDecoderSelf, "decoder.block.", kT5Self, kT5Decoder},
       {kDecoderCross, "decoder.block.", kT5Cross, kT5Decoder}}},
     3,
     {}},
    {Family::vit, {{{kEncoderSelf, "encoder.layer.", kVitNames, kBertConfig}}}, 1, {"vit."}},
    {Family::bert,
     {{{kEncoderSelf, "encoder.layer.", kBertNames, kBertConfig}}},
     1,
     {"bert.", "roberta."}},
    {Family::whisper,
     {{{kEncoderSelf, "encoder.layers.", kSelfAttn, kWhisperEncoder},
       {kDecoderSelf, "decoder.layers.", kSelfAttn, kWhisperDecoder},
       {kDecoderCross, "decoder.layers.", kEncoderAttn, kWhisperDecoder}}},
     3,
     {"model."}},
}};

std::span<const SeriesSpec> series_of(const EncoderFamily& family) {
  return std::span(family.series).first(static_cast<std::size_t>(family.count));
}

const EncoderFamily* encoder_family(Family family) {
  for (const EncoderFamily& row : kEncoderFamilies)
    if (row.family == family) return &row;
  return nullptr;
}

/// The key projection's template ("bert.encoder.layer.{i}.attention.self.key.weight"), or nullopt.
std::optional<std::string> key_template(const Checkpoint& checkpoint, const SeriesSpec& spec) {
  return find_template(checkpoint, MarkerName{kAnyOuter, spec.stem, {spec.names.k}});
}

/// The projections of a series whose key projection is `key`: q, v and o when present (each
/// representation checks for those it reads, as for llama).
DenseTensors series_tensors(const Checkpoint& checkpoint, const SeriesSpec& spec,
                            const std::string& key) {
  const std::string block = key.substr(0, key.size() - spec.names.k.size());  // "….{i}"
  DenseTensors tensors;
  tensors.names[ProjectionRole::k] = key;
  for (const auto& [role, suffix] :
       {std::pair{ProjectionRole::q, spec.names.q}, std::pair{ProjectionRole::v, spec.names.v},
        std::pair{ProjectionRole::o, spec.names.o}}) {
    std::string name_template = block + std::string(suffix);
    if (template_layers(checkpoint, name_template)) tensors.names[role] = std::move(name_template);
  }
  return tensors;
}

bool has_section(const Checkpoint& checkpoint, const char* section) {
  const auto& config = checkpoint.config();
  if (!config) return false;
  const auto part = config->find(section);
  return part != config->end() && part->is_object();
}

/// `key` of the series' section; a single tower's config.json (clip_text_model, Stable
/// Diffusion's text_encoder/, clip_vision_model) holds that section's keys at its top level.
std::optional<int> series_config_int(const Checkpoint& checkpoint, const SeriesConfig& config,
                                     const char* key) {
  if (!key) return std::nullopt;
  if (config.section && has_section(checkpoint, config.section))
    return config_section_int(checkpoint, config.section, key);
  return config_int(checkpoint, key);
}

/// The series' geometry from config.json and the flags (which apply to every series); every head
/// has its own key and value (MHA) unless --kv-heads says otherwise.
Geometry series_geometry(const Checkpoint& checkpoint, const SeriesConfig& config,
                         const LayoutOverrides& overrides) {
  Geometry geometry;
  geometry.heads = series_config_int(checkpoint, config, config.heads);
  geometry.d_model = series_config_int(checkpoint, config, config.d_model);
  geometry.head_dim = series_config_int(checkpoint, config, config.head_dim);
  for (const char* key : config.layers)
    if (!geometry.num_layers) geometry.num_layers = series_config_int(checkpoint, config, key);
  geometry.d_model_given = geometry.d_model.has_value();
  if (geometry.heads || geometry.d_model || geometry.head_dim)
    geometry.add_source(checkpoint.config_path().string());
  apply_overrides(overrides, geometry);
  if (!overrides.kv_heads) geometry.kv_heads = geometry.heads;
  return geometry;
}

std::string looked_for(const EncoderFamily& family) {
  std::string names;
  for (const SeriesSpec& spec : series_of(family))
    names +=
        (names.empty() ? "" : ", ") + std::string(spec.stem) + "{i}" + std::string(spec.names.k);
  return names;
}

}  // namespace

bool is_encoder_family(Family family) noexcept { return encoder_family(family) != nullptr; }

std::optional<Family> encoder_family_by_tensors(const Checkpoint& checkpoint) {
  for (const EncoderFamily& family : kEncoderFamilies) {
    for (const SeriesSpec& spec : series_of(family)) {
      for (std::string_view wrapper : family.wrappers)  // each also takes no outer prefix
        if (find_template(checkpoint, MarkerName{wrapper, spec.stem, {spec.names.k}}))
          return family.family;
    }
  }
  return std::nullopt;
}

std::vector<ModelLayout> detect_encoder_series(const Checkpoint& checkpoint,
                                               const LayoutOverrides& overrides, Family family) {
  const EncoderFamily& row = *encoder_family(family);
  std::vector<ModelLayout> layouts;
  for (const SeriesSpec& spec : series_of(row)) {
    const std::optional<std::string> key = key_template(checkpoint, spec);
    if (!key) continue;  // a checkpoint of one stack (a T5 encoder, a CLIP vision tower)
    const DenseSpec dense{family, series_tensors(checkpoint, spec, *key)};
    layouts.push_back(dense_layout(checkpoint, dense,
                                   series_geometry(checkpoint, spec.config, overrides),
                                   checkpoint.path().string()));
    layouts.back().attention = spec.series;
  }
  if (layouts.empty())
    throw Error(checkpoint.path().string(), "found no attention tensors of family " +
                                                std::string(family_name(family)) + " (looked for " +
                                                looked_for(row) + ")");
  return layouts;
}

}  // namespace kvrank::detail

// Checkpoint layouts of every attention family (docs/families.md): detection, and per-head factors.
//
// detect_layout() reads config.json (when present), the `--map` file and the tensor names, and
// decides the family, the variant (mha | gqa | mqa | mla | lrkv) and the head geometry; flags in
// LayoutOverrides win over config.json. layer_factors() then builds, for one layer and one
// representation, the HeadFactors (factors.hpp) that diversity.hpp consumes, reading only that
// layer's attention tensors.
//
//   Checkpoint ckpt = Checkpoint::open(path);
//   ModelLayout layout = detect_layout(ckpt, {});
//   for (int layer = 0; layer < layout.num_layers; ++layer)
//     use(analyze_layer(layer_factors(ckpt, layout, layer, Repr::qk)));  // diversity.hpp
// (this example is compiled and run by tests/header_examples_test.cpp)
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvrank/base/attention_series.hpp"
#include "kvrank/base/factors.hpp"
#include "kvrank/base/geometry.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/family.hpp"
#include "kvrank/layout/model_type.hpp"

namespace kvrank {

/// Which bilinear form represents a head (docs/metric.md).
enum class Repr { qk, ov, k, v };
std::string_view repr_name(Repr repr) noexcept;
/// Parses "qk", "ov", "k", "v"; throws kvrank::Error (usage) otherwise: "--repr: expected qk, ov,
/// k or v, found "x"" (name_table.hpp's expected_name).
Repr parse_repr(std::string_view name);
/// "qk", "ov", "k", "v": the names parse_repr accepts, from its table (for help texts).
std::vector<std::string> repr_names();

/// What the user may force from the command line (each wins over config.json).
struct LayoutOverrides {
  std::optional<std::string> family;  ///< a Family name, a model type (model_type.hpp), or "mla"
  std::optional<int> heads;
  std::optional<int> kv_heads;
  std::optional<int> head_dim;
  std::optional<std::filesystem::path> map_file;  ///< --map: role → tensor-name pattern
  bool activations = false;                       ///< --activations: captured Q/K/V, not weights
  /// --fold-input-norm: fold the pre-attention norm's gain (input_layernorm) into the q, k and v
  /// projections, as TransformerLens does (docs/metric.md says why it is off by default).
  bool fold_input_norm = false;
};

/// The projections of a dense layer; fused_qkv is one [q; k; v] tensor (gpt2, phi3, gpt_neox,
/// falcon). Listed in the order of their names (k, o, q, qkv, v): the order in which a layout's
/// tensors are checked, so that the first error named is the same whatever the family.
enum class ProjectionRole { k, o, q, fused_qkv, v };
std::string_view role_name(ProjectionRole role) noexcept;  ///< "q" … "o", "qkv"

/// Row order of a fused q/k/v tensor:
///   stacked: all q heads, then all k heads, then all v heads      (gpt2, phi3)
///   grouped: per KV head g its H/H_kv q heads, then k_g, then v_g  (gpt_neox, falcon)
enum class QkvOrder { stacked, grouped };
/// How a projection is stored: [out, in] (torch Linear), [in, out] (gpt2's Conv1D), or per head
/// [heads, in, out] (TransformerLens: W_Q, W_K, W_V [heads, d, d_h], W_O [heads, d_h, d]).
enum class Orientation { out_in, in_out, heads_in_out };

/// Dense layouts (llama-like, gpt2, gpt_neox, falcon, phi3, TransformerLens, `--map`, NPY):
/// tensor-name templates with a "{i}" layer slot.
struct DenseTensors {
  std::map<ProjectionRole, std::string> names;  ///< q, k, v, o — or fused_qkv, o
  QkvOrder qkv_order = QkvOrder::stacked;       ///< when fused
  Orientation orientation = Orientation::out_in;
  std::string source;  ///< where the head geometry came from, for shape errors
  /// A QK norm's gain: one tensor per layer (`name`, a "{i}" template), or one per head (StableLM's
  /// q_layernorm.norms.{h}: `name` has a "{h}" head slot too, for `per_head` heads).
  struct NormTensor {
    std::string name;
    int per_head = 0;  ///< 0: one tensor
  };
  /// QK-norm gains (Qwen3, Gemma 3, OLMo 2, StableLM, Cohere …) folded into the q / k rows, with
  /// the centring of a LayerNorm (norm_gains.cpp).
  std::optional<NormTensor> q_norm, k_norm;
  NormKind qk_norm_kind = NormKind::rms;
  /// Qwen3-Next's gated attention: q_proj holds, per head, its d_h query rows, then d_h rows of an
  /// output gate (2·H·d_h rows); the gate rows are not read.
  bool gated_query = false;
  /// The pre-attention norm's gain [d], with --fold-input-norm: scales the columns of q, k and v.
  std::optional<std::string> input_norm;
  NormGain norm_gain = NormGain::weight;
  bool fused() const { return names.count(ProjectionRole::fused_qkv) > 0; }
};

/// MLA (DeepSeek-V2/V3): `prefix` + layer + ".self_attn." + tensor, and the latent sizes.
struct MlaTensors {
  std::string prefix;
  int kv_lora_rank = 0;
  int q_lora_rank = 0;  ///< 0: a plain q_proj
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

/// LRKV and captured activations: the tensor-name prefix before the layer index.
struct LrkvTensors {
  std::string prefix;
};
struct ActivationTensors {
  std::string prefix;
};

/// Zamba 2: `num_mem_blocks` attention blocks shared by the hybrid layers in turn (the k-th
/// hybrid layer uses block k % blocks), their tensors stored under a layer of that block:
/// `prefix` + layer + ".shared_transformer.self_attn." + tensor. With adapters, the k-th hybrid
/// layer adds its own low-rank B·A (`linear_{q,k,v}_adapter_list.{k}`) to the block's q, k and v.
struct SharedBlockTensors {
  std::string prefix;
  int blocks = 1;
  int adapter_rank = 0;  ///< 0: no adapters
  int hidden_size = 0;   ///< o_proj's rows; q, k and v act on twice as many (d_model)
  std::string source;    ///< where the geometry came from, for shape errors
};

using FamilyTensors =
    std::variant<DenseTensors, MlaTensors, LrkvTensors, ActivationTensors, SharedBlockTensors>;

/// A layout is the model's geometry (what results report, geometry.hpp) plus how to read it.
struct ModelLayout : ModelGeometry {
  Family family = Family::llama;
  Variant variant = Variant::mha;
  /// config.json's model_type (for GGUF: its architecture's row in model_type.hpp), or a model type
  /// given as `--family` (mistral, gemma3 …); empty when neither.
  std::string model_type;
  bool has_queries = true;  ///< false for K/V-only inputs: only `k` and `v` can be analysed
  bool has_outputs = true;  ///< false when no o_proj/dense: `ov` cannot be analysed
  bool has_values = true;   ///< false when no v_proj: `ov` and `v` cannot be analysed
  /// What layer_factors() needs to find and read a layer; its alternative is the reader.
  FamilyTensors tensors = DenseTensors{};
  /// Hybrids (Jamba, Granite 4.0 hybrid, Qwen3-Next, Zamba 2): the layers that have attention
  /// heads, in increasing order, as config.json says; empty when every layer 0 … num_layers − 1 has
  /// them.
  std::vector<int> attention_layers;
  /// Encoders and encoder-decoders (bert, t5, whisper, clip …): the attention series this layout
  /// reads, one layout per series (detect_series); empty for decoder-only models.
  std::optional<AttentionSeries> attention;
};

/// Whether layer `layer` of the model has attention heads (layer_factors() reads only those).
bool has_attention(const ModelLayout& layout, int layer);
/// The layers that have attention heads: attention_layers, or 0 … num_layers − 1.
std::vector<int> attention_layer_list(const ModelLayout& layout);

/// What `analyze --attention` measures: self-attention series, cross-attention series, or all.
enum class AttentionChoice { self, cross, all };
/// Parses "self", "cross", "all"; throws kvrank::Error (usage) otherwise: "--attention: expected
/// self, cross or all, found "x"".
AttentionChoice parse_attention_choice(std::string_view name);
std::string_view attention_choice_name(AttentionChoice choice) noexcept;
/// "self", "cross", "all": the names parse_attention_choice accepts, from its table.
std::vector<std::string> attention_choice_names();
/// Whether a series (empty: a decoder-only model's self-attention) is one `choice` selects.
bool attention_chosen(AttentionChoice choice, const std::optional<AttentionSeries>& series);

/// "a family (llama, gpt2, …, or mla) or a model type (mistral, …)": what `--family` accepts,
/// built from the family and model-type tables.
std::string family_choice_list();

/// The QK-norm and input-norm gains layer_factors() folds into a dense layout's projections, for
/// a note on stderr: "the q_norm and k_norm gains (1 + w)", "" when none. (MLA's latent norms are
/// part of its factors, docs/metric.md, and are not announced.)
std::string folded_gains(const ModelLayout& layout);

/// A warning when config.json's model type is one kvrank has no row for (model_type.hpp) and a
/// family's reader read the checkpoint by its tensor names alone, naming both: "model type
/// \"foo\" is not one kvrank knows: read by the llama reader, from its tensor names (…)". Empty
/// when the model type is known or absent, or when `overrides` name the layout (--family, --map,
/// --activations).
std::string unknown_model_type_warning(const ModelLayout& layout,
                                       const LayoutOverrides& overrides = {});
/// The detail behind that warning (for -v): the tensors the reader takes as one layer's attention
/// projections, and the geometry it found.
std::string layout_reading_detail(const ModelLayout& layout);

/// Detects family, variant and geometry. Throws kvrank::Error when config and tensors disagree
/// (naming both) or when a tensor the layout needs is missing. For an encoder or encoder-decoder
/// model, its first attention series (detect_series).
ModelLayout detect_layout(const Checkpoint& checkpoint, const LayoutOverrides& overrides = {});

/// Every attention series of the model, in the order of docs/families.md (encoder self, decoder
/// self, decoder cross; text, vision): one layout each, a stack whose tensors the checkpoint lacks
/// left out (a T5 encoder alone, a CLIP vision tower alone). A decoder-only model's one layout.
/// Overrides (--heads …) apply to every series.
std::vector<ModelLayout> detect_series(const Checkpoint& checkpoint,
                                       const LayoutOverrides& overrides = {});

/// How layer_factors() hands over a basis that is one bf16 tensor as the checkpoint stores it (a
/// dense q, k or v projection in [out, in] order with no gain folded into it), and MLA's latent
/// bases, whose norm gains would make bf16 rows float32 ones.
enum class Bases {
  float32,      ///< every basis a float32 copy of the true basis, its values checked here
  stored_bf16,  ///< such a basis left in the checkpoint (FactorSide::stored): analyze_layer reads
                ///< it in place where kvrank's own bf16 kernel runs, checks its values as it reads
                ///< them, and copies it (with this function's checks and errors) where not; MLA's
                ///< gains kept beside their rows (FactorSide::row_gains), folded where a path
                ///< needs them folded
};

/// The per-head factors of one layer for `repr`. Reads and converts only that layer's tensors;
/// validates their shapes against `layout` and their values (NaN/Inf) — errors name the tensor
/// (under Bases::stored_bf16, a stored basis's values when analyze_layer reads them).
HeadFactors layer_factors(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                          Repr repr, Bases bases = Bases::float32);

/// The tensor names of one layer that layer_factors() reads (for release() after use).
std::vector<std::string> layer_tensor_names(const ModelLayout& layout, int layer);

/// Releases the tensors layer_factors() read for `layer` (Checkpoint::release), once the layer is
/// done with: analyze, diff and plan keep memory at one layer's this way.
void release_layer(const Checkpoint& checkpoint, const ModelLayout& layout, int layer);

}  // namespace kvrank

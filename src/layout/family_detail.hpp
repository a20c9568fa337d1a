// Private: the per-family readers behind layout.hpp, and the helpers they share.
//
// layout.cpp owns detection order and dispatch over one table of readers: the model type's row
// (model_type.hpp) names the reader when config.json or GGUF metadata gives one; otherwise it asks
// each reader in turn whether a checkpoint's tensors are theirs. Factors are dispatched by
// std::visit on the layout's typed tensors, which each reader receives. Each family lives in its
// own src/layout/family_<name>.cpp (the dense ones in dense_*.cpp).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"

namespace kvrank::detail {

// ---- shared helpers (config_fields.cpp: config.json; factor_sides.cpp: matrices and sides) ------

/// Integer field of config.json: nullopt when absent or null; throws kvrank::Error naming
/// config.json and the field when it has the wrong type or is negative.
std::optional<int> config_int(const Checkpoint& checkpoint, const char* key);
std::optional<std::string> config_string(const Checkpoint& checkpoint, const char* key);
std::optional<bool> config_bool(const Checkpoint& checkpoint, const char* key);

/// The model type: config.json's model_type, or for a GGUF file the model type of its
/// architecture (model_type.hpp); nullopt when neither. Throws kvrank::Error for a GGUF
/// architecture kvrank does not read.
std::optional<std::string> model_type_of(const Checkpoint& checkpoint);
/// Whether the checkpoint is a GGUF file (its config was synthesized from GGUF metadata).
bool is_gguf(const Checkpoint& checkpoint);

/// "<prefix><layer>.self_attn.": where a layer's attention tensors are named (MLA, LRKV).
inline std::string self_attn_prefix(const std::string& prefix, int layer) {
  return prefix + std::to_string(layer) + ".self_attn.";
}

/// Throws kvrank::Error naming the tensor unless it is a [rows, cols] matrix.
void check_matrix_shape(const TensorView& tensor, Index rows, Index cols, const std::string& why);

/// The tensor `name` as a row-major float32 matrix [rows, cols], checking its shape:
/// throws kvrank::Error naming the file and tensor ("expected shape [..], found [..] (from
/// config.json: ...)") when it does not match. `why` says where the expected shape comes from.
RowMatrixF load_matrix(const Checkpoint& checkpoint, const std::string& name, Index rows,
                       Index cols, const std::string& why);

/// An RMSNorm gain as read from its tensor (src/layout/norm_gains.cpp: gains folded into
/// projection rows); `file` and `name` name that tensor in errors.
struct Gain {
  std::vector<float> values;
  std::string file;
  std::string name;
};

/// Projection rows with a gain folded in: the true rows are `rows` · 2^exponent. The exponent is 0
/// unless the product would leave float32's safe range (a gain near float's maximum, or large
/// weights times a large gain), see FactorSide::exponent.
struct FoldedRows {
  RowMatrixF rows;
  int exponent = 0;
  std::optional<StoredBf16Rows> stored = {};  ///< set instead of `rows`: the rows as stored (bf16)
  std::vector<double> row_gains = {};         ///< FactorSide::row_gains (gain_beside)
};

/// A side whose heads are consecutive row blocks of `rows` (m × n): head h uses block
/// group_of(h) = h / heads_per_block, i.e. rows [g·k, (g+1)·k). For MHA heads_per_block = 1; for
/// GQA/MQA = H / H_kv, so shared KV blocks enter the Gram once.
FactorSide row_block_side(RowMatrixF rows, int heads, Index head_cols, int heads_per_block);

/// `tensor`, rows × cols of BF16 in C order, left where the checkpoint holds it
/// (Bases::stored_bf16), with the reader's conversions: `to_float` (the float32 copy, as the layout
/// would load it) and rows_to_f32 for a range of rows.
StoredBf16Rows stored_bf16_rows(const TensorView& tensor, Index rows, Index cols,
                                std::function<RowMatrixF()> to_float);
/// The same over folded rows (the side keeps their exponent).
FactorSide row_block_side(FoldedRows rows, int heads, Index head_cols, int heads_per_block);
/// Folded rows as the basis of `side`, with their exponent.
void set_basis(FactorSide& side, FoldedRows rows);

/// A side whose heads are consecutive column blocks of an `[d, H·k]` matrix (an output projection):
/// transposes it once into basis rows.
FactorSide column_block_side(const RowMatrixF& matrix, int heads, Index head_cols);

/// The factors of `repr` from one layer's canonical projections, each asked of `projection` only
/// when `repr` needs it: q [H·d_h, n] and k [H_kv·d_h, n] as the dot product sees them, v
/// [H_kv·d_h, n], o [d, H·d_h]. Query head h uses KV head h / (H / H_kv).
HeadFactors projection_factors(Repr repr, int heads, int kv_heads, Index head_dim,
                               const std::function<FoldedRows(ProjectionRole)>& projection);

/// The check of load_gain from the tensor's metadata only (detection time: nothing is read).
const TensorView& check_gain_shape(const Checkpoint& checkpoint, const std::string& name,
                                   Index size, const std::string& why);
/// The 1-D gain tensor `name`, of shape [size] (else an error naming it and `why`).
Gain load_gain(const Checkpoint& checkpoint, const std::string& name, Index size,
               const std::string& why);
/// Row i of `rows` times values[i] for the first values.size() rows (the others unscaled), in place
/// (pass a temporary or std::move: no copy of the rows), computed in double and rescaled by one
/// power of two for the whole matrix when the largest product lies outside 2^±kSafeScaleExponent:
/// gains ×2^±100 give the same metrics as gains ×1. A non-finite product is an error naming the
/// gain tensor.
FoldedRows fold_gain(RowMatrixF rows, const std::vector<float>& values, const Gain& gain);
inline FoldedRows fold_gain(RowMatrixF rows, const Gain& gain) {
  return fold_gain(std::move(rows), gain.values, gain);
}
/// The rows as they are, with the factors fold_gain would have applied to them (gain and power of
/// two) kept beside them (FoldedRows::row_gains): folding those later (with_float_basis) gives
/// fold_gain's rows, to the bit. The same errors as fold_gain.
FoldedRows gain_beside(RowMatrixF rows, const Gain& gain);
/// The same for rows left stored as bf16 (FoldedRows::stored), their magnitudes read where they
/// lie; an Inf or NaN among them gets the reader's error, as its float32 copy would.
FoldedRows gain_beside(StoredBf16Rows rows, const Gain& gain);

// ---- hybrids: attention in some layers only (src/layout/hybrid_layers.cpp) ----------------------

/// For a model type whose attention layers config.json names (AttentionLayers::from_config): sets
/// layout.num_layers (config.json's count) and layout.attention_layers, and checks that the
/// attention tensors `templates` ("{i}" templates) are in exactly those layers (an error names the
/// first tensor that is missing or that sits in a layer without attention). `found` is one more
/// than the largest layer index of the tensors.
void set_hybrid_layers(const Checkpoint& checkpoint, const std::vector<std::string>& templates,
                       int found, ModelLayout& layout);
/// set_hybrid_layers without the tensor check, for a reader that stores a layer's attention
/// tensors elsewhere (Zamba 2's shared blocks).
void set_attention_layers(const Checkpoint& checkpoint, int found, ModelLayout& layout);

// ---- families in their own files ---------------------------------------------------------------

// MLA (deepseek_v2 / deepseek_v3), src/layout/family_mla.cpp
bool is_mla(const Checkpoint& checkpoint);
ModelLayout detect_mla(const Checkpoint& checkpoint, const LayoutOverrides& overrides);
/// Under Bases::stored_bf16, the norm gains of q_a and kv_a stay beside their rows
/// (FactorSide::row_gains); folded into them otherwise.
HeadFactors mla_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                        const MlaTensors& tensors, int layer, Repr repr, Bases bases);
std::vector<std::string> mla_tensor_names(const MlaTensors& tensors, int layer);

// LRKV (this project's layout), src/layout/family_lrkv.cpp
bool is_lrkv(const Checkpoint& checkpoint);
ModelLayout detect_lrkv(const Checkpoint& checkpoint, const LayoutOverrides& overrides);
HeadFactors lrkv_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                         const LrkvTensors& tensors, int layer, Repr repr);
std::vector<std::string> lrkv_tensor_names(const LrkvTensors& tensors, int layer);

// Zamba 2's shared attention blocks with per-layer adapters, src/layout/family_zamba2.cpp
bool is_zamba2(const Checkpoint& checkpoint);
ModelLayout detect_zamba2(const Checkpoint& checkpoint, const LayoutOverrides& overrides);
HeadFactors zamba2_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                           const SharedBlockTensors& tensors, int layer, Repr repr);
std::vector<std::string> zamba2_tensor_names(const ModelLayout& layout,
                                             const SharedBlockTensors& tensors, int layer);

// Encoders and encoder-decoders (bert, vit, t5, whisper, clip), src/layout/family_encoders.cpp
bool is_encoder_family(Family family) noexcept;
/// The encoder family whose tensor names the checkpoint has, bare or under the family's own outer
/// prefixes (bert., model. …; not a multimodal decoder's vision tower); none: nullopt.
std::optional<Family> encoder_family_by_tensors(const Checkpoint& checkpoint);
/// One dense layout per attention series of `family` found in the checkpoint (an error naming the
/// tensors looked for when there is none).
std::vector<ModelLayout> detect_encoder_series(const Checkpoint& checkpoint,
                                               const LayoutOverrides& overrides, Family family);
/// Integer field `key` of config.json's object `section` (text_config, vision_config), as
/// config_int.
std::optional<int> config_section_int(const Checkpoint& checkpoint, const char* section,
                                      const char* key);

// Captured activations (--activations), src/layout/activations.cpp
ModelLayout detect_activations(const Checkpoint& checkpoint, const LayoutOverrides& overrides);
HeadFactors activation_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                               const ActivationTensors& tensors, int layer, Repr repr);
std::vector<std::string> activation_tensor_names(const ActivationTensors& tensors, int layer);

}  // namespace kvrank::detail

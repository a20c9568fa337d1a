// Norm gains folded into projection rows: MLA's latent norms (family_mla.cpp) and the QK norms
// of the llama-named families of today.
//
// Qwen3, Gemma 3 and OLMo 2 normalise each query and key before the dot product:
//   q = γ_q ∘ (W_Q x) / rms(W_Q x),   k = γ_k ∘ (W_K y) / rms(W_K y),
// so the logit of head h is xᵀ (diag(γ_q,h) W_Q^h)ᵀ (diag(γ_k,g) W_K^g) y / (rms_q · rms_k). The
// gains are learned weights and belong to the bilinear form: they scale the rows of q_proj /
// k_proj. The rms factors are per-token scalars (per token and head for Qwen3 / Gemma 3, per token
// for OLMo 2): they scale a logit, not the form, and are left out, as for MLA.
//   Qwen3, Gemma 3:  q_norm.weight [d_h], k_norm.weight [d_h] — one gain shared by all heads
//                    (RMSNorm over head_dim of q.view(…, H, d_h));
//   OLMo 2:          q_norm.weight [H·d_h], k_norm.weight [H_kv·d_h] — over the whole projection;
//   Gemma:           its RMSNorm multiplies by (1 + weight), so the gain is 1 + the stored weight
//                    (the norm-gain rule of its row in model_type.hpp; GGUF files store 1 + w).
// StableLM and Cohere normalise each head with a LayerNorm, which first subtracts the mean of the
// head's d_h entries: q_h = γ_h ∘ P (W_Q^h x) / σ, P = I − 11ᵀ/d_h, a fixed projection that folds
// with the gains as diag(γ_h) P W_Q^h (each head's rows minus their mean row, then scaled):
//   StableLM:        q_layernorm.norms.{h}.weight [d_h], one torch LayerNorm per head;
//   Cohere:          q_norm.weight [H, d_h], k_norm.weight [H_kv, d_h] (CohereLayerNorm);
//   phi (qk_layernorm): q_layernorm.weight [d_h], one torch LayerNorm shared by all heads (its
//                    bias shifts q by a constant: no part of the bilinear form, like a q_proj
//                    bias).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/tiled_copy.hpp"  // copy_worth_threads
#include "kvrank/base/error.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank {
namespace {

std::string vector_shape_text(Index size) { return "[" + std::to_string(size) + "]"; }

constexpr const char* kInputGainWhy = "the pre-attention norm: one gain per hidden unit";

}  // namespace

namespace detail {

const TensorView& check_gain_shape(const Checkpoint& checkpoint, const std::string& name,
                                   Index size, const std::string& why) {
  const TensorView& tensor = checkpoint.at(name);
  if (tensor.shape.size() != 1 || tensor.shape[0] != size) {
    throw Error(tensor.file, name,
                "expected shape " + vector_shape_text(size) + " (" + why + "), found " +
                    tensor.shape_string());
  }
  return tensor;
}

Gain load_gain(const Checkpoint& checkpoint, const std::string& name, Index size,
               const std::string& why) {
  const TensorView& tensor = check_gain_shape(checkpoint, name, size, why);
  return {to_f32(tensor), tensor.file, name};
}

namespace {

// A float32 product of a weight near 1e20 and a gain near 1e20 overflows to inf (and the Gram of
// every head became 0: "all zero and left out"); the product of two floats is exact in double, so
// the fold is done there, and one power of two brings the whole matrix back into float's range.
// The factor of each row (the gain, 1 past it, times 2^-exponent) and that exponent, from each
// row's largest magnitude.
FoldedRows row_factors(const std::vector<float>& row_largest, const std::vector<float>& values,
                       const Gain& gain) {
  const auto rows = static_cast<Index>(row_largest.size());
  const Index scaled = std::min(static_cast<Index>(values.size()), rows);
  FoldedRows factors;
  factors.row_gains.assign(static_cast<std::size_t>(rows), 1.0);  // 1 past the gain
  for (Index i = 0; i < scaled; ++i) factors.row_gains[i] = values[i];
  const double largest = largest_scaled_magnitude(row_largest, factors.row_gains);
  if (!std::isfinite(largest)) {
    throw Error(gain.file, gain.name,
                "folding this gain into its projection rows gives non-finite values");
  }
  factors.exponent = safe_scale_exponent(largest);
  for (double& factor : factors.row_gains) factor = std::ldexp(factor, -factors.exponent);
  return factors;
}

}  // namespace

FoldedRows fold_gain(RowMatrixF rows, const std::vector<float>& values, const Gain& gain) {
  FoldedRows folded = row_factors(row_largest_magnitudes(rows), values, gain);
  scale_rows(rows, folded.row_gains);
  folded.row_gains.clear();
  folded.rows = std::move(rows);
  return folded;
}

FoldedRows gain_beside(RowMatrixF rows, const Gain& gain) {
  FoldedRows beside = row_factors(row_largest_magnitudes(rows), gain.values, gain);
  beside.rows = std::move(rows);
  return beside;
}

FoldedRows gain_beside(StoredBf16Rows rows, const Gain& gain) {
  const std::optional<std::vector<float>> largest = row_largest_magnitudes(rows);
  if (!largest) rows.throw_read_error("norm gains");
  FoldedRows beside = row_factors(*largest, gain.values, gain);
  beside.stored = std::move(rows);
  return beside;
}

}  // namespace detail

namespace detail {
namespace {

using detail::fold_gain;
using detail::FoldedRows;
using detail::Gain;

// Gemma 2 and 3 have a norm before and after their MLP; no other model type kvrank reads has
// pre_feedforward_layernorm (its model type says whether gains are w or 1 + w).
bool looks_like_gemma(const Checkpoint& checkpoint) {
  return std::any_of(checkpoint.tensors().begin(), checkpoint.tensors().end(),
                     [](const TensorView& t) {
                       return t.name.find("pre_feedforward_layernorm") != std::string::npos;
                     });
}

// The rule of the model type's row; a GGUF converter already stored Gemma's 1 + w. Without a
// model type a Gemma checkpoint is refused rather than folded with the wrong rule.
NormGain norm_gain_of(const Checkpoint& checkpoint, const std::string& model_type) {
  if (detail::is_gguf(checkpoint)) return NormGain::weight;
  if (const ModelTypeInfo* row = model_type_named(model_type)) return row->norm_gain;
  if (model_type.empty() && looks_like_gemma(checkpoint))
    throw Error(checkpoint.path().string(),
                "cannot tell whether its norm gains are w or 1 + w without config.json: it looks "
                "like Gemma (pre_feedforward_layernorm); pass --family gemma3 (1 + w) or "
                "--family qwen3 (w)");
  return NormGain::weight;
}

/// The gain applied: stored + 1 for NormGain::one_plus_weight.
std::vector<float> applied_gain(std::vector<float> stored, NormGain rule) {
  if (rule == NormGain::one_plus_weight)
    for (float& value : stored) value += 1.0f;
  return stored;
}

/// Why a QK-norm gain has the shapes it may have, for shape errors.
std::string qk_gain_reason(int count, Index head_dim, const char* heads_word) {
  return "one gain per head dimension shared by all heads, " + vector_shape_text(head_dim) +
         ", or one per row of the projection, " + std::to_string(count) + " " + heads_word +
         " × head_dim " + std::to_string(head_dim) + " = " + vector_shape_text(count * head_dim);
}

/// A QK-norm gain of one tensor: [head_dim] or [count·head_dim]; a LayerNorm's may also be
/// [count, head_dim] (Cohere's: one gain per head and entry, the rows' order).
void check_qk_gain_shape(const TensorView& tensor, int count, Index head_dim,
                         const char* heads_word, NormKind kind) {
  const bool per_head_dim = tensor.shape.size() == 1 && tensor.shape[0] == head_dim;
  const bool per_row = tensor.shape.size() == 1 && tensor.shape[0] == count * head_dim;
  const bool per_head_and_entry = kind == NormKind::layer && tensor.shape.size() == 2 &&
                                  tensor.shape[0] == count && tensor.shape[1] == head_dim;
  if (per_head_dim || per_row || per_head_and_entry) return;
  const std::string per_head_text =
      kind == NormKind::layer
          ? ", or [" + std::to_string(count) + ", " + std::to_string(head_dim) + "] (per head)"
          : "";
  throw Error(tensor.file, tensor.name,
              "expected shape " + vector_shape_text(head_dim) + " or " +
                  vector_shape_text(count * head_dim) + " (" +
                  qk_gain_reason(count, head_dim, heads_word) + ")" + per_head_text + ", found " +
                  tensor.shape_string());
}

constexpr std::string_view kHeadSlot = "{h}";

/// The tensor of head `head` of a per-head norm template in `layer`.
std::string head_norm_name(const std::string& name_template, int layer, int head) {
  return replace_last(layer_name(name_template, layer), kHeadSlot, std::to_string(head));
}

/// StableLM's per-head LayerNorms: one [head_dim] tensor per head, each checked.
const TensorView& check_per_head_gains(const Checkpoint& checkpoint,
                                       const std::string& name_template, int layer, int count,
                                       Index head_dim) {
  for (int head = 0; head < count; ++head)
    check_gain_shape(checkpoint, head_norm_name(name_template, layer, head), head_dim,
                     "one LayerNorm per head over its head_dim entries");
  return checkpoint.at(head_norm_name(name_template, layer, 0));
}

/// The QK norm of `role` beside the key projection `key_template`, if the checkpoint has one:
/// `q_norm` (Qwen3, Gemma 3, OLMo 2, Cohere), phi's `q_layernorm` or StableLM's per-head
/// `q_layernorm.norms.{h}`.
std::optional<DenseTensors::NormTensor> find_qk_norm(const Checkpoint& checkpoint,
                                                     const std::string& key_template,
                                                     int first_layer, ProjectionRole role,
                                                     int count) {
  const std::string role_text(role_name(role));
  for (const std::string& suffix : {role_text + "_norm", role_text + "_layernorm"}) {
    const std::string one = replace_last(key_template, "k_proj", suffix);
    if (checkpoint.find(layer_name(one, first_layer))) return DenseTensors::NormTensor{one, 0};
  }
  const std::string per_head = replace_last(
      key_template, "k_proj", role_text + "_layernorm.norms." + std::string(kHeadSlot));
  if (checkpoint.find(head_norm_name(per_head, first_layer, 0)))
    return DenseTensors::NormTensor{per_head, count};
  return std::nullopt;
}

/// Whether config.json switches the QK norm on or off (StableLM's `qk_layernorm`, Cohere's and
/// Llama 4's `use_qk_norm`); nullopt when it does not say.
std::optional<bool> qk_norm_switch(const Checkpoint& checkpoint) {
  if (std::optional<bool> on = config_bool(checkpoint, "qk_layernorm")) return on;
  return config_bool(checkpoint, "use_qk_norm");
}

/// The gain applied to the rows of `norm` in `layer` (stored + 1 for NormGain::one_plus_weight),
/// one value per row of a head, or per row of the projection.
Gain load_qk_gain(const Checkpoint& checkpoint, const DenseTensors::NormTensor& norm, int layer,
                  int count, Index head_dim, const DenseTensors& tensors, const char* heads_word) {
  if (norm.per_head == 0) {
    const TensorView& tensor = checkpoint.at(layer_name(norm.name, layer));
    check_qk_gain_shape(tensor, count, head_dim, heads_word, tensors.qk_norm_kind);
    return {applied_gain(to_f32(tensor), tensors.norm_gain), tensor.file, tensor.name};
  }
  const TensorView& first = check_per_head_gains(checkpoint, norm.name, layer, count, head_dim);
  std::vector<float> values;
  for (int head = 0; head < count; ++head) {
    const std::vector<float> one = to_f32(checkpoint.at(head_norm_name(norm.name, layer, head)));
    values.insert(values.end(), one.begin(), one.end());
  }
  return {applied_gain(std::move(values), tensors.norm_gain), first.file,
          layer_name(norm.name, layer)};
}

/// P W for every head block of `rows`, P = I − 11ᵀ/head_dim: a LayerNorm subtracts the mean of
/// each head's entries, i.e. the mean of the head's rows from each of them (in double).
void subtract_head_means(RowMatrixF& rows, Index head_dim) {
  for (Index start = 0; start + head_dim <= rows.rows(); start += head_dim) {
    auto block = rows.middleRows(start, head_dim);
    const Eigen::RowVectorXd mean = block.cast<double>().colwise().mean();
    block = (block.cast<double>().rowwise() - mean).cast<float>();
  }
}

}  // namespace

std::optional<int> qk_norm_head_dim(const Checkpoint& checkpoint, const std::string& key_template,
                                    int first_layer, Index key_rows, Index query_rows) {
  if (key_template.find("k_proj") == std::string::npos) return std::nullopt;
  for (const auto& [role, rows] : {std::pair{'k', key_rows}, std::pair{'q', query_rows}}) {
    const TensorView* norm = checkpoint.find(layer_name(
        replace_last(key_template, "k_proj", std::string(1, role) + "_norm"), first_layer));
    if (!norm || norm->shape.size() != 1) continue;
    const std::int64_t size = norm->shape[0];
    if (size > 0 && size < rows && rows % size == 0) return static_cast<int>(size);
  }
  return std::nullopt;
}

void detect_qk_norm(const Checkpoint& checkpoint, const std::string& key_template, int first_layer,
                    const ModelLayout& layout, DenseTensors& tensors) {
  if (key_template.find("k_proj") == std::string::npos) return;
  const std::optional<bool> switched = qk_norm_switch(checkpoint);
  if (switched == false) return;  // the model has no QK norm: tensors of one are never used
  const ModelTypeInfo* row = model_type_named(layout.model_type);
  tensors.qk_norm_kind = row ? row->qk_norm : NormKind::rms;
  for (const ProjectionRole role : {ProjectionRole::q, ProjectionRole::k}) {
    const bool query = role == ProjectionRole::q;
    const int count = query ? layout.heads : layout.kv_heads;
    const auto norm = find_qk_norm(checkpoint, key_template, first_layer, role, count);
    if (!norm) continue;
    // StableLM's and phi's q_layernorm are torch LayerNorms, whatever the model type.
    if (norm->name.find("_layernorm") != std::string::npos) tensors.qk_norm_kind = NormKind::layer;
    if (norm->per_head > 0) {
      check_per_head_gains(checkpoint, norm->name, first_layer, count, layout.head_dim);
    } else {
      check_qk_gain_shape(checkpoint.at(layer_name(norm->name, first_layer)), count,
                          layout.head_dim, query ? "heads" : "kv heads", tensors.qk_norm_kind);
    }
    (query ? tensors.q_norm : tensors.k_norm) = norm;
  }
  // StableLM's qk_layernorm and Cohere's use_qk_norm say their LayerNorms exist: missing ones
  // would silently misread every head.
  const bool queries_missing = layout.has_queries && !tensors.q_norm;
  if (switched == true && row && row->qk_norm == NormKind::layer &&
      (queries_missing || !tensors.k_norm)) {
    const std::string role = queries_missing ? "q" : "k";
    throw Error(checkpoint.config_path().string(),
                "its QK-norm switch (qk_layernorm, use_qk_norm) is true, but " +
                    layer_name(replace_last(key_template, "k_proj", role + "_norm"), first_layer) +
                    " (or phi's " + role + "_layernorm, StableLM's " + role +
                    "_layernorm.norms.0) is not in the checkpoint");
  }
  if (tensors.q_norm || tensors.k_norm)
    tensors.norm_gain = norm_gain_of(checkpoint, layout.model_type);
}

void detect_input_norm(const Checkpoint& checkpoint, const std::string& projection_template,
                       int first_layer, const ModelLayout& layout, DenseTensors& tensors) {
  const std::size_t slot = projection_template.find(kLayerSlot);
  const std::string layer_prefix =
      projection_template.substr(0, slot + kLayerSlot.size()) + ".";  // "model.layers.{i}."
  std::string looked_for;
  for (const char* suffix : {"input_layernorm.weight", "ln_1.weight", "ln_attn.weight"}) {
    const std::string norm_template = layer_prefix + suffix;
    looked_for += (looked_for.empty() ? "" : ", ") + layer_name(norm_template, first_layer);
    if (!checkpoint.find(layer_name(norm_template, first_layer))) continue;
    detail::check_gain_shape(checkpoint, layer_name(norm_template, first_layer), layout.d_model,
                             kInputGainWhy);
    tensors.input_norm = norm_template;
    tensors.norm_gain = norm_gain_of(checkpoint, layout.model_type);
    return;
  }
  throw Error(
      checkpoint.path().string(),
      "--fold-input-norm: found no pre-attention norm gain (looked for " + looked_for + ")");
}

RowMatrixF fold_input_norm(const Checkpoint& checkpoint, const ModelLayout& layout,
                           const DenseTensors& tensors, int layer, RowMatrixF rows) {
  if (!tensors.input_norm) return rows;
  const std::vector<float> gain =
      applied_gain(detail::load_gain(checkpoint, layer_name(*tensors.input_norm, layer),
                                     layout.d_model, kInputGainWhy)
                       .values,
                   tensors.norm_gain);
  for (Index j = 0; j < rows.cols(); ++j) rows.col(j) *= gain[static_cast<std::size_t>(j)];
  return rows;
}

FoldedRows fold_qk_norm(const Checkpoint& checkpoint, const ModelLayout& layout,
                        const DenseTensors& tensors, int layer, ProjectionRole role,
                        RowMatrixF rows) {
  const bool query = role == ProjectionRole::q;
  const auto& norm = query ? tensors.q_norm : tensors.k_norm;
  if (!norm) return {std::move(rows), 0};
  const Gain stored = load_qk_gain(checkpoint, *norm, layer, query ? layout.heads : layout.kv_heads,
                                   layout.head_dim, tensors, query ? "heads" : "kv heads");
  if (tensors.qk_norm_kind == NormKind::layer) subtract_head_means(rows, layout.head_dim);
  std::vector<float> gain(static_cast<std::size_t>(rows.rows()));
  for (std::size_t i = 0; i < gain.size(); ++i)  // a [d_h] gain repeats for every head
    gain[i] = stored.values[i % stored.values.size()];
  return fold_gain(std::move(rows), gain, stored);
}

std::vector<std::string> norm_tensor_names(const DenseTensors& tensors, int layer) {
  std::vector<std::string> names;
  for (const auto& norm : {tensors.q_norm, tensors.k_norm}) {
    if (!norm) continue;
    if (norm->per_head == 0) names.push_back(layer_name(norm->name, layer));
    for (int head = 0; head < norm->per_head; ++head)
      names.push_back(head_norm_name(norm->name, layer, head));
  }
  if (tensors.input_norm) names.push_back(layer_name(*tensors.input_norm, layer));
  return names;
}

}  // namespace detail
}  // namespace kvrank

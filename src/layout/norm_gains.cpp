// RMSNorm gains folded into projection rows: MLA's latent norms (family_mla.cpp) and the QK norms
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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvrank/base/error.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank {
namespace {

std::string shape_text(Index size) { return "[" + std::to_string(size) + "]"; }

constexpr const char* kInputGainWhy = "the pre-attention norm: one gain per hidden unit";

}  // namespace

namespace detail {

const TensorView& check_gain_shape(const Checkpoint& checkpoint, const std::string& name,
                                   Index size, const std::string& why) {
  const TensorView& tensor = checkpoint.at(name);
  if (tensor.shape.size() != 1 || tensor.shape[0] != size) {
    throw Error(
        tensor.file, name,
        "expected shape " + shape_text(size) + " (" + why + "), found " + tensor.shape_string());
  }
  return tensor;
}

Gain load_gain(const Checkpoint& checkpoint, const std::string& name, Index size,
               const std::string& why) {
  const TensorView& tensor = check_gain_shape(checkpoint, name, size, why);
  return {to_f32(tensor), tensor.file, name};
}

// A float32 product of a weight near 1e20 and a gain near 1e20 overflows to inf (and the Gram of
// every head became 0: "all zero and left out"); the product of two floats is exact in double, so
// the fold is done there, and one power of two brings the whole matrix back into float's range.
FoldedRows fold_gain(const RowMatrixF& rows, const std::vector<float>& values, const Gain& gain) {
  const Index scaled = std::min(static_cast<Index>(values.size()), rows.rows());
  auto row_gain = [&](Index i) { return i < scaled ? static_cast<double>(values[i]) : 1.0; };
  double largest = 0;
  for (Index i = 0; i < rows.rows(); ++i) {
    if (rows.cols() == 0) break;
    largest = std::max(
        largest, std::abs(row_gain(i)) * static_cast<double>(rows.row(i).cwiseAbs().maxCoeff()));
  }
  if (!std::isfinite(largest)) {
    throw Error(gain.file, gain.name,
                "folding this gain into its projection rows gives non-finite values");
  }
  FoldedRows folded{RowMatrixF(rows.rows(), rows.cols()), safe_scale_exponent(largest)};
  for (Index i = 0; i < rows.rows(); ++i) {
    const double factor = std::ldexp(row_gain(i), -folded.exponent);
    folded.rows.row(i) = (rows.row(i).cast<double>() * factor).cast<float>();
  }
  return folded;
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
  return "one gain per head dimension shared by all heads, " + shape_text(head_dim) +
         ", or one per row of the projection, " + std::to_string(count) + " " + heads_word +
         " × head_dim " + std::to_string(head_dim) + " = " + shape_text(count * head_dim);
}

void check_qk_gain_shape(const TensorView& tensor, int count, Index head_dim,
                         const char* heads_word) {
  const bool per_head_dim = tensor.shape.size() == 1 && tensor.shape[0] == head_dim;
  const bool per_row = tensor.shape.size() == 1 && tensor.shape[0] == count * head_dim;
  if (per_head_dim || per_row) return;
  throw Error(tensor.file, tensor.name,
              "expected shape " + shape_text(head_dim) + " or " + shape_text(count * head_dim) +
                  " (" + qk_gain_reason(count, head_dim, heads_word) + "), found " +
                  tensor.shape_string());
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
  // StableLM's qk_layernorm: one LayerNorm per head, which also centres each head's rows.
  const std::string per_head =
      layer_name(replace_last(key_template, "k_proj", "k_layernorm.norms.0"), first_layer);
  if (const TensorView* norm = checkpoint.find(per_head))
    throw Error(norm->file, norm->name,
                "a per-head QK LayerNorm (StableLM's qk_layernorm) is not supported: its centring "
                "is not folded, so the heads would be misread");
  for (const ProjectionRole role : {ProjectionRole::q, ProjectionRole::k}) {
    const bool query = role == ProjectionRole::q;
    const std::string norm_template =
        replace_last(key_template, "k_proj", std::string(role_name(role)) + "_norm");
    const TensorView* first = checkpoint.find(layer_name(norm_template, first_layer));
    if (!first) continue;
    check_qk_gain_shape(*first, query ? layout.heads : layout.kv_heads, layout.head_dim,
                        query ? "heads" : "kv heads");
    (query ? tensors.q_norm : tensors.k_norm) = norm_template;
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
  const std::optional<std::string>& norm = query ? tensors.q_norm : tensors.k_norm;
  if (!norm) return {std::move(rows), 0};
  const int count = query ? layout.heads : layout.kv_heads;
  const TensorView& tensor = checkpoint.at(layer_name(*norm, layer));
  check_qk_gain_shape(tensor, count, layout.head_dim, query ? "heads" : "kv heads");
  const Gain stored{applied_gain(to_f32(tensor), tensors.norm_gain), tensor.file, tensor.name};
  std::vector<float> gain(static_cast<std::size_t>(rows.rows()));
  for (std::size_t i = 0; i < gain.size(); ++i)  // a [d_h] gain repeats for every head
    gain[i] = stored.values[i % stored.values.size()];
  return fold_gain(rows, gain, stored);
}

std::vector<std::string> norm_tensor_names(const DenseTensors& tensors, int layer) {
  std::vector<std::string> names;
  for (const auto& norm : {tensors.q_norm, tensors.k_norm, tensors.input_norm})
    if (norm) names.push_back(layer_name(*norm, layer));
  return names;
}

}  // namespace detail
}  // namespace kvrank

// Low-rank KV attention (this project's layout), docs/families.md.
//
// Per layer, with H heads of size d_h and rank r:
//   q_proj [H·d_h, d], o_proj [d, H·d_h]                 as in llama
//   k_shared_proj [d_h, d], k_lora_a [H·r, d], k_lora_b [H·d_h, r]   (v likewise)
// Key rows of head h = k_shared + k_lora_b[h·d_h : (h+1)·d_h] · k_lora_a[h·r : (h+1)·r].
//
// Factors live in the shared basis [k_shared; k_lora_a] ((d_h + H·r) × d): head h's coefficients
// are the identity on the shared rows plus k_lora_b_hᵀ (r × d_h) on its own r rows — the Gram is
// the size of what LRKV caches, and no per-head key matrix is ever formed.
//
// Config: "attention_variant": "lrkv" and "lrkv_rank" (inferred from k_lora_a when absent);
// num_attention_heads, hidden_size and head_dim are inferred from the tensors when absent.
// Reported: variant "lrkv", kv_heads = H (each head has its own effective key), lrkv_rank = r.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kvrank/base/error.hpp"
#include "layout/family_detail.hpp"
#include "layout/fp8_blocks.hpp"
#include "layout/layer_scan.hpp"

namespace kvrank::detail {

namespace {

constexpr const char* kLrkvMarker = ".self_attn.k_lora_a.weight";

struct LrkvDims {
  std::string prefix;
  int heads = 0;
  int head_dim = 0;
  int rank = 0;
  int d_model = 0;
};

std::string dims_text(const LrkvDims& dims) {
  return "from config: num_attention_heads " + std::to_string(dims.heads) + ", head_dim " +
         std::to_string(dims.head_dim) + ", lrkv_rank " + std::to_string(dims.rank) +
         ", hidden_size " + std::to_string(dims.d_model);
}

// [shared; lora_a] as basis, C_h = I on the shared rows + lora_b_hᵀ on head h's rows. `which` is
// "k" or "v".
FactorSide low_rank_side(const Checkpoint& checkpoint, const LrkvDims& dims, int layer,
                         const std::string& which) {
  const std::string attn = self_attn_prefix(dims.prefix, layer);
  const std::string why = dims_text(dims);
  const Index d_h = dims.head_dim;
  const Index r = dims.rank;
  const Index heads = dims.heads;
  const RowMatrixF shared =
      load_dequantized(checkpoint, attn + which + "_shared_proj.weight", d_h, dims.d_model, why);
  const RowMatrixF lora_a =
      load_dequantized(checkpoint, attn + which + "_lora_a.weight", heads * r, dims.d_model, why);
  const auto lora_b = std::make_shared<const RowMatrixF>(
      load_dequantized(checkpoint, attn + which + "_lora_b.weight", heads * d_h, r, why));

  FactorSide side;
  side.basis.resize(d_h + heads * r, dims.d_model);
  side.basis.topRows(d_h) = shared;
  side.basis.bottomRows(heads * r) = lora_a;
  side.head_cols = d_h;
  for (Index h = 0; h < heads; ++h) {
    std::vector<CoeffBlock> blocks{CoeffBlock::identity(0, d_h)};
    if (r > 0) {
      blocks.push_back(CoeffBlock::rows_of(lora_b, h * d_h, d_h, d_h + h * r));
    }
    side.heads.push_back(std::move(blocks));
  }
  return side;
}

FactorSide query_side(const Checkpoint& checkpoint, const LrkvDims& dims, int layer) {
  return row_block_side(
      load_dequantized(checkpoint, self_attn_prefix(dims.prefix, layer) + "q_proj.weight",
                       Index{dims.heads} * dims.head_dim, dims.d_model, dims_text(dims)),
      dims.heads, dims.head_dim, 1);
}

FactorSide output_side(const Checkpoint& checkpoint, const LrkvDims& dims, int layer) {
  return column_block_side(
      load_dequantized(checkpoint, self_attn_prefix(dims.prefix, layer) + "o_proj.weight",
                       dims.d_model, Index{dims.heads} * dims.head_dim, dims_text(dims)),
      dims.heads, dims.head_dim);
}

// A 2-D tensor's shape[axis].
int dim_of(const TensorView& tensor, std::size_t axis) {
  if (tensor.shape.size() != 2) {
    throw Error(tensor.file, tensor.name,
                "expected a 2-D tensor, found shape " + tensor.shape_string());
  }
  return static_cast<int>(tensor.shape[axis]);
}

// total / parts, or an error naming the tensor when it does not divide.
int divide(const TensorView& tensor, int total, int parts, const std::string& what) {
  if (parts <= 0 || total % parts != 0) {
    throw Error(tensor.file, tensor.name,
                "cannot infer " + what + ": " + std::to_string(total) + " rows do not split into " +
                    std::to_string(parts) + " parts; give it in config.json");
  }
  return total / parts;
}

}  // namespace

bool is_lrkv(const Checkpoint& checkpoint) {
  if (config_string(checkpoint, "attention_variant") == "lrkv") return true;
  return scan_layers(checkpoint, kLrkvMarker).count > 0;
}

ModelLayout detect_lrkv(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  const LayerScan scan = scan_layers(checkpoint, kLrkvMarker);
  if (scan.count == 0) {
    throw Error(checkpoint.path().string(),
                "LRKV checkpoint without low-rank key tensors: expected names like "
                "model.layers.0.self_attn.k_lora_a.weight");
  }
  const std::string attn = self_attn_prefix(scan.prefix, 0);
  const TensorView& k_shared = checkpoint.at(attn + "k_shared_proj.weight");
  const TensorView& k_lora_a = checkpoint.at(attn + "k_lora_a.weight");
  const TensorView& k_lora_b = checkpoint.at(attn + "k_lora_b.weight");

  LrkvDims dims;
  dims.prefix = scan.prefix;
  // The shared key's rows are the head size; config values are checked against the tensors later.
  dims.head_dim = overrides.head_dim
                      ? *overrides.head_dim
                      : config_int(checkpoint, "head_dim").value_or(dim_of(k_shared, 0));
  dims.d_model = config_int(checkpoint, "hidden_size").value_or(dim_of(k_shared, 1));
  if (overrides.heads) {
    dims.heads = *overrides.heads;
  } else if (std::optional<int> heads = config_int(checkpoint, "num_attention_heads")) {
    dims.heads = *heads;
  } else {
    dims.heads = divide(k_lora_b, dim_of(k_lora_b, 0), dims.head_dim, "num_attention_heads");
  }
  if (dims.heads <= 0 || dims.head_dim <= 0) {
    throw Error(checkpoint.config_path().string(),
                "LRKV needs positive num_attention_heads and head_dim, found " +
                    std::to_string(dims.heads) + " and " + std::to_string(dims.head_dim));
  }
  if (std::optional<int> rank = config_int(checkpoint, "lrkv_rank")) {
    dims.rank = *rank;
  } else {
    dims.rank = divide(k_lora_a, dim_of(k_lora_a, 0), dims.heads, "lrkv_rank");
  }

  ModelLayout layout;
  layout.family = Family::lrkv;
  layout.variant = Variant::lrkv;
  layout.heads = dims.heads;
  layout.kv_heads = dims.heads;
  layout.head_dim = dims.head_dim;
  layout.d_model = dims.d_model;
  layout.num_layers =
      checked_layer_count(checkpoint, scan.count, config_int(checkpoint, "num_hidden_layers"),
                          scan.prefix + std::to_string(scan.count) + kLrkvMarker);
  layout.lrkv_rank = dims.rank;
  layout.has_queries = checkpoint.find(attn + "q_proj.weight") != nullptr;
  layout.has_outputs = checkpoint.find(attn + "o_proj.weight") != nullptr;
  layout.tensors = LrkvTensors{dims.prefix};
  return layout;
}

HeadFactors lrkv_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                         const LrkvTensors& tensors, int layer, Repr repr) {
  LrkvDims dims;
  dims.prefix = tensors.prefix;
  dims.heads = layout.heads;
  dims.head_dim = layout.head_dim;
  dims.rank = layout.lrkv_rank.value_or(0);
  dims.d_model = layout.d_model;
  HeadFactors factors;
  switch (repr) {
    case Repr::qk:
      factors.left = query_side(checkpoint, dims, layer);
      factors.right = low_rank_side(checkpoint, dims, layer, "k");
      break;
    case Repr::ov:
      factors.left = output_side(checkpoint, dims, layer);
      factors.right = low_rank_side(checkpoint, dims, layer, "v");
      break;
    case Repr::k:
      factors.left = low_rank_side(checkpoint, dims, layer, "k");
      factors.symmetric = true;
      break;
    case Repr::v:
      factors.left = low_rank_side(checkpoint, dims, layer, "v");
      factors.symmetric = true;
      break;
  }
  return factors;
}

std::vector<std::string> lrkv_tensor_names(const LrkvTensors& tensors, int layer) {
  const std::string attn = self_attn_prefix(tensors.prefix, layer);
  std::vector<std::string> names;
  for (const char* weight : {"q_proj", "o_proj", "k_shared_proj", "v_shared_proj", "k_lora_a",
                             "k_lora_b", "v_lora_a", "v_lora_b"}) {
    names.push_back(attn + weight + ".weight");
    names.push_back(scale_inv_name(attn + weight + ".weight"));
  }
  return names;
}

}  // namespace kvrank::detail

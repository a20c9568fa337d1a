// Multi-head latent attention (DeepSeek-V2/V3), docs/families.md.
//
// Per layer, with c = kv_lora_rank, n = qk_nope_head_dim, r = qk_rope_head_dim, v = v_head_dim:
//   kv_a_proj_with_mqa [c + r, d]   rows [0, c): the latent down-projection, rows [c, c + r): the
//                                   rope key, one for all heads
//   kv_a_layernorm     [c]          RMSNorm gain γ_kv on the latent
//   kv_b_proj          [H·(n + v), c]  per head: n rows of K (nope), then v rows of V
//   q_proj             [H·(n + r), d]  or  q_a_proj [q_lora, d], q_a_layernorm [q_lora],
//                                          q_b_proj [H·(n + r), q_lora]
//   o_proj             [d, H·v]
// Effective key of head h (rows): [kv_b_h,K · diag(γ_kv) · kv_a[:c] ; kv_a[c:]].
//
// Factors are built in the latent basis (factors.hpp): the key side's basis is
// [diag(γ_kv)·kv_a[:c]; kv_a[c:]] and head h's coefficients are kv_b_h,Kᵀ plus an identity on the
// rope rows, so the Gram is (c + r)², the size of the cache, whatever H and d are.
//
// Reported geometry: heads = kv_heads = H (every head has its own effective key and value, even
// though one latent per token is cached — mla_kv_lora_rank reports that), head_dim = n + r.
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

constexpr const char* kMlaMarker = ".self_attn.kv_a_proj_with_mqa.weight";

struct MlaDims {
  std::string prefix;
  int heads = 0;
  int kv_lora = 0;
  int q_lora = 0;  // 0: q_proj
  int nope = 0;
  int rope = 0;
  int v_dim = 0;
  int d_model = 0;
};

MlaDims dims_of(const ModelLayout& layout, const MlaTensors& tensors) {
  MlaDims dims;
  dims.prefix = tensors.prefix;
  dims.heads = layout.heads;
  dims.kv_lora = tensors.kv_lora_rank;
  dims.q_lora = tensors.q_lora_rank;
  dims.nope = tensors.qk_nope_head_dim;
  dims.rope = tensors.qk_rope_head_dim;
  dims.v_dim = tensors.v_head_dim;
  dims.d_model = layout.d_model;
  return dims;
}

// A config field, or the value the tensors imply (`infer`, called only when the field is absent).
template <typename Infer>
int config_or(const Checkpoint& checkpoint, const char* key, Infer infer) {
  if (std::optional<int> value = config_int(checkpoint, key)) return *value;
  return infer();
}

// shape[axis] of `tensor`, checked to exist.
std::int64_t dim_of(const TensorView& tensor, std::size_t rank, std::size_t axis) {
  if (tensor.shape.size() != rank) {
    throw Error(
        tensor.file, tensor.name,
        "expected a " + std::to_string(rank) + "-D tensor, found shape " + tensor.shape_string());
  }
  return tensor.shape[axis];
}

// (total / heads) − minus, the per-head size a fused tensor implies; an error naming the tensor and
// the head count when it does not divide.
int per_head(const TensorView& tensor, std::int64_t total, int heads, int minus, const char* what) {
  if (heads <= 0 || total % heads != 0 || total / heads - minus < 0) {
    throw Error(tensor.file, tensor.name,
                std::string("cannot infer ") + what + ": " + std::to_string(total) +
                    " rows do not split into " + std::to_string(heads) +
                    " heads (num_attention_heads); give it in config.json");
  }
  return static_cast<int>(total / heads - minus);
}

std::string dims_text(const MlaDims& dims) {
  return "from config: num_attention_heads " + std::to_string(dims.heads) + ", kv_lora_rank " +
         std::to_string(dims.kv_lora) + ", qk_nope_head_dim " + std::to_string(dims.nope) +
         ", qk_rope_head_dim " + std::to_string(dims.rope) + ", v_head_dim " +
         std::to_string(dims.v_dim) + ", hidden_size " + std::to_string(dims.d_model);
}

// Whether `name` is read where it lies (Bases::stored_bf16): BF16 in C order, no FP8 block scales.
bool stays_stored(const Checkpoint& checkpoint, const TensorView& tensor, const std::string& name,
                  Bases bases) {
  return bases == Bases::stored_bf16 && tensor.dtype == DType::BF16 && !tensor.fortran_order &&
         !checkpoint.find(scale_inv_name(name));
}

// Projection rows `name` with the norm gain `gain_name` over their first `gain_size` rows. Under
// Bases::stored_bf16 the gain stays beside the rows (gain_beside), which keep their bf16 values
// for kvrank's own Gram kernel, the one the contraction's latent coordinates use (a folded gain
// made V3's query-side Gram a float32 one, ~9 % of a layer); bf16 rows stay where they lie too
// (V3: no 57 MB float32 copy of q_a and kv_a a layer).
FoldedRows rows_with_gain(const Checkpoint& checkpoint, const std::string& name, Index rows,
                          Index cols, const std::string& gain_name, Index gain_size,
                          const std::string& why, Bases bases) {
  const Gain gain = load_gain(checkpoint, gain_name, gain_size, why);
  const TensorView& tensor = checkpoint.at(name);
  auto float_rows = [&checkpoint, name, rows, cols, why] {
    return load_dequantized(checkpoint, name, rows, cols, why);
  };
  if (bases != Bases::stored_bf16) return fold_gain(float_rows(), gain);
  if (!stays_stored(checkpoint, tensor, name, bases)) return gain_beside(float_rows(), gain);
  check_matrix_shape(tensor, rows, cols, why);
  return gain_beside(stored_bf16_rows(tensor, rows, cols, float_rows), gain);
}

// Rows [diag(γ_kv)·kv_a[:c]; kv_a[c:]] — the latent (and rope) basis both K and V live in.
FoldedRows latent_basis(const Checkpoint& checkpoint, const MlaDims& dims, int layer, Bases bases) {
  const std::string attn = self_attn_prefix(dims.prefix, layer);
  return rows_with_gain(checkpoint, attn + "kv_a_proj_with_mqa.weight", dims.kv_lora + dims.rope,
                        dims.d_model, attn + "kv_a_layernorm.weight", dims.kv_lora, dims_text(dims),
                        bases);
}

// The rows of a projection that the heads' coefficient blocks share, in float32 or (under
// Bases::stored_bf16, for BF16 weights with no FP8 block scales) as stored: the latent contraction
// reads those where they lie, not through a float32 copy (DeepSeek-V3's q_b: 150 MB a layer).
struct SharedRows {
  std::shared_ptr<const RowMatrixF> floats;
  std::shared_ptr<const StoredBf16Rows> stored;

  // Rows [first, first + count) as the transpose of a dense block at basis row 0, head column 0.
  CoeffBlock block(Index first, Index count) const {
    return stored ? CoeffBlock::stored_rows_of(stored, first, count, 0)
                  : CoeffBlock::rows_of(floats, first, count, 0);
  }
};

SharedRows load_shared_rows(const Checkpoint& checkpoint, const std::string& name, Index rows,
                            Index cols, const std::string& why, Bases bases) {
  const TensorView& tensor = checkpoint.at(name);
  if (!stays_stored(checkpoint, tensor, name, bases))
    return {std::make_shared<const RowMatrixF>(load_dequantized(checkpoint, name, rows, cols, why)),
            nullptr};
  check_matrix_shape(tensor, rows, cols, why);
  return {nullptr, std::make_shared<const StoredBf16Rows>(
                       stored_bf16_rows(tensor, rows, cols, [&checkpoint, name, rows, cols, why] {
                         return load_dequantized(checkpoint, name, rows, cols, why);
                       }))};
}

// A head whose coefficients are one dense block from basis row 0: rows [first, first + count) of
// the projection, shared by all heads (not copied).
std::vector<CoeffBlock> single_block(const SharedRows& projection, Index first, Index count) {
  return {projection.block(first, count)};
}

SharedRows load_kv_b(const Checkpoint& checkpoint, const MlaDims& dims, int layer, Bases bases) {
  return load_shared_rows(checkpoint, self_attn_prefix(dims.prefix, layer) + "kv_b_proj.weight",
                          Index{dims.heads} * (dims.nope + dims.v_dim), dims.kv_lora,
                          dims_text(dims), bases);
}

// Effective keys: C_h = kv_b_h,Kᵀ on the latent rows, identity on the rope rows.
FactorSide key_side(const Checkpoint& checkpoint, const MlaDims& dims, int layer, Bases bases) {
  const SharedRows kv_b = load_kv_b(checkpoint, dims, layer, bases);
  FactorSide side;
  set_basis(side, latent_basis(checkpoint, dims, layer, bases));
  side.head_cols = dims.nope + dims.rope;
  for (int h = 0; h < dims.heads; ++h) {
    std::vector<CoeffBlock> blocks;
    if (dims.nope > 0) {
      const Index first = Index{h} * (dims.nope + dims.v_dim);
      blocks.push_back(kv_b.block(first, dims.nope));
    }
    if (dims.rope > 0) blocks.push_back(CoeffBlock::identity(dims.kv_lora, dims.rope, dims.nope));
    side.heads.push_back(std::move(blocks));
  }
  return side;
}

// Effective values: C_h = kv_b_h,Vᵀ on the latent rows (the rope rows carry no value).
FactorSide value_side(const Checkpoint& checkpoint, const MlaDims& dims, int layer, Bases bases) {
  const SharedRows kv_b = load_kv_b(checkpoint, dims, layer, bases);
  FactorSide side;
  set_basis(side, latent_basis(checkpoint, dims, layer, bases));
  keep_first_basis_rows(side, dims.kv_lora);  // the latent rows only
  side.head_cols = dims.v_dim;
  for (int h = 0; h < dims.heads; ++h) {
    const Index first = Index{h} * (dims.nope + dims.v_dim) + dims.nope;
    side.heads.push_back(single_block(kv_b, first, dims.v_dim));
  }
  return side;
}

// Queries: row blocks of q_proj, or with q_lora C_h = q_b_hᵀ on the basis diag(γ_q)·q_a.
FactorSide query_side(const Checkpoint& checkpoint, const MlaDims& dims, int layer, Bases bases) {
  const std::string attn = self_attn_prefix(dims.prefix, layer);
  const std::string why = dims_text(dims);
  const Index head_cols = dims.nope + dims.rope;
  const Index rows = Index{dims.heads} * head_cols;
  if (dims.q_lora == 0) {
    return row_block_side(
        load_dequantized(checkpoint, attn + "q_proj.weight", rows, dims.d_model, why), dims.heads,
        head_cols, 1);
  }
  const std::string lora_why = why + ", q_lora_rank " + std::to_string(dims.q_lora);
  const SharedRows q_b =
      load_shared_rows(checkpoint, attn + "q_b_proj.weight", rows, dims.q_lora, lora_why, bases);
  FactorSide side;
  set_basis(side, rows_with_gain(checkpoint, attn + "q_a_proj.weight", dims.q_lora, dims.d_model,
                                 attn + "q_a_layernorm.weight", dims.q_lora, lora_why, bases));
  side.head_cols = head_cols;
  for (int h = 0; h < dims.heads; ++h) {
    side.heads.push_back(single_block(q_b, h * head_cols, head_cols));
  }
  return side;
}

FactorSide output_side(const Checkpoint& checkpoint, const MlaDims& dims, int layer) {
  return column_block_side(
      load_dequantized(checkpoint, self_attn_prefix(dims.prefix, layer) + "o_proj.weight",
                       dims.d_model, Index{dims.heads} * dims.v_dim, dims_text(dims)),
      dims.heads, dims.v_dim);
}

int positive(const Checkpoint& checkpoint, const char* key, int value) {
  if (value <= 0) {
    throw Error(checkpoint.config_path().empty() ? checkpoint.path().string()
                                                 : checkpoint.config_path().string(),
                std::string("MLA field \"") + key + "\": expected a positive integer, found " +
                    std::to_string(value));
  }
  return value;
}

}  // namespace

bool is_mla(const Checkpoint& checkpoint) {
  const std::optional<std::string> model_type = model_type_of(checkpoint);
  const ModelTypeInfo* row = model_type ? model_type_named(*model_type) : nullptr;
  if (row && family_variant(row->family) == Variant::mla) return true;
  if (config_int(checkpoint, "kv_lora_rank")) return true;
  return scan_layers(checkpoint, kMlaMarker).count > 0;
}

namespace {

/// The latent sizes of an MLA checkpoint whose first attention layer is under `scan`: config.json
/// first, else the shapes of the first layer's tensors (flags win for the head count).
MlaDims mla_dims(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                 const LayerScan& scan) {
  const std::string attn = self_attn_prefix(scan.prefix, 0);
  const TensorView& kv_a = checkpoint.at(attn + "kv_a_proj_with_mqa.weight");
  const TensorView* q_proj = checkpoint.find(attn + "q_proj.weight");
  const TensorView* q_a = checkpoint.find(attn + "q_a_proj.weight");
  const TensorView* q_b = checkpoint.find(attn + "q_b_proj.weight");

  MlaDims dims;
  dims.prefix = scan.prefix;
  dims.heads = overrides.heads ? *overrides.heads
                               : config_or(checkpoint, "num_attention_heads", [&]() -> int {
                                   throw Error(checkpoint.path().string(),
                                               "MLA needs num_attention_heads in config.json "
                                               "(or --heads)");
                                 });
  positive(checkpoint, "num_attention_heads", dims.heads);
  dims.kv_lora = config_or(checkpoint, "kv_lora_rank", [&] {
    return static_cast<int>(dim_of(checkpoint.at(attn + "kv_a_layernorm.weight"), 1, 0));
  });
  dims.rope = config_or(checkpoint, "qk_rope_head_dim", [&] {
    const std::int64_t rows = dim_of(kv_a, 2, 0);
    if (rows < dims.kv_lora) {
      throw Error(kv_a.file, kv_a.name,
                  "expected kv_lora_rank " + std::to_string(dims.kv_lora) +
                      " latent rows plus the rope rows, found shape " + kv_a.shape_string());
    }
    return static_cast<int>(rows - dims.kv_lora);
  });
  dims.d_model =
      config_or(checkpoint, "hidden_size", [&] { return static_cast<int>(dim_of(kv_a, 2, 1)); });
  if (std::optional<int> q_lora = config_int(checkpoint, "q_lora_rank")) {
    dims.q_lora = *q_lora;
  } else if (q_a && !q_proj) {
    dims.q_lora = static_cast<int>(dim_of(*q_a, 2, 0));
  }
  dims.nope = config_or(checkpoint, "qk_nope_head_dim", [&] {
    const TensorView* query = dims.q_lora ? q_b : q_proj;
    if (!query) {
      throw Error(checkpoint.path().string(),
                  "MLA needs qk_nope_head_dim in config.json when the checkpoint has no queries");
    }
    return per_head(*query, dim_of(*query, 2, 0), dims.heads, dims.rope, "qk_nope_head_dim");
  });
  dims.v_dim = config_or(checkpoint, "v_head_dim", [&] {
    const TensorView& kv_b = checkpoint.at(attn + "kv_b_proj.weight");
    return per_head(kv_b, dim_of(kv_b, 2, 0), dims.heads, dims.nope, "v_head_dim");
  });
  positive(checkpoint, "kv_lora_rank", dims.kv_lora);
  positive(checkpoint, "v_head_dim", dims.v_dim);
  positive(checkpoint, "qk_nope_head_dim + qk_rope_head_dim", dims.nope + dims.rope);

  return dims;
}

}  // namespace

ModelLayout detect_mla(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  const LayerScan scan = scan_layers(checkpoint, kMlaMarker);
  if (scan.count == 0) {
    throw Error(checkpoint.path().string(),
                "MLA checkpoint without attention tensors: expected names like "
                "model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
  }
  const MlaDims dims = mla_dims(checkpoint, overrides, scan);
  const std::string attn = self_attn_prefix(scan.prefix, 0);
  ModelLayout layout;
  const std::optional<std::string> model_type = model_type_of(checkpoint);
  const ModelTypeInfo* row = model_type ? model_type_named(*model_type) : nullptr;
  layout.family =
      row && row->family == Family::deepseek_v3 ? Family::deepseek_v3 : Family::deepseek_v2;
  layout.variant = Variant::mla;
  layout.model_type = model_type.value_or("");
  layout.heads = dims.heads;
  layout.kv_heads = dims.heads;
  layout.head_dim = dims.nope + dims.rope;
  layout.d_model = dims.d_model;
  // DeepSeek-V3 stores its multi-token-prediction module(s) as extra layers after the
  // num_hidden_layers decoder layers; they are left out.
  layout.num_layers =
      checked_layer_count(checkpoint, scan.count, config_int(checkpoint, "num_hidden_layers"),
                          scan.prefix + std::to_string(scan.count) + kMlaMarker,
                          config_int(checkpoint, "num_nextn_predict_layers").value_or(0));
  layout.mla_kv_lora_rank = dims.kv_lora;
  layout.has_queries = checkpoint.find(attn + "q_proj.weight") ||
                       checkpoint.find(attn + "q_a_proj.weight") ||
                       checkpoint.find(attn + "q_b_proj.weight");
  layout.has_outputs = checkpoint.find(attn + "o_proj.weight") != nullptr;
  layout.tensors =
      MlaTensors{dims.prefix, dims.kv_lora, dims.q_lora, dims.nope, dims.rope, dims.v_dim};
  return layout;
}

HeadFactors mla_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                        const MlaTensors& tensors, int layer, Repr repr, Bases bases) {
  const MlaDims dims = dims_of(layout, tensors);
  HeadFactors factors;
  switch (repr) {
    case Repr::qk:
      factors.left = query_side(checkpoint, dims, layer, bases);
      factors.right = key_side(checkpoint, dims, layer, bases);
      break;
    case Repr::ov:
      factors.left = output_side(checkpoint, dims, layer);
      factors.right = value_side(checkpoint, dims, layer, bases);
      break;
    case Repr::k:
      factors.left = key_side(checkpoint, dims, layer, bases);
      factors.symmetric = true;
      break;
    case Repr::v:
      factors.left = value_side(checkpoint, dims, layer, bases);
      factors.symmetric = true;
      break;
  }
  return factors;
}

std::vector<std::string> mla_tensor_names(const MlaTensors& tensors, int layer) {
  const std::string attn = self_attn_prefix(tensors.prefix, layer);
  std::vector<std::string> names;
  for (const char* weight :
       {"q_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"}) {
    names.push_back(attn + weight + ".weight");
    names.push_back(scale_inv_name(attn + weight + ".weight"));
  }
  names.push_back(attn + "q_a_layernorm.weight");
  names.push_back(attn + "kv_a_layernorm.weight");
  return names;
}

}  // namespace kvrank::detail

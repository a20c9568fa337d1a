// Dense layouts (layout.cpp): the canonical projections of one layer — q [H·d_h, d], k and v
// [H_kv·d_h, d], o [d, H·d_h] — and the per-head factors built from them.
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/tiled_copy.hpp"
#include "kvrank/base/error.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {

// ---- the canonical projections of one layer ---------------------------------------------------

Dims dims_of(const ModelLayout& layout, const DenseTensors& tensors) {
  return {layout.heads,   layout.kv_heads,     layout.head_dim,   layout.d_model,
          tensors.source, tensors.orientation, tensors.qkv_order, tensors.gated_query};
}

namespace {

/// Rows a role has in canonical [out, in] form (o is [d, H·d_h]: its rows are d).
Index role_rows(const Dims& dims, ProjectionRole role) {
  switch (role) {
    case ProjectionRole::q:
      return (dims.gated_query ? 2 : 1) * dims.heads * dims.head_dim;
    case ProjectionRole::k:
    case ProjectionRole::v:
      return dims.kv_heads * dims.head_dim;
    case ProjectionRole::o:
      return dims.d_model;
    case ProjectionRole::fused_qkv:
      break;
  }
  return (Index{dims.heads} + 2 * Index{dims.kv_heads}) * dims.head_dim;
}

Index role_cols(const Dims& dims, ProjectionRole role) {
  return role == ProjectionRole::o ? dims.heads * dims.head_dim : dims.d_model;
}

/// Why a role has the shape it has, for shape errors ("8 heads × head_dim 8 = 64 rows, ...").
std::string shape_reason(const Dims& dims, ProjectionRole role) {
  const std::string head_dim = " × head_dim " + std::to_string(dims.head_dim) + " = ";
  std::string count;
  if (role == ProjectionRole::q && dims.gated_query) {
    count = std::to_string(dims.heads) + " heads × 2 (query and gate)" + head_dim;
  } else if (role == ProjectionRole::q || role == ProjectionRole::o) {
    count = std::to_string(dims.heads) + " heads" + head_dim;
  } else if (role == ProjectionRole::k || role == ProjectionRole::v) {
    count = std::to_string(dims.kv_heads) + " kv heads" + head_dim;
  } else {
    count = "(" + std::to_string(dims.heads) + " heads + 2 × " + std::to_string(dims.kv_heads) +
            " kv heads)" + head_dim;
  }
  // The head dimension is the output side of q/k/v and the input side of o.
  const bool in_out = dims.orientation == Orientation::in_out;
  const bool output = role == ProjectionRole::o;
  const bool heads_on_rows = !output != in_out;
  return count + std::to_string(output ? role_cols(dims, role) : role_rows(dims, role)) +
         (heads_on_rows ? " rows" : " columns") + ", hidden size " + std::to_string(dims.d_model) +
         "; from " + dims.source;
}

// ---- per-head tensors [heads, in, out] (TransformerLens; a --map with "layout": "heads_in_out")

/// The shape a role has per head: q [H, d, d_h], k and v [H_kv, d, d_h], o [H, d_h, d].
std::array<Index, 3> per_head_shape(const Dims& dims, ProjectionRole role) {
  const Index count =
      role == ProjectionRole::k || role == ProjectionRole::v ? dims.kv_heads : dims.heads;
  if (role == ProjectionRole::o) return {count, dims.head_dim, dims.d_model};
  return {count, dims.d_model, dims.head_dim};
}

void check_per_head_shape(const TensorView& tensor, const Dims& dims, ProjectionRole role) {
  const std::array<Index, 3> want = per_head_shape(dims, role);
  if (tensor.shape.size() == 3 && std::equal(want.begin(), want.end(), tensor.shape.begin()))
    return;
  const bool kv = role == ProjectionRole::k || role == ProjectionRole::v;
  const std::string heads = std::to_string(want[0]) + (kv ? " kv heads" : " heads");
  const std::string axes =
      role == ProjectionRole::o ? "head_dim, hidden size" : "hidden size, head_dim";
  throw Error(tensor.file, tensor.name,
              "expected shape [" + std::to_string(want[0]) + ", " + std::to_string(want[1]) + ", " +
                  std::to_string(want[2]) + "] (per head [heads, in, out]: " + heads + ", " + axes +
                  "; from " + dims.source + "), found " + tensor.shape_string());
}

/// A per-head tensor in canonical form: q, k, v [count·d_h, d] (each head's [d, d_h] transposed),
/// o [d, H·d_h] (the heads' [d_h, d] blocks stacked, transposed).
RowMatrixF load_per_head(const Checkpoint& checkpoint, const Dims& dims, const std::string& name,
                         ProjectionRole role) {
  const TensorView& tensor = checkpoint.at(name);
  check_per_head_shape(tensor, dims, role);
  const std::array<Index, 3> shape = per_head_shape(dims, role);
  const std::vector<float> values = to_f32(tensor);
  using Block = Eigen::Map<const RowMatrixF>;
  if (role == ProjectionRole::o)
    return detail::transposed(Block(values.data(), shape[0] * shape[1], shape[2]));
  RowMatrixF rows(shape[0] * shape[2], shape[1]);
  for (Index h = 0; h < shape[0]; ++h)
    rows.middleRows(h * shape[2], shape[2]) =
        Block(values.data() + h * shape[1] * shape[2], shape[1], shape[2]).transpose();
  return rows;
}

/// The role's tensor in canonical [out, in] form, its shape checked.
RowMatrixF load_role(const Checkpoint& checkpoint, const Dims& dims, const std::string& name,
                     ProjectionRole role) {
  if (dims.orientation == Orientation::heads_in_out)
    return load_per_head(checkpoint, dims, name, role);
  const Index rows = role_rows(dims, role);
  const Index cols = role_cols(dims, role);
  const std::string why = shape_reason(dims, role);
  if (dims.orientation == Orientation::out_in)
    return detail::load_matrix(checkpoint, name, rows, cols, why);
  return detail::transposed(detail::load_matrix(checkpoint, name, cols, rows, why));
}

}  // namespace

/// Checks a role's tensor shape from its metadata only (detection time: nothing is read).
void check_role_shape(const Checkpoint& checkpoint, const Dims& dims, const std::string& name,
                      ProjectionRole role) {
  if (dims.orientation == Orientation::heads_in_out) {
    check_per_head_shape(checkpoint.at(name), dims, role);
    return;
  }
  Index rows = role_rows(dims, role);
  Index cols = role_cols(dims, role);
  if (dims.orientation == Orientation::in_out) std::swap(rows, cols);
  detail::check_matrix_shape(checkpoint.at(name), rows, cols, shape_reason(dims, role));
}

namespace {

/// First row of head `head` of `role` (q: a query head; k, v: a KV head) in a fused tensor.
Index fused_row(const Dims& dims, ProjectionRole role, int head) {
  const int group = dims.heads / dims.kv_heads;
  Index block = 0;
  if (dims.qkv_order == QkvOrder::grouped) {
    const int stride = group + 2;
    if (role == ProjectionRole::q) block = (head / group) * stride + head % group;
    if (role == ProjectionRole::k) block = head * stride + group;
    if (role == ProjectionRole::v) block = head * stride + group + 1;
  } else {
    if (role == ProjectionRole::q) block = head;
    if (role == ProjectionRole::k) block = dims.heads + head;
    if (role == ProjectionRole::v) block = dims.heads + dims.kv_heads + head;
  }
  return block * dims.head_dim;
}

class LayerProjections {
 public:
  LayerProjections(const Checkpoint& checkpoint, const ModelLayout& layout,
                   const DenseTensors& tensors, int layer)
      : checkpoint_(checkpoint),
        layout_(layout),
        tensors_(tensors),
        dims_(dims_of(layout, tensors)),
        layer_(layer) {}

  /// q, k or v as the checkpoint stores them, when that is the canonical form with no gain to fold
  /// into it and the values are bf16: the rows as stored, and how to copy them (Bases).
  std::optional<StoredBf16Rows> stored(ProjectionRole role) const {
    const bool gains = tensors_.input_norm || (role == ProjectionRole::q && tensors_.q_norm) ||
                       (role == ProjectionRole::k && tensors_.k_norm);
    if (role == ProjectionRole::o || gains || tensors_.fused() ||
        dims_.orientation != Orientation::out_in ||
        (role == ProjectionRole::q && dims_.gated_query))
      return std::nullopt;
    const std::string tensor_name = name(role);
    const TensorView& tensor = checkpoint_.at(tensor_name);
    if (tensor.dtype != DType::BF16 || tensor.fortran_order) return std::nullopt;
    const Index rows = role_rows(dims_, role);
    const Index cols = role_cols(dims_, role);
    detail::check_matrix_shape(tensor, rows, cols, shape_reason(dims_, role));
    return detail::stored_bf16_rows(tensor, rows, cols,
                                    [&checkpoint = checkpoint_, dims = dims_, tensor_name, role] {
                                      return load_role(checkpoint, dims, tensor_name, role);
                                    });
  }

  /// q [H·d_h, d], k / v [H_kv·d_h, d], o [d, H·d_h]; q, k and v with the input norm's gain
  /// folded into their columns (--fold-input-norm).
  RowMatrixF get(ProjectionRole role) {
    if (role == ProjectionRole::o) return load_role(checkpoint_, dims_, name(role), role);
    return fold_input_norm(checkpoint_, layout_, tensors_, layer_, projection(role));
  }

 private:
  RowMatrixF projection(ProjectionRole role) {
    if (role == ProjectionRole::q && dims_.gated_query) return gated_queries();
    if (!tensors_.fused()) return load_role(checkpoint_, dims_, name(role), role);
    if (!fused_) {
      fused_ =
          load_role(checkpoint_, dims_, name(ProjectionRole::fused_qkv), ProjectionRole::fused_qkv);
    }
    const int count = role == ProjectionRole::q ? dims_.heads : dims_.kv_heads;
    RowMatrixF rows(count * dims_.head_dim, dims_.d_model);
    for (int h = 0; h < count; ++h)
      rows.middleRows(h * dims_.head_dim, dims_.head_dim) =
          fused_->middleRows(fused_row(dims_, role, h), dims_.head_dim);
    return rows;
  }

  /// Qwen3-Next: q_proj(x) viewed as [H, 2·d_h] and split in halves, query then gate. The gate
  /// (sigmoid(gate) ∘ the head's output, before o_proj) depends on the token: it is no part of a
  /// bilinear form, and only the query rows are kept.
  RowMatrixF gated_queries() {
    const RowMatrixF both =
        load_role(checkpoint_, dims_, name(ProjectionRole::q), ProjectionRole::q);
    RowMatrixF queries(dims_.heads * dims_.head_dim, dims_.d_model);
    for (int h = 0; h < dims_.heads; ++h)
      queries.middleRows(h * dims_.head_dim, dims_.head_dim) =
          both.middleRows(2 * h * dims_.head_dim, dims_.head_dim);
    return queries;
  }

  std::string name(ProjectionRole role) const {
    auto it = tensors_.names.find(role);
    if (it == tensors_.names.end())
      throw Error(checkpoint_.path().string(),
                  "this checkpoint has no " + std::string(role_name(role)) + " projection tensors");
    return layer_name(it->second, layer_);
  }

  const Checkpoint& checkpoint_;
  const ModelLayout& layout_;
  const DenseTensors& tensors_;
  Dims dims_;
  int layer_;
  std::optional<RowMatrixF> fused_;
};

}  // namespace

HeadFactors dense_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                          const DenseTensors& tensors, int layer, Repr repr, Bases bases) {
  LayerProjections projections(checkpoint, layout, tensors, layer);
  // QK-norm gains scale the rows the dot product sees (norm_gains.cpp); the cached key is the
  // normalised one, so `k` sees them too.
  return projection_factors(
      repr, layout.heads, layout.kv_heads, layout.head_dim, [&](ProjectionRole role) {
        if (bases == Bases::stored_bf16) {
          if (std::optional<StoredBf16Rows> stored = projections.stored(role))
            return FoldedRows{RowMatrixF(), 0, std::move(stored)};
        }
        RowMatrixF rows = projections.get(role);
        if (role == ProjectionRole::q || role == ProjectionRole::k)
          return fold_qk_norm(checkpoint, layout, tensors, layer, role, std::move(rows));
        return FoldedRows{std::move(rows)};
      });
}

std::vector<std::string> dense_tensor_names(const DenseTensors& tensors, int layer) {
  std::vector<std::string> names = norm_tensor_names(tensors, layer);
  for (ProjectionRole role : {ProjectionRole::q, ProjectionRole::k, ProjectionRole::v,
                              ProjectionRole::o, ProjectionRole::fused_qkv}) {
    auto it = tensors.names.find(role);
    if (it != tensors.names.end()) names.push_back(layer_name(it->second, layer));
  }
  return names;
}

}  // namespace kvrank::detail

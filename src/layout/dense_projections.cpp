// Dense layouts (families.cpp): the canonical projections of one layer — q [H·d_h, d], k and v
// [H_kv·d_h, d], o [d, H·d_h] — and the per-head factors built from them.
#include <optional>
#include <utility>

#include "kvrank/error.hpp"
#include "layout/dense.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::dense {

// ---- the canonical projections of one layer ---------------------------------------------------

Dims dims_of(const ModelLayout& layout) {
  auto field = [&](const char* key) {
    auto it = layout.details.find(key);
    return it == layout.details.end() ? std::string() : it->second;
  };
  return {layout.heads,      layout.kv_heads, layout.head_dim,
          layout.d_model,    field("source"), field("orientation") == "in_out",
          field("qkv_order")};
}

namespace {

/// Rows a role has in canonical [out, in] form ('o' is [d, H·d_h]: its rows are d).
Index role_rows(const Dims& dims, char role) {
  switch (role) {
    case 'q':
      return dims.heads * dims.head_dim;
    case 'k':
    case 'v':
      return dims.kv_heads * dims.head_dim;
    case 'o':
      return dims.d_model;
    default:
      return (Index{dims.heads} + 2 * Index{dims.kv_heads}) * dims.head_dim;  // fused qkv
  }
}

Index role_cols(const Dims& dims, char role) {
  return role == 'o' ? dims.heads * dims.head_dim : dims.d_model;
}

/// Why a role has the shape it has, for shape errors ("8 heads × head_dim 8 = 64 rows, ...").
std::string shape_reason(const Dims& dims, char role) {
  const std::string head_dim = " × head_dim " + std::to_string(dims.head_dim) + " = ";
  std::string count;
  if (role == 'q' || role == 'o') {
    count = std::to_string(dims.heads) + " heads" + head_dim;
  } else if (role == 'k' || role == 'v') {
    count = std::to_string(dims.kv_heads) + " kv heads" + head_dim;
  } else {
    count = "(" + std::to_string(dims.heads) + " heads + 2 × " + std::to_string(dims.kv_heads) +
            " kv heads)" + head_dim;
  }
  // The head dimension is the output side of q/k/v and the input side of o.
  const bool heads_on_rows = (role != 'o') != dims.in_out;
  return count + std::to_string(role == 'o' ? role_cols(dims, role) : role_rows(dims, role)) +
         (heads_on_rows ? " rows" : " columns") + ", hidden size " + std::to_string(dims.d_model) +
         "; from " + dims.source;
}

/// The role's tensor in canonical [out, in] form, its shape checked.
RowMatrixF load_role(const Checkpoint& checkpoint, const Dims& dims, const std::string& name,
                     char role) {
  const Index rows = role_rows(dims, role);
  const Index cols = role_cols(dims, role);
  const std::string why = shape_reason(dims, role);
  if (!dims.in_out) return detail::load_matrix(checkpoint, name, rows, cols, why);
  return detail::load_matrix(checkpoint, name, cols, rows, why).transpose();
}

}  // namespace

/// Checks a role's tensor shape from its metadata only (detection time: nothing is read).
void check_role_shape(const Checkpoint& checkpoint, const Dims& dims, const std::string& name,
                      char role) {
  Index rows = role_rows(dims, role);
  Index cols = role_cols(dims, role);
  if (dims.in_out) std::swap(rows, cols);
  detail::check_matrix_shape(checkpoint.at(name), rows, cols, shape_reason(dims, role));
}

namespace {

/// First row of head `head` of `role` ('q': a query head; 'k'/'v': a KV head) in a fused tensor.
Index fused_row(const Dims& dims, char role, int head) {
  const int group = dims.heads / dims.kv_heads;
  Index block = 0;
  if (dims.qkv_order == "grouped") {
    const int stride = group + 2;
    if (role == 'q') block = (head / group) * stride + head % group;
    if (role == 'k') block = head * stride + group;
    if (role == 'v') block = head * stride + group + 1;
  } else {
    if (role == 'q') block = head;
    if (role == 'k') block = dims.heads + head;
    if (role == 'v') block = dims.heads + dims.kv_heads + head;
  }
  return block * dims.head_dim;
}

class LayerProjections {
 public:
  LayerProjections(const Checkpoint& checkpoint, const ModelLayout& layout, int layer)
      : checkpoint_(checkpoint), layout_(layout), dims_(dims_of(layout)), layer_(layer) {}

  /// q [H·d_h, d], k / v [H_kv·d_h, d], o [d, H·d_h].
  RowMatrixF get(char role) {
    const bool fused = layout_.details.count("qkv") > 0;
    if (role == 'o' || !fused)
      return load_role(checkpoint_, dims_, name(std::string(1, role)), role);
    if (!fused_) fused_ = load_role(checkpoint_, dims_, name("qkv"), 'f');
    const int count = role == 'q' ? dims_.heads : dims_.kv_heads;
    RowMatrixF rows(count * dims_.head_dim, dims_.d_model);
    for (int h = 0; h < count; ++h)
      rows.middleRows(h * dims_.head_dim, dims_.head_dim) =
          fused_->middleRows(fused_row(dims_, role, h), dims_.head_dim);
    return rows;
  }

 private:
  std::string name(const std::string& role) const {
    auto it = layout_.details.find(role);
    if (it == layout_.details.end())
      throw Error(checkpoint_.path().string(),
                  "this checkpoint has no " + role + " projection tensors");
    return layer_name(it->second, layer_);
  }

  const Checkpoint& checkpoint_;
  const ModelLayout& layout_;
  Dims dims_;
  int layer_;
  std::optional<RowMatrixF> fused_;
};

}  // namespace

HeadFactors dense_factors(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                          Repr repr) {
  LayerProjections projections(checkpoint, layout, layer);
  const int heads = layout.heads;
  const int group = layout.heads / layout.kv_heads;
  const Index head_dim = layout.head_dim;
  HeadFactors factors;
  switch (repr) {
    case Repr::qk:  // QK-norm gains scale the rows the dot product sees (norm_gains.cpp)
      factors.left = detail::row_block_side(
          fold_qk_norm(checkpoint, layout, layer, 'q', projections.get('q')), heads, head_dim, 1);
      factors.right =
          detail::row_block_side(fold_qk_norm(checkpoint, layout, layer, 'k', projections.get('k')),
                                 heads, head_dim, group);
      break;
    case Repr::ov:
      factors.left = detail::column_block_side(projections.get('o'), heads, head_dim);
      factors.right = detail::row_block_side(projections.get('v'), heads, head_dim, group);
      break;
    case Repr::k:  // the cached key is the normalised one
      factors.left =
          detail::row_block_side(fold_qk_norm(checkpoint, layout, layer, 'k', projections.get('k')),
                                 heads, head_dim, group);
      factors.symmetric = true;
      break;
    case Repr::v:
      factors.left = detail::row_block_side(projections.get('v'), heads, head_dim, group);
      factors.symmetric = true;
      break;
  }
  return factors;
}

}  // namespace kvrank::dense

// Captured activations (`--activations`), docs/activations.md: per-layer Q/K/V of T tokens replace
// the weights, with d replaced by T.
//
// Tensors (any file format kvrank reads; docs/activations.md): `layers.{i}.q` [T, H, d_h],
// `layers.{i}.k` and `layers.{i}.v` [T, H_kv, d_h] — or [B, H, T, d_h], the layout of the
// attention modules' own tensors, with the batch folded into the tokens. Query head h uses key
// head h / (H / H_kv).
//
//   qk: A_h = Q_h K_hᵀ (T × T)      k: A_h = K_h K_hᵀ      v: A_h = V_h V_hᵀ
// The basis rows are the d_h columns of every head over the tokens (a transpose of the capture),
// so the Gram is (H·d_h)², never T × T.
//
// Reported: family "activations", d_model = T (the dimension A_h acts on), variant from H and
// H_kv. Without `layers.{i}.q` only `k` and `v` can be analysed (has_queries = false); `ov` never
// (no output projection is captured).
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kvrank/base/error.hpp"
#include "layout/family_detail.hpp"
#include "layout/layer_scan.hpp"

namespace kvrank::detail {

namespace {

/// A capture seen as heads × head_dim columns over tokens.
struct CaptureShape {
  Index tokens = 0;
  int heads = 0;
  Index head_dim = 0;
};

CaptureShape capture_shape(const TensorView& tensor) {
  const auto& s = tensor.shape;
  if (s.size() != 3 && s.size() != 4) {
    throw Error(tensor.file, tensor.name,
                "expected captured activations of shape [T, heads, head_dim] or "
                "[batch, heads, T, head_dim], found " +
                    tensor.shape_string());
  }
  // No tokens means no attention pattern to compare: refused rather than reported as erank 0.
  // A non-empty tensor's extents are bounded by its bytes, so the products below cannot overflow.
  if (tensor.numel() == 0) {
    throw Error(tensor.file, tensor.name,
                "holds no activations (shape " + tensor.shape_string() +
                    "): expected at least one token, head and head dimension");
  }
  if (s[1] > std::numeric_limits<int>::max()) {
    throw Error(tensor.file, tensor.name, "too many heads: shape " + tensor.shape_string());
  }
  if (s.size() == 3) return {s[0], static_cast<int>(s[1]), s[2]};
  return {s[0] * s[2], static_cast<int>(s[1]), s[3]};
}

std::string name_of(const ActivationTensors& tensors, int layer, const char* which) {
  return tensors.prefix + std::to_string(layer) + "." + which;
}

std::string capture_shape_text(const CaptureShape& shape) {
  return std::to_string(shape.tokens) + " tokens, " + std::to_string(shape.heads) + " heads of " +
         std::to_string(shape.head_dim);
}

// Basis rows [h·d_h + a] = column a of head h over all tokens (batch-major for 4-D captures).
RowMatrixF head_columns(const TensorView& tensor, const CaptureShape& shape) {
  const std::vector<float> values = to_f32(tensor);
  const Index heads = shape.heads;
  const Index d_h = shape.head_dim;
  RowMatrixF basis(heads * d_h, shape.tokens);
  if (tensor.shape.size() == 3) {  // [T, H, d_h]
    const ConstRowMapF rows(values.data(), shape.tokens, heads * d_h);
    basis = rows.transpose();
  } else {  // [B, H, T, d_h]: each (b, h) slab is T × d_h
    const Index batch = tensor.shape[0];
    const Index steps = tensor.shape[2];
    for (Index b = 0; b < batch; ++b) {
      for (Index h = 0; h < heads; ++h) {
        const ConstRowMapF slab(values.data() + (b * heads + h) * steps * d_h, steps, d_h);
        basis.block(h * d_h, b * steps, d_h, steps) = slab.transpose();
      }
    }
  }
  return basis;
}

// The side of `which` ("q", "k", "v") for the layout's query heads. `like` (the query capture, for
// the keys of `qk`) fixes the token count and head size the capture must have.
FactorSide capture_side(const Checkpoint& checkpoint, const ModelLayout& layout,
                        const ActivationTensors& tensors, int layer, const char* which,
                        const CaptureShape* like = nullptr) {
  const TensorView& tensor = checkpoint.at(name_of(tensors, layer, which));
  const CaptureShape shape = capture_shape(tensor);
  if (like && (shape.tokens != like->tokens || shape.head_dim != like->head_dim)) {
    throw Error(tensor.file, tensor.name,
                "expected " + std::to_string(like->tokens) + " tokens and head_dim " +
                    std::to_string(like->head_dim) + " (as " + name_of(tensors, layer, "q") +
                    "), found " + capture_shape_text(shape) + " (shape " + tensor.shape_string() +
                    ")");
  }
  if (shape.heads <= 0 || layout.heads % shape.heads != 0) {
    throw Error(tensor.file, tensor.name,
                "expected a head count dividing the " + std::to_string(layout.heads) +
                    " query heads, found " + capture_shape_text(shape) + " (shape " +
                    tensor.shape_string() + ")");
  }
  return row_block_side(head_columns(tensor, shape), layout.heads, shape.head_dim,
                        layout.heads / shape.heads);
}

}  // namespace

ModelLayout detect_activations(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  const LayerScan scan = scan_layers(checkpoint, ".k");
  if (scan.count == 0) {
    throw Error(checkpoint.path().string(),
                "--activations: no captured keys found: expected tensors named layers.{i}.k "
                "(with layers.{i}.q and layers.{i}.v), see docs/activations.md");
  }
  const TensorView& keys = checkpoint.at(scan.prefix + "0.k");
  const CaptureShape key_shape = capture_shape(keys);
  const TensorView* queries = checkpoint.find(scan.prefix + "0.q");

  ModelLayout layout;
  layout.family = Family::activations;
  layout.kv_heads = key_shape.heads;
  layout.heads = key_shape.heads;
  if (queries) {
    layout.heads = capture_shape(*queries).heads;
  } else if (overrides.heads) {
    layout.heads = *overrides.heads;
  }
  layout.head_dim = static_cast<int>(key_shape.head_dim);
  layout.d_model = static_cast<int>(key_shape.tokens);
  layout.num_layers = scan.count;
  layout.has_queries = queries != nullptr;
  layout.has_outputs = false;
  layout.tensors = ActivationTensors{scan.prefix};
  if (layout.kv_heads <= 0 || layout.heads % layout.kv_heads != 0) {
    throw Error(keys.file, keys.name,
                "expected a key head count dividing the " + std::to_string(layout.heads) +
                    " query heads, found shape " + keys.shape_string());
  }
  layout.variant = attention_variant(layout.heads, layout.kv_heads);
  return layout;
}

HeadFactors activation_factors(const Checkpoint& checkpoint, const ModelLayout& layout,
                               const ActivationTensors& tensors, int layer, Repr repr) {
  HeadFactors factors;
  switch (repr) {
    case Repr::qk: {
      const TensorView& queries = checkpoint.at(name_of(tensors, layer, "q"));
      const CaptureShape query_shape = capture_shape(queries);
      if (query_shape.heads != layout.heads) {
        throw Error(queries.file, queries.name,
                    "expected " + std::to_string(layout.heads) + " heads (as in layer 0), found " +
                        queries.shape_string());
      }
      factors.left = capture_side(checkpoint, layout, tensors, layer, "q");
      factors.right = capture_side(checkpoint, layout, tensors, layer, "k", &query_shape);
      break;
    }
    case Repr::k:
      factors.left = capture_side(checkpoint, layout, tensors, layer, "k");
      factors.symmetric = true;
      break;
    case Repr::v:
      factors.left = capture_side(checkpoint, layout, tensors, layer, "v");
      factors.symmetric = true;
      break;
    case Repr::ov:
      throw Error(checkpoint.path().string(),
                  "--repr ov needs output projections; captured activations hold only q, k, v");
  }
  return factors;
}

std::vector<std::string> activation_tensor_names(const ActivationTensors& tensors, int layer) {
  return {name_of(tensors, layer, "q"), name_of(tensors, layer, "k"), name_of(tensors, layer, "v")};
}

}  // namespace kvrank::detail

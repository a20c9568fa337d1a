// A checkpoint's plan (plan.hpp): which models can be planned, each layer's cross-Grams from the
// basis Grams of diversity.hpp, and the per-layer plans.
#include <algorithm>
#include <filesystem>

#include "analysis/plan_detail.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/metric/diversity.hpp"

namespace kvrank {
namespace {

/// --objective: what the groups minimise (merge: key_error + value_error; qk: qk_error).
constexpr std::array<Named<PlanObjective>, 2> kObjectives{
    {{PlanObjective::merge, "merge"}, {PlanObjective::qk, "qk"}}};
static_assert(in_enum_order(kObjectives));

/// Basis row of each head's d_h columns; throws unless every head is a plain slice of its basis.
std::vector<Index> head_rows(const FactorSide& side, const std::string& path, const char* what) {
  std::vector<Index> rows;
  for (const auto& blocks : side.heads) {
    const Index row = identity_slice_row(blocks, side.head_cols);
    if (row < 0)
      throw Error(path, std::string("plan needs each head's own ") + what +
                            " rows (a dense projection); this layout builds them from a "
                            "shared latent");
    rows.push_back(row);
  }
  return rows;
}

/// The Gram of a side's basis in double, scaled back by its exponent (factors.hpp).
MatrixD scaled_gram(const FactorSide& side) {
  MatrixD gram = basis_gram(side.basis);
  if (side.exponent != 0) gram *= std::ldexp(1.0, 2 * side.exponent);
  return gram;
}

/// Gram blocks of the heads at `rows` (d_h each), packed head by head.
MatrixD packed(const MatrixD& gram, const std::vector<Index>& rows, Index d) {
  const Index n = static_cast<Index>(rows.size());
  MatrixD out(n * d, n * d);
  for (Index i = 0; i < n; ++i)
    for (Index j = 0; j < n; ++j)
      out.block(i * d, j * d, d, d) = gram.block(rows[i], rows[j], d, d);
  return out;
}

/// [K; V] [K; V]ᵀ from the two bases (one SYRK over the stacked rows).
MatrixD stacked_gram(const FactorSide& keys, const FactorSide& values) {
  RowMatrixF both(keys.basis.rows() + values.basis.rows(), keys.basis.cols());
  both << keys.basis, values.basis;
  MatrixD gram = basis_gram(both);
  const Index k = keys.basis.rows();
  const Index v = values.basis.rows();
  gram.topLeftCorner(k, k) *= std::ldexp(1.0, 2 * keys.exponent);
  gram.bottomRightCorner(v, v) *= std::ldexp(1.0, 2 * values.exponent);
  gram.topRightCorner(k, v) *= std::ldexp(1.0, keys.exponent + values.exponent);
  gram.bottomLeftCorner(v, k) *= std::ldexp(1.0, keys.exponent + values.exponent);
  return gram;
}

/// K and V sides' distinct heads must be the basis's rows in order (kv head k at k·d_h).
void check_kv_basis(const FactorSide& side, int kv_heads, Index d, const std::string& path) {
  if (side.basis.rows() != kv_heads * d)
    throw Error(path, "plan expected " + std::to_string(kv_heads) + " key/value heads of " +
                          std::to_string(d) + " rows, found " + std::to_string(side.basis.rows()) +
                          " rows");
}

}  // namespace

PlanLayerGrams plan_layer_grams(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                                bool need_outputs, bool need_stacked) {
  const std::string path = checkpoint.path().string();
  const Index d = layout.head_dim;
  PlanLayerGrams g;
  g.layer = layer;
  g.head_dim = layout.head_dim;
  const HeadFactors keys =
      layer_factors(checkpoint, layout, layer, layout.has_queries ? Repr::qk : Repr::k);
  const FactorSide& key_side = layout.has_queries ? keys.right : keys.left;
  check_kv_basis(key_side, layout.kv_heads, d, path);
  for (Index row : head_rows(key_side, path, "key"))
    g.kv_of_head.push_back(static_cast<int>(row / d));
  const HeadFactors values = layer_factors(
      checkpoint, layout, layer, layout.has_queries && layout.has_outputs ? Repr::ov : Repr::v);
  const FactorSide& value_side = values.symmetric ? values.left : values.right;
  check_kv_basis(value_side, layout.kv_heads, d, path);
  if (need_stacked) {
    g.keys_values = stacked_gram(key_side, value_side);
    const Index kv = key_side.basis.rows();
    g.keys = g.keys_values.topLeftCorner(kv, kv);
    g.values = g.keys_values.bottomRightCorner(kv, kv);
  } else {
    g.keys = scaled_gram(key_side);
    g.values = scaled_gram(value_side);
  }
  if (layout.has_queries)
    g.queries = packed(scaled_gram(keys.left), head_rows(keys.left, path, "query"), d);
  if (need_outputs && !values.symmetric) {
    const std::vector<Index> rows = head_rows(values.left, path, "output");
    g.outputs.resize(static_cast<Index>(rows.size()) * d, d);
    const double scale = std::ldexp(1.0, 2 * values.left.exponent);
    for (std::size_t h = 0; h < rows.size(); ++h) {
      const MatrixD block = values.left.basis.middleRows(rows[h], d).cast<double>();
      g.outputs.middleRows(Index(h) * d, d) = scale * block * block.transpose();
    }
  }
  return g;
}

void check_plannable(const Checkpoint& checkpoint, const ModelLayout& layout,
                     const PlanOptions& options) {
  const std::string path = checkpoint.path().string();
  if (!std::holds_alternative<DenseTensors>(layout.tensors) || layout.variant == Variant::mla ||
      layout.variant == Variant::lrkv)
    throw Error(path, "plan groups per-head key/value projections; this " +
                          std::string(variant_name(layout.variant)) +
                          " model has none to group (its keys and values come from a shared "
                          "latent)");
  const int g = options.kv_heads_after;
  if (g < 1 || g > layout.kv_heads || layout.kv_heads % g != 0)
    throw Error(path, "--kv-heads " + std::to_string(g) + " must divide the model's " +
                          std::to_string(layout.kv_heads) + " key/value heads");
  if (!plan_refits(options)) return;
  if (!options.align) throw Error(path, "--refit " + std::string(kRefitNeedsAlignment));
  if (!layout.has_queries || !layout.has_outputs)  // before any layer: no partial output
    throw Error(path, std::string("plan refits q_proj rows and o_proj columns by default; this "
                                  "checkpoint has no ") +
                          (layout.has_queries ? "output" : "query") +
                          " projections: give --no-refit for the mean-pool conversion");
}

namespace {

std::vector<int> plan_layers(const ModelLayout& layout, const std::string& path,
                             const std::string& text) {
  const std::vector<int> all = attention_layer_list(layout);
  if (text.empty()) return all;
  std::vector<int> chosen = parse_layer_list(text);
  for (int layer : chosen)
    if (std::find(all.begin(), all.end(), layer) == all.end())
      throw Error(path, "--layers: layer " + std::to_string(layer) +
                            " is not an attention layer of the model (" + format_layer_list(all) +
                            ")");
  return chosen;
}

}  // namespace

PlanModel plan_checkpoint(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                          const PlanOptions& options, const std::string& label) {
  const ModelLayout layout = detect_layout(checkpoint, overrides);
  check_plannable(checkpoint, layout, options);
  const std::string path = checkpoint.path().string();
  const std::vector<int> layers = plan_layers(layout, path, options.layers);
  const RopeLayout rope =
      options.align ? model_rope(checkpoint, layout, options.rope) : RopeLayout{};
  const KeyGauge keys = key_gauge(rope, layout.head_dim, options.align);
  PlanModel model;
  model.label = label.empty() ? std::filesystem::path(path).filename().string() : label;
  model.path = path;
  model.family = family_name(layout.family);
  model.model_type = layout.model_type;
  model.heads = layout.heads;
  model.kv_heads = layout.kv_heads;
  model.kv_heads_after = options.kv_heads_after;
  model.head_dim = layout.head_dim;
  model.key_gauge = key_gauge_name(keys, rope, layout.head_dim);
  model.value_gauge = options.align ? "orthogonal" : "none";
  model.objective = options.objective;
  model.random_partitions = options.random_partitions;
  model.latent_energy = options.latent_energy;
  model.refit = plan_refits(options);
  const bool latent = options.latent_energy.has_value();
  for (int layer : layers) {
    const PlanLayerGrams grams =
        plan_layer_grams(checkpoint, layout, layer, latent || model.refit, latent);
    model.layers.push_back(plan_layer(grams, keys, options.align, options));
    release_layer(checkpoint, layout, layer);
  }
  return model;
}

std::string_view plan_objective_name(PlanObjective objective) noexcept {
  return name_of(kObjectives, objective);
}

PlanObjective parse_plan_objective(std::string_view name) {
  if (const auto objective = value_named(kObjectives, name)) return *objective;
  throw Error("", "--objective: " + expected_name(kObjectives, name));
}

std::vector<std::string> plan_objective_names() { return names_of(kObjectives); }

}  // namespace kvrank

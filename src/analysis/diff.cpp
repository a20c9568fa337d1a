// `kvrank diff` (analysis/diff.hpp): the per-head cross-Grams of two checkpoints, and the layer by
// layer comparison around them.
#include "kvrank/analysis/diff.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kvrank/analysis/analysis.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/report/result_files.hpp"

namespace kvrank {
namespace {

/// Whether every head of `side` is a plain slice of its basis (MHA/GQA/MQA, activations).
bool plain_slices(const FactorSide& side) {
  return std::all_of(side.heads.begin(), side.heads.end(), [&](const auto& blocks) {
    return identity_slice_row(blocks, side.head_cols) >= 0;
  });
}

/// C_h (basis rows × head columns) as a dense matrix.
MatrixD dense_coefficients(const FactorSide& side, std::size_t head) {
  MatrixD coefficients = MatrixD::Zero(side.basis.rows(), side.head_cols);
  for (const CoeffBlock& block : side.heads[head])
    coefficients.block(block.basis_row, block.head_col, block.rows(), block.cols()) +=
        block.in_double();
  return coefficients;
}

/// L_hᵀ L'_h for every head h, in double. Plain slices: the product of the two heads' rows
/// (d_h × d_h over d). Otherwise C_hᵀ (B B'ᵀ) C'_h from the cross-Gram of the two bases, which is
/// as small as what the layouts cache (MLA: (c + r)², whatever H and d are).
std::vector<MatrixD> cross_products(const FactorSide& a, const FactorSide& b) {
  std::vector<MatrixD> products(a.heads.size());
  if (plain_slices(a) && plain_slices(b)) {
    for (std::size_t h = 0; h < a.heads.size(); ++h) {
      const Index row_a = identity_slice_row(a.heads[h], a.head_cols);
      const Index row_b = identity_slice_row(b.heads[h], b.head_cols);
      products[h] = a.basis.middleRows(row_a, a.head_cols).cast<double>() *
                    b.basis.middleRows(row_b, b.head_cols).cast<double>().transpose();
    }
    return products;
  }
  const MatrixD gram = a.basis.cast<double>() * b.basis.cast<double>().transpose();
  for (std::size_t h = 0; h < a.heads.size(); ++h)
    products[h] = dense_coefficients(a, h).transpose() * gram * dense_coefficients(b, h);
  return products;
}

/// ⟨A_h, B_h⟩_F for every head from the two sides' cross products (metric.md §2).
std::vector<double> form_inner_products(const HeadFactors& a, const HeadFactors& b) {
  const std::vector<MatrixD> left = cross_products(a.left, b.left);
  const std::vector<MatrixD> right = a.symmetric ? left : cross_products(a.right, b.right);
  std::vector<double> inner(left.size());
  for (std::size_t h = 0; h < left.size(); ++h) inner[h] = left[h].cwiseProduct(right[h]).sum();
  return inner;
}

void check_comparable(const HeadFactors& a, const HeadFactors& b) {
  std::string problem;
  if (a.num_heads() != b.num_heads())
    problem = std::to_string(a.num_heads()) + " vs " + std::to_string(b.num_heads()) + " heads";
  else if (a.symmetric != b.symmetric)
    problem = "a symmetric form and an asymmetric one";
  else if (a.left.basis.cols() != b.left.basis.cols() ||
           (!a.symmetric && a.right.basis.cols() != b.right.basis.cols()))
    problem = "forms of different widths (" + std::to_string(a.left.basis.cols()) + " vs " +
              std::to_string(b.left.basis.cols()) + ")";
  if (!problem.empty()) throw Error("", "cannot compare the heads of the two models: " + problem);
}

}  // namespace

std::vector<double> head_similarity(const HeadFactors& a, const HeadFactors& b) {
  check_comparable(a, b);
  // Self and cross products by the same code: identical factors give bitwise equal numbers, so
  // x / sqrt(x · x) is exactly 1.
  const std::vector<double> between = form_inner_products(a, b);
  const std::vector<double> norm_a = form_inner_products(a, a);
  const std::vector<double> norm_b = form_inner_products(b, b);
  std::vector<double> similarity(between.size(), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t h = 0; h < between.size(); ++h) {
    if (!(norm_a[h] > 0) || !(norm_b[h] > 0)) continue;  // a zero head: no direction to compare
    similarity[h] = std::clamp(between[h] / std::sqrt(norm_a[h] * norm_b[h]), -1.0, 1.0);
  }
  return similarity;
}

bool is_result_file(const std::filesystem::path& path) {
  return ascii_lower(path.extension().string()) == ".json" &&
         std::filesystem::is_regular_file(path);
}

// ----------------------------------------------------------------------------------------------
// Two checkpoints
// ----------------------------------------------------------------------------------------------
namespace {

/// diff's default representations: qk and ov where the layout has them, else k and v.
std::vector<Repr> default_reprs(const ModelLayout& layout) {
  const bool ov = layout.has_outputs && layout.has_values;
  if (layout.has_queries) return ov ? std::vector{Repr::qk, Repr::ov} : std::vector{Repr::qk};
  return layout.has_values ? std::vector{Repr::k, Repr::v} : std::vector{Repr::k};
}

AnalyzeOptions analyze_options(const DiffOptions& options, std::vector<Repr> reprs) {
  AnalyzeOptions analyze;
  analyze.reprs = std::move(reprs);
  analyze.layers = options.layers;
  analyze.layout = options.layout;
  analyze.attention = options.attention;
  analyze.open = options.open;
  analyze.head_ranks = HeadRanks::skipped;  // diff reports no per-head rank
  analyze.note = options.note;
  return analyze;
}

struct OpenedModel {
  Checkpoint checkpoint;
  std::vector<ModelLayout> series;  ///< the attention series options.attention chooses
};

OpenedModel open_model(const ModelInput& input, const DiffOptions& options) {
  OpenedModel model{Checkpoint::open(input.path, options.open), {}};
  for (ModelLayout& layout : detect_series(model.checkpoint, options.layout))
    if (attention_chosen(options.attention, layout.attention))
      model.series.push_back(std::move(layout));
  return model;
}

/// The refusal of diff: before any layer is read, one line naming the first difference.
void check_same_shape(const OpenedModel& a, const OpenedModel& b) {
  if (a.series.size() != b.series.size())
    throw Error("", "the models differ in geometry: " + std::to_string(a.series.size()) + " vs " +
                        std::to_string(b.series.size()) +
                        " attention series (diff compares models of one shape)");
  for (std::size_t s = 0; s < a.series.size(); ++s) {
    ModelReport shape_a, shape_b;
    shape_a.geometry = static_cast<const ModelGeometry&>(a.series[s]);
    shape_a.attention_layers = a.series[s].attention_layers;
    shape_b.geometry = static_cast<const ModelGeometry&>(b.series[s]);
    shape_b.attention_layers = b.series[s].attention_layers;
    check_same_geometry(shape_a, shape_b);
  }
}

SeriesDiff& find_pair(std::vector<SeriesDiff>& pairs, const ModelLayout& layout, Repr repr) {
  for (SeriesDiff& pair : pairs)
    if (pair.a.repr == repr_name(repr) && pair.a.attention == layout.attention) return pair;
  throw Error("", "internal: no result for representation " + std::string(repr_name(repr)));
}

/// head_similarity of every layer of every pair, one layer of both checkpoints read at a time.
void compare_heads(const OpenedModel& a, const OpenedModel& b, const std::vector<Repr>& reprs,
                   std::vector<SeriesDiff>& pairs) {
  for (std::size_t s = 0; s < a.series.size(); ++s) {
    const ModelLayout& layout_a = a.series[s];
    const ModelLayout& layout_b = b.series[s];
    const std::vector<LayerMetrics>& layers = find_pair(pairs, layout_a, reprs.front()).a.layers;
    for (const LayerMetrics& layer : layers) {
      for (Repr repr : reprs) {
        find_pair(pairs, layout_a, repr)
            .head_similarity.push_back(
                head_similarity(layer_factors(a.checkpoint, layout_a, layer.layer, repr),
                                layer_factors(b.checkpoint, layout_b, layer.layer, repr)));
      }
      for (const OpenedModel* model : {&a, &b}) {
        const ModelLayout& layout = model == &a ? layout_a : layout_b;
        for (const std::string& name : layer_tensor_names(layout, layer.layer))
          if (const TensorView* tensor = model->checkpoint.find(name))
            model->checkpoint.release(*tensor);
      }
    }
  }
}

}  // namespace

DiffResult diff_checkpoints(const ModelInput& a, const ModelInput& b, const DiffOptions& options) {
  const OpenedModel model_a = open_model(a, options);
  const OpenedModel model_b = open_model(b, options);
  check_same_shape(model_a, model_b);
  if (model_a.series.empty())
    throw Error(a.argument, "--attention " + std::string(attention_choice_name(options.attention)) +
                                ": the model has no such attention");
  const std::vector<Repr> reprs =
      options.reprs.empty() ? default_reprs(model_a.series.front()) : options.reprs;
  const AnalyzeOptions analyze = analyze_options(options, reprs);
  DiffResult result;
  result.series = pair_reports(analyze_checkpoint(a, a.label, analyze),
                               analyze_checkpoint(b, b.label, analyze), a.argument, b.argument);
  compare_heads(model_a, model_b, reprs, result.series);
  result.heads_compared = true;
  return result;
}

// ----------------------------------------------------------------------------------------------
// Result files
// ----------------------------------------------------------------------------------------------
namespace {

/// The models of a result file, those of `reprs` (all when empty) and of `layers` (all when
/// empty).
std::vector<ModelReport> read_results(const ModelInput& input, const std::vector<Repr>& reprs,
                                      const std::optional<std::vector<int>>& layers) {
  std::vector<ModelReport> chosen;
  for (ModelReport& model : reports_from_json(read_json_object(input.path), input.path.string())) {
    const bool wanted = reprs.empty() || std::any_of(reprs.begin(), reprs.end(), [&](Repr r) {
                          return model.repr == repr_name(r);
                        });
    if (!wanted) continue;
    if (layers)
      std::erase_if(model.layers, [&](const LayerMetrics& layer) {
        return std::find(layers->begin(), layers->end(), layer.layer) == layers->end();
      });
    chosen.push_back(std::move(model));
  }
  return chosen;
}

/// The representations of a result file's models, in order, each once.
std::vector<Repr> reprs_of(const std::vector<ModelReport>& models) {
  std::vector<Repr> reprs;
  for (const ModelReport& model : models) {
    if (is_baseline(model)) continue;
    const Repr repr = parse_repr(model.repr);
    if (std::find(reprs.begin(), reprs.end(), repr) == reprs.end()) reprs.push_back(repr);
  }
  return reprs;
}

}  // namespace

DiffResult diff_models(const ModelInput& a, const ModelInput& b, const DiffOptions& options) {
  const bool a_results = is_result_file(a.path);
  const bool b_results = is_result_file(b.path);
  if (!a_results && !b_results) return diff_checkpoints(a, b, options);
  // One side a result file: the other side is measured in the representations the file holds.
  std::vector<ModelReport> a_models, b_models;
  if (a_results) a_models = read_results(a, options.reprs, options.layers);
  if (b_results) b_models = read_results(b, options.reprs, options.layers);
  const std::vector<Repr> reprs =
      options.reprs.empty() ? reprs_of(a_results ? a_models : b_models) : options.reprs;
  if (!a_results) a_models = analyze_checkpoint(a, a.label, analyze_options(options, reprs));
  if (!b_results) b_models = analyze_checkpoint(b, b.label, analyze_options(options, reprs));
  DiffResult result;
  result.series = pair_reports(std::move(a_models), std::move(b_models), a.argument, b.argument);
  return result;
}

}  // namespace kvrank

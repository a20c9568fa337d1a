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
#include "metric/blas.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank {
namespace {

/// C_h (basis rows × head columns) as a dense matrix.
MatrixD dense_coefficients(const FactorSide& side, std::size_t head) {
  MatrixD coefficients = MatrixD::Zero(side.basis.rows(), side.head_cols);
  for (const CoeffBlock& block : side.heads[head])
    coefficients.block(block.basis_row, block.head_col, block.rows(), block.cols()) +=
        block.in_double();
  return coefficients;
}

/// One side's products of head h of the two models: L_hᵀ L'_h and the two self products L_hᵀ L_h,
/// L'_hᵀ L'_h; and whether the two heads' factors are equal, value for value.
struct SideProducts {
  MatrixD cross, self_a, self_b;
  bool identical = false;
};

/// The products of the rows [A; B] from their Gram [A; B][A; B]ᵀ: A Aᵀ, B Bᵀ and A Bᵀ in one
/// product of 2/3 the multiply-adds of the three, by the metric layer's SYRK accumulated in double
/// (metric/blas.hpp; OpenBLAS's DSYRK where kvrank has it). Not its float32
/// Gram: the cosine sums products of these entries, and a head whose factors are ill-conditioned
/// (a gauge L_h M, R_h M⁻ᵀ) cancels there; float32 left errors of 6e-4 on the e2e test's gauged
/// heads, double 2e-10 (docs/diff.md).
SideProducts stacked_products(const Eigen::Ref<const RowMatrixF>& a,
                              const Eigen::Ref<const RowMatrixF>& b) {
  RowMatrixF stack(a.rows() + b.rows(), a.cols());
  stack.topRows(a.rows()) = a;
  stack.bottomRows(b.rows()) = b;
  const MatrixD gram =
      detail::syrk_in_double(stack.rows(), stack.cols(), stack.data(), stack.cols());
  return {gram.topRightCorner(a.rows(), b.rows()), gram.topLeftCorner(a.rows(), a.rows()),
          gram.bottomRightCorner(b.rows(), b.rows()),
          a.rows() == b.rows() && (a.array() == b.array()).all()};
}

/// fn(h) for every head, one head per thread: the products of a head are too small to gain much
/// from a second thread, independent ones fully (metric/diversity.cpp), and each head's bits then
/// do not depend on the thread count. A pthreads OpenBLAS must not be called from the loop
/// (metric/blas.hpp): then one head after the other.
template <typename PerHead>
void for_each_head(std::size_t count, const PerHead& fn) {
  const auto heads = static_cast<std::ptrdiff_t>(count);
  detail::ParallelFailure failure;
#pragma omp parallel for schedule(dynamic) if (heads > 1 && detail::blas_nests_in_openmp())
  for (std::ptrdiff_t h = 0; h < heads; ++h) failure.run([&] { fn(static_cast<std::size_t>(h)); });
  failure.rethrow();
}

/// xᵀ G y (k × k) for coefficients x, y (m × k): (xᵀ G) y on the BLAS's dgemm (metric/blas.hpp's
/// product, on the calling thread), where Eigen's product built for baseline x86-64 took a
/// DeepSeek-V3 layer's diff 31 s (m = 1536 query rows, 128 heads).
MatrixD sandwich(const MatrixD& x, const MatrixD& gram, const MatrixD& y) {
  const MatrixD x_t = x.transpose();
  return detail::product(detail::product(x_t, gram), y);
}

/// SideProducts of every head. Plain slices: one stacked Gram per head, 2 d_h rows over d.
/// Otherwise C_hᵀ G C'_h from the Gram of the two bases stacked, which is as small as what the
/// layouts cache (MLA: (c + r)², whatever H and d are).
std::vector<SideProducts> side_products(const FactorSide& a, const FactorSide& b) {
  std::vector<SideProducts> products(a.heads.size());
  if (plain_slices(a) && plain_slices(b)) {
    for_each_head(products.size(), [&](std::size_t h) {
      products[h] = stacked_products(
          a.basis.middleRows(identity_slice_row(a.heads[h], a.head_cols), a.head_cols),
          b.basis.middleRows(identity_slice_row(b.heads[h], b.head_cols), b.head_cols));
    });
    return products;
  }
  const SideProducts bases = stacked_products(a.basis, b.basis);
  for_each_head(products.size(), [&](std::size_t h) {
    const MatrixD c_a = dense_coefficients(a, h);
    const MatrixD c_b = dense_coefficients(b, h);
    products[h] = {sandwich(c_a, bases.cross, c_b), sandwich(c_a, bases.self_a, c_a),
                   sandwich(c_b, bases.self_b, c_b),
                   bases.identical && c_a.rows() == c_b.rows() && c_a == c_b};
  });
  return products;
}

/// ⟨A_h, B_h⟩_F, ‖A_h‖², ‖B_h‖² from the two sides' products
/// (metric.md §2: ⟨A_h, B_h⟩_F = Σ_ab (L_hᵀ L'_h)_ab (R_hᵀ R'_h)_ab), and the cosine. Heads whose
/// factors are equal on both sides get exactly 1: the SYRK may form the cross and the self blocks
/// of a stack in different orders, which may differ in the last bit.
std::vector<double> cosines(const HeadFactors& a, const HeadFactors& b) {
  const std::vector<SideProducts> left = side_products(a.left, b.left);
  const std::vector<SideProducts> right = a.symmetric ? left : side_products(a.right, b.right);
  std::vector<double> similarity(left.size(), std::numeric_limits<double>::quiet_NaN());
  for (std::size_t h = 0; h < left.size(); ++h) {
    const double between = left[h].cross.cwiseProduct(right[h].cross).sum();
    const double norm_a = left[h].self_a.cwiseProduct(right[h].self_a).sum();
    const double norm_b = left[h].self_b.cwiseProduct(right[h].self_b).sum();
    if (!(norm_a > 0) || !(norm_b > 0)) continue;  // a zero head: no direction to compare
    similarity[h] = left[h].identical && right[h].identical
                        ? 1.0
                        : std::clamp(between / std::sqrt(norm_a * norm_b), -1.0, 1.0);
  }
  return similarity;
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
  return cosines(a, b);
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
      release_layer(a.checkpoint, layout_a, layer.layer);
      release_layer(b.checkpoint, layout_b, layer.layer);
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

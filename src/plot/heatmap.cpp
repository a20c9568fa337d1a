// Similarity heatmaps (svg.hpp): one layer's head-by-head similarity matrix.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kvrank/base/error.hpp"
#include "kvrank/base/layer_list.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/plot/svg.hpp"
#include "plot/head_order.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {

ColourScale similarity_scale(std::optional<ColourMap> map) {
  const ColourMap chosen = map.value_or(ColourMap::rdbu);
  return chosen == ColourMap::rdbu ? ColourScale{chosen, -1, 1} : ColourScale{chosen, 0, 1};
}

std::string similarity_colour_bar(const ColourScale& scale, bool clipped, double left, double top,
                                  double height, const std::string& label, double size) {
  std::string out = "<defs>" + scale.gradient("kvrank-colour-bar") + "</defs>\n";
  out += "<g class=\"colour-bar\"" + attr("data-colour-map", colour_map_name(scale.map)) +
         "><rect" + attr("x", left) + attr("y", top) + attr("width", 16 * size) +
         attr("height", height) +
         " fill=\"url(#kvrank-colour-bar)\" stroke=\"#262626\" stroke-width=\"0.8\"/>\n";
  const double step = (scale.high - scale.low) / 4;
  for (int i = 0; i <= 4; ++i) {
    const double value = scale.low + i * step;
    const double y = top + height * (1 - static_cast<double>(i) / 4);
    out +=
        line(left + 16 * size, y, left + 20 * size, y, " stroke=\"#262626\" stroke-width=\"0.8\"");
    const std::string tick = tick_label(value, step < 0.5 ? 2 : 1);
    out += text(left + 23 * size, y + 3.8 * size, (i == 0 && clipped ? "≤ " : "") + tick, 11 * size,
                Anchor::kStart);
  }
  const double label_x = left + 23 * size + text_width("-0.50", 11 * size) + 14 * size;
  const double label_y = top + height / 2;
  out += text(label_x, label_y, label, 12 * size, Anchor::kMiddle,
              attr("class", "colour-bar-label") +
                  attr("transform", "rotate(-90 " + num(label_x) + " " + num(label_y) + ")"));
  return out + "</g>\n";
}

}  // namespace kvrank::plot_detail

namespace kvrank {

// ---------------------------------------------------------------------------------------------
// Heatmap
// ---------------------------------------------------------------------------------------------
namespace {

using namespace plot_detail;

/// Indices (in the model) of the heads kept in S: all heads but the zero heads, in order.
std::vector<int> kept_heads(const LayerMetrics& layer, Index size) {
  std::vector<int> kept;
  for (int head = 0; static_cast<Index>(kept.size()) < size; ++head) {
    if (std::find(layer.zero_heads.begin(), layer.zero_heads.end(), head) ==
        layer.zero_heads.end()) {
      kept.push_back(head);
    }
  }
  return kept;
}

/// A similarity is a cosine: a value outside [-1, 1] (beyond round-off) means a damaged file, and
/// would silently be drawn in the end colour of the map.
void check_cosines(const ModelReport& model, int layer_index, const MatrixD& similarity) {
  for (Index i = 0; i < similarity.rows(); ++i) {
    for (Index j = 0; j < similarity.cols(); ++j) {
      const double value = similarity(i, j);
      if (std::fabs(value) <= 1 + 1e-6) continue;
      char found[96];
      std::snprintf(found, sizeof found, "similarity[%td][%td] = %g", i, j, value);
      throw Error("", "model \"" + model.label + "\" layer " + std::to_string(layer_index) + ": " +
                          found + " is not a cosine (outside [-1, 1])");
    }
  }
}

}  // namespace

namespace {

/// The layer of `model` with this index, holding a similarity matrix; the usage error listing the
/// layers it has otherwise.
const LayerMetrics& heatmap_layer(const ModelReport& model, int layer_index) {
  const std::string name = "model \"" + excerpt(model.label) + "\"";
  const auto found = std::find_if(model.layers.begin(), model.layers.end(),
                                  [&](const LayerMetrics& l) { return l.layer == layer_index; });
  if (found == model.layers.end()) {
    std::vector<int> layers;
    for (const LayerMetrics& layer : model.layers) layers.push_back(layer.layer);
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
    const std::string held =
        layers.empty() ? "no layers" : "layers " + excerpt(format_layer_list(layers));
    throw Error("",
                name + " has no layer " + std::to_string(layer_index) + " (it has " + held + ")");
  }
  if (found->similarity.size() == 0) {
    throw Error("", name + " layer " + std::to_string(layer_index) +
                        " has no similarity matrix (run analyze with --similarity)");
  }
  return *found;
}

/// Where the heatmap's parts go, in SVG units: its text scaled by --font-size (`size`, 1 at the
/// default 10 pt), its cells sized to --width/--height (or --size) when given, else 360 units over
/// the heads (3 to 48 each).
struct HeatmapMeasures {
  double size = 1;      ///< text scale
  bool fitted = false;  ///< cells fitted to --width/--height (else 360 units over the heads)
  double cell = 0, left = 0, top = 0, width = 0, height = 0;
};

HeatmapMeasures heatmap_measures(Index heads, const PlotOptions& options) {
  HeatmapMeasures m;
  m.size = options.font_pt / 10;
  m.left = 64 * m.size;
  m.top = 52 * m.size;
  const double right = (24 + 16 + 72) * m.size;  // the colour bar, its ticks and label
  const double bottom = 52 * m.size;
  const auto count = static_cast<double>(heads);
  m.cell = std::clamp(360.0 / count, 3.0, 48.0);
  m.fitted = options.width_in > 0 || options.height_in > 0;
  if (m.fitted) {
    m.cell = std::numeric_limits<double>::infinity();
    if (options.width_in > 0)
      m.cell = std::min(m.cell, (options.width_in * kUnitsPerInch - m.left - right) / count);
    if (options.height_in > 0)
      m.cell = std::min(m.cell, (options.height_in * kUnitsPerInch - m.top - bottom) / count);
  }
  m.width =
      options.width_in > 0 ? options.width_in * kUnitsPerInch : m.left + m.cell * count + right;
  m.height =
      options.height_in > 0 ? options.height_in * kUnitsPerInch : m.top + m.cell * count + bottom;
  if (m.cell * count < 30) {
    char text[200];
    std::snprintf(text, sizeof text,
                  "--width/--height: the heatmap's %td heads get %.2f in beside its labels (at "
                  "least %.2f in): give a larger --width/--height or a smaller --font-size",
                  heads, std::max(0.0, m.cell * count) / kUnitsPerInch, 30 / kUnitsPerInch);
    throw Error("", text);
  }
  return m;
}

std::string heatmap_cells(const MatrixD& similarity, const std::vector<int>& head_ids,
                          const ColourScale& scale, const HeatmapMeasures& m) {
  const double left = m.left, top = m.top, cell = m.cell;
  std::string out = "<g class=\"cells\" shape-rendering=\"crispEdges\">\n";
  const Index heads = similarity.rows();
  // The values written in the cells, where there are few and they fit.
  const bool annotate = heads <= 12 && cell >= text_width("-0.00", 10 * m.size) + 2;
  for (Index i = 0; i < heads; ++i) {
    for (Index j = 0; j < heads; ++j) {
      const double value = similarity(i, j);
      const double x = left + static_cast<double>(j) * cell;
      const double y = top + static_cast<double>(i) * cell;
      out += "<rect class=\"cell\"" + attr("x", x) + attr("y", y) + attr("width", cell) +
             attr("height", cell) + attr("fill", scale.colour(value)) +
             attr("data-value", tick_label(value, 6)) + "><title>head " +
             std::to_string(head_ids[static_cast<std::size_t>(i)]) + " · head " +
             std::to_string(head_ids[static_cast<std::size_t>(j)]) + ": " + tick_label(value, 4) +
             "</title></rect>\n";
      if (annotate) {
        out += text(x + cell / 2, y + cell / 2 + 3.5 * m.size, tick_label(value, 2), 10 * m.size,
                    Anchor::kMiddle, attr("fill", scale.dark(value) ? "white" : "#262626"));
      }
    }
  }
  return out + "</g>\n";
}

/// Head indices on both axes, thinned to at most 16 labels, and the axis names.
std::string head_axes(const std::vector<int>& head_ids, const HeatmapMeasures& m) {
  const double left = m.left, top = m.top, cell = m.cell, s = m.size;
  const auto heads = static_cast<std::size_t>(head_ids.size());
  const double size = cell * static_cast<double>(heads);
  // At most 16 labels; fitted cells can be small, and then the labels are no closer than the
  // widest one's width and a gap of 0.3 em (360 units over the heads always leave room).
  const int widest = *std::max_element(head_ids.begin(), head_ids.end());
  const double room = m.fitted ? text_width(std::to_string(widest), 11 * s) + 3.3 * s : 0;
  const std::size_t every = std::max(
      {std::size_t{1}, (heads + 15) / 16, static_cast<std::size_t>(std::ceil(room / cell))});
  std::string out = "<g class=\"head-ticks\">\n";
  for (std::size_t i = 0; i < heads; i += every) {
    const std::string id = std::to_string(head_ids[i]);
    const double centre = static_cast<double>(i) * cell + cell / 2;
    out += text(left + centre, top + size + 15 * s, id, 11 * s, Anchor::kMiddle);
    out += text(left - 6 * s, top + centre + 3.8 * s, id, 11 * s, Anchor::kEnd);
  }
  out += "</g>\n";
  out += text(left + size / 2, top + size + 36 * s, "Head", 13 * s, Anchor::kMiddle);
  const double label_y = top + size / 2;
  const double label_x = left - 40 * s;
  return out + text(label_x, label_y, "Head", 13 * s, Anchor::kMiddle,
                    attr("transform", "rotate(-90 " + num(label_x) + " " + num(label_y) + ")"));
}

}  // namespace

const ModelReport& heatmap_model(const std::vector<ModelReport>& models, const std::string& label,
                                 const std::string& file) {
  for (const ModelReport& model : models) {
    if (label.empty() || model.label == label) return model;
  }
  if (label.empty()) throw Error(file, "holds no model");
  std::vector<std::string> labels;
  for (const ModelReport& model : models) {
    if (std::find(labels.begin(), labels.end(), model.label) == labels.end())
      labels.push_back(model.label);
  }
  throw Error(file, "has no model labelled \"" + excerpt(label) + "\" (it has " +
                        quoted_list(labels, kListedLabels) + ")");
}

std::string plot_heatmap_svg(const ModelReport& model, int layer_index,
                             const PlotOptions& options) {
  const LayerMetrics& layer = heatmap_layer(model, layer_index);
  check_cosines(model, layer_index, layer.similarity);
  std::vector<int> head_ids = kept_heads(layer, layer.similarity.rows());
  MatrixD similarity = layer.similarity;
  if (options.cluster_heads) {  // similar heads side by side: rows, columns and labels permuted
    const std::vector<int> order = plot_detail::cluster_order(layer.similarity);
    similarity = layer.similarity(order, order);
    std::vector<int> ids;
    for (int position : order) ids.push_back(head_ids[static_cast<std::size_t>(position)]);
    head_ids = ids;
  }
  const ColourScale scale = similarity_scale(options.colour_map);
  // Values below the map (beyond round-off) are drawn at its end, and its label says so.
  const bool clipped = similarity.minCoeff() < scale.low - 1e-6;
  const HeatmapMeasures m = heatmap_measures(similarity.rows(), options);
  const double size = m.cell * static_cast<double>(similarity.rows());
  const std::string heading =
      options.title.empty()
          ? model.label + " — layer " + std::to_string(layer_index) + " (" + model.repr + ")"
          : options.title;

  std::string out = document_open(m.width, m.height);
  out += text(m.left + size / 2, 30 * m.size, heading, 15 * m.size, Anchor::kMiddle,
              attr("class", "figure-title"));
  out += heatmap_cells(similarity, head_ids, scale, m);
  out += "<rect" + attr("x", m.left) + attr("y", m.top) + attr("width", size) +
         attr("height", size) + " fill=\"none\" stroke=\"#262626\" stroke-width=\"0.8\"/>\n";
  out += head_axes(head_ids, m);
  out += similarity_colour_bar(scale, clipped, m.left + size + 24 * m.size, m.top, size,
                               "Cosine similarity", m.size);
  return out + "</svg>\n";
}

std::string plot_heatmap_svg(const ModelReport& model, int layer_index, const std::string& title) {
  PlotOptions options;
  options.title = title;
  return plot_heatmap_svg(model, layer_index, options);
}

}  // namespace kvrank

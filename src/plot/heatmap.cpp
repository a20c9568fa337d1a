// Similarity heatmaps (svg.hpp): one layer's head-by-head similarity matrix.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "kvrank/base/error.hpp"
#include "kvrank/plot/svg.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank {

// ---------------------------------------------------------------------------------------------
// Heatmap
// ---------------------------------------------------------------------------------------------
namespace {

using namespace plot_detail;

struct Rgb {
  double r, g, b;
};

// Anchor colours, evenly spaced over the map's range, interpolated linearly in between.
const std::vector<Rgb> kViridis = {{68, 1, 84},    {71, 45, 123},  {59, 82, 139},
                                   {44, 114, 142}, {33, 145, 140}, {40, 174, 128},
                                   {94, 201, 98},  {173, 220, 48}, {253, 231, 37}};
const std::vector<Rgb> kRedBlue = {{5, 48, 97},     {33, 102, 172},  {67, 147, 195},
                                   {146, 197, 222}, {209, 229, 240}, {247, 247, 247},
                                   {253, 219, 199}, {244, 165, 130}, {214, 96, 77},
                                   {178, 24, 43},   {103, 0, 31}};

struct ColourMap {
  const std::vector<Rgb>* anchors;
  double low, high;

  Rgb at(double value) const {
    double t = std::clamp((value - low) / (high - low), 0.0, 1.0);
    if (!std::isfinite(t)) t = 0;
    const double position = t * static_cast<double>(anchors->size() - 1);
    const auto index = std::min(static_cast<std::size_t>(position), anchors->size() - 2);
    const double w = position - static_cast<double>(index);
    const Rgb& a = (*anchors)[index];
    const Rgb& b = (*anchors)[index + 1];
    return {a.r + w * (b.r - a.r), a.g + w * (b.g - a.g), a.b + w * (b.b - a.b)};
  }
};

std::string hex(const Rgb& colour) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", static_cast<int>(std::lround(colour.r)),
                static_cast<int>(std::lround(colour.g)), static_cast<int>(std::lround(colour.b)));
  return buffer;
}

bool is_dark(const Rgb& colour) {
  return 0.299 * colour.r + 0.587 * colour.g + 0.114 * colour.b < 128;
}

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

std::string colour_bar(const ColourMap& map, double left, double top, double height) {
  std::string out =
      "<defs><linearGradient id=\"kvrank-colour-bar\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  const int stops = 20;
  for (int i = 0; i <= stops; ++i) {
    const double t = static_cast<double>(i) / stops;
    out += "<stop" + attr("offset", t) +
           attr("stop-color", hex(map.at(map.low + t * (map.high - map.low)))) + "/>\n";
  }
  out += "</linearGradient></defs>\n<g class=\"colour-bar\">\n<rect" + attr("x", left) +
         attr("y", top) + attr("width", 16.0) + attr("height", height) +
         " fill=\"url(#kvrank-colour-bar)\" stroke=\"#262626\" stroke-width=\"0.8\"/>\n";
  const double step = (map.high - map.low) / 4;
  for (int i = 0; i <= 4; ++i) {
    const double value = map.low + i * step;
    const double y = top + height * (1 - static_cast<double>(i) / 4);
    out += line(left + 16, y, left + 20, y, " stroke=\"#262626\" stroke-width=\"0.8\"");
    out += text(left + 23, y + 3.8, tick_label(value, step < 0.5 ? 2 : 1), 11, Anchor::kStart);
  }
  return out + "</g>\n";
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

namespace plot_detail {

std::string viridis(double t) { return hex(ColourMap{&kViridis, 0, 1}.at(t)); }

}  // namespace plot_detail

std::string plot_heatmap_svg(const ModelReport& model, int layer_index, const std::string& title) {
  const auto found = std::find_if(model.layers.begin(), model.layers.end(),
                                  [&](const LayerMetrics& l) { return l.layer == layer_index; });
  if (found == model.layers.end()) {
    throw Error("", "model \"" + model.label + "\" has no layer " + std::to_string(layer_index));
  }
  const MatrixD& similarity = found->similarity;
  if (similarity.size() == 0) {
    throw Error("", "model \"" + model.label + "\" layer " + std::to_string(layer_index) +
                        " has no similarity matrix (run analyze with --similarity)");
  }
  check_cosines(model, layer_index, similarity);
  const Index heads = similarity.rows();
  // Cosines of QK forms can be negative: then a diverging map over [-1, 1], else viridis [0, 1].
  const bool negative = similarity.minCoeff() < -1e-12;
  const ColourMap map = negative ? ColourMap{&kRedBlue, -1, 1} : ColourMap{&kViridis, 0, 1};
  const std::vector<int> head_ids = kept_heads(*found, heads);

  const double cell = std::clamp(360.0 / static_cast<double>(heads), 3.0, 48.0);
  const double size = cell * static_cast<double>(heads);
  const double left = 64;
  const double top = 52;
  const double width = left + size + 24 + 16 + 48;
  const double height = top + size + 52;
  const std::string heading =
      title.empty()
          ? model.label + " — layer " + std::to_string(layer_index) + " (" + model.repr + ")"
          : title;

  std::string out = document_open(width, height);
  out += text(left + size / 2, 30, heading, 15, Anchor::kMiddle, attr("class", "figure-title"));
  out += "<g class=\"cells\" shape-rendering=\"crispEdges\">\n";
  const bool annotate = heads <= 12;
  for (Index i = 0; i < heads; ++i) {
    for (Index j = 0; j < heads; ++j) {
      const double value = similarity(i, j);
      const Rgb colour = map.at(value);
      const double x = left + static_cast<double>(j) * cell;
      const double y = top + static_cast<double>(i) * cell;
      out += "<rect class=\"cell\"" + attr("x", x) + attr("y", y) + attr("width", cell) +
             attr("height", cell) + attr("fill", hex(colour)) +
             attr("data-value", tick_label(value, 6)) + "><title>head " +
             std::to_string(head_ids[static_cast<std::size_t>(i)]) + " · head " +
             std::to_string(head_ids[static_cast<std::size_t>(j)]) + ": " + tick_label(value, 4) +
             "</title></rect>\n";
      if (annotate) {
        out += text(x + cell / 2, y + cell / 2 + 3.5, tick_label(value, 2), 10, Anchor::kMiddle,
                    attr("fill", is_dark(colour) ? "white" : "#262626"));
      }
    }
  }
  out += "</g>\n<rect" + attr("x", left) + attr("y", top) + attr("width", size) +
         attr("height", size) + " fill=\"none\" stroke=\"#262626\" stroke-width=\"0.8\"/>\n";

  // Head indices on both axes, thinned to at most 16 labels.
  const Index every = std::max<Index>(1, (heads + 15) / 16);
  out += "<g class=\"head-ticks\">\n";
  for (Index i = 0; i < heads; i += every) {
    const std::string id = std::to_string(head_ids[static_cast<std::size_t>(i)]);
    const double centre = static_cast<double>(i) * cell + cell / 2;
    out += text(left + centre, top + size + 15, id, 11, Anchor::kMiddle);
    out += text(left - 6, top + centre + 3.8, id, 11, Anchor::kEnd);
  }
  out += "</g>\n";
  out += text(left + size / 2, top + size + 36, "Head", 13, Anchor::kMiddle);
  const double label_y = top + size / 2;
  out += text(left - 40, label_y, "Head", 13, Anchor::kMiddle,
              attr("transform", "rotate(-90 " + num(left - 40) + " " + num(label_y) + ")"));
  out += colour_bar(map, left + size + 24, top, size);
  return out + "</svg>\n";
}

}  // namespace kvrank

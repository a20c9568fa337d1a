// The head-similarity heatmap of `kvrank diff` (diff_heatmap.hpp), drawn with the SVG vocabulary
// of svg_detail.hpp and the colour scale and colour bar of the similarity heatmaps (heatmap.cpp),
// so that a cosine has the same colour in both figures.
#include "kvrank/plot/diff_heatmap.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank {
namespace {

using namespace plot_detail;

constexpr double kLeft = 64;
constexpr double kTop = 56;
constexpr double kPanelGap = 36;
constexpr double kBarWidth = 16;
constexpr const char* kZeroHeadColour = "#bfbfbf";

/// The lowest similarity of `diff` (NaN, a zero head, left out); +inf when there is none.
double lowest_of(const DiffResult& diff) {
  double lowest = std::numeric_limits<double>::infinity();
  for (const SeriesDiff& series : diff.series)
    for (const auto& layer : series.head_similarity)
      for (double value : layer)
        if (!std::isnan(value)) lowest = std::min(lowest, value);
  return lowest;
}

struct PanelPlace {
  double left;
  double cell;
  const ColourScale& scale;
};

std::string panel_cells(const SeriesDiff& series, const PanelPlace& place) {
  std::string out = "<g class=\"cells\" shape-rendering=\"crispEdges\">\n";
  for (std::size_t i = 0; i < series.head_similarity.size(); ++i) {
    const std::vector<double>& row = series.head_similarity[i];
    for (std::size_t h = 0; h < row.size(); ++h) {
      const double value = row[h];
      const std::string fill = std::isnan(value) ? kZeroHeadColour : place.scale.colour(value);
      out += "<rect class=\"cell\"" + attr("x", place.left + static_cast<double>(h) * place.cell) +
             attr("y", kTop + static_cast<double>(i) * place.cell) + attr("width", place.cell) +
             attr("height", place.cell) + attr("fill", fill) + "><title>layer " +
             std::to_string(series.a.layers[i].layer) + " head " + std::to_string(h) + ": " +
             (std::isnan(value) ? std::string("zero head") : tick_label(value, 4)) +
             "</title></rect>\n";
    }
  }
  return out + "</g>\n";
}

/// Layer numbers on the left and head numbers below, each thinned to at most 16 labels.
std::string panel_ticks(const SeriesDiff& series, const PanelPlace& place, std::size_t heads) {
  const std::size_t layers = series.head_similarity.size();
  const double bottom = kTop + static_cast<double>(layers) * place.cell;
  std::string out = "<g class=\"ticks\">\n";
  for (std::size_t i = 0; i < layers; i += std::max<std::size_t>(1, (layers + 15) / 16))
    out += text(place.left - 5, kTop + (static_cast<double>(i) + 0.5) * place.cell + 3.8,
                std::to_string(series.a.layers[i].layer), 11, Anchor::kEnd);
  for (std::size_t h = 0; h < heads; h += std::max<std::size_t>(1, (heads + 15) / 16))
    out += text(place.left + (static_cast<double>(h) + 0.5) * place.cell, bottom + 15,
                std::to_string(h), 11, Anchor::kMiddle);
  const double width = static_cast<double>(heads) * place.cell;
  out += "</g>\n" + text(place.left + width / 2, bottom + 34, "Head", 13, Anchor::kMiddle);
  out += text(place.left + width / 2, kTop - 8, series.a.repr, 13, Anchor::kMiddle,
              attr("class", "panel-title"));
  return out + "<rect" + attr("x", place.left) + attr("y", kTop) + attr("width", width) +
         attr("height", bottom - kTop) +
         " fill=\"none\" stroke=\"#262626\" stroke-width=\"0.8\"/>\n";
}

}  // namespace

std::string plot_head_similarity_svg(const DiffResult& diff, const PlotOptions& options) {
  if (!diff.heads_compared || diff.series.empty())
    throw Error("",
                "--figure: the heads were not compared (result files hold no weights; give two "
                "checkpoints)");
  const std::size_t layers = diff.series.front().head_similarity.size();
  const std::size_t heads = static_cast<std::size_t>(diff.series.front().a.geometry.heads);
  const double panels = static_cast<double>(diff.series.size());
  const double cell = std::clamp(
      480.0 / std::max(static_cast<double>(std::max(layers, heads)), 1.0) / std::sqrt(panels), 3.0,
      40.0);
  const double panel_width = static_cast<double>(heads) * cell;
  const double plot_height = static_cast<double>(layers) * cell;
  const double bar_left = kLeft + panels * (panel_width + kPanelGap);
  const double width = bar_left + kBarWidth + 72;
  const double height = kTop + plot_height + 48;
  const ColourScale scale = similarity_scale(options.colour_map);
  // Values below the map (beyond round-off) are drawn in its end colour, and its label says so.
  const bool clipped = lowest_of(diff) < scale.low - 1e-6;
  const SeriesDiff& first = diff.series.front();
  const std::string heading = options.title.empty()
                                  ? "Head similarity, " + first.a.label + " → " + first.b.label
                                  : options.title;

  std::string out = document_open(width, height);
  out +=
      text(width / 2, 24, printable(heading), 15, Anchor::kMiddle, attr("class", "figure-title"));
  for (std::size_t s = 0; s < diff.series.size(); ++s) {
    const PanelPlace place{kLeft + static_cast<double>(s) * (panel_width + kPanelGap), cell, scale};
    out += panel_cells(diff.series[s], place) + panel_ticks(diff.series[s], place, heads);
  }
  const double label_y = kTop + plot_height / 2;
  out += text(kLeft - 36, label_y, "Layer", 13, Anchor::kMiddle,
              attr("transform", "rotate(-90 " + num(kLeft - 36) + " " + num(label_y) + ")"));
  out += similarity_colour_bar(scale, clipped, bar_left, kTop, plot_height, "cos(A_h, B_h)");
  return out + "</svg>\n";
}

std::string plot_head_similarity_svg(const DiffResult& diff, const std::string& title) {
  PlotOptions options;
  options.title = title;
  return plot_head_similarity_svg(diff, options);
}

}  // namespace kvrank

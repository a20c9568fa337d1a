// Figures as SVG, written by a small SVG writer of our own (no plotting dependency).
//
// plot_curves_svg: one panel per input file side by side; in each, x = layer, y = the metric, one
// coloured line with markers per model, a legend, ticks and axis labels, and the fully-redundant
// baseline as a dashed grey line at 1.0 (like the seed figure). plot_heatmap_svg: one layer's H×H
// similarity matrix with a colour bar. All text is XML-escaped.
#pragma once

#include <string>
#include <vector>

#include "kvrank/analysis.hpp"

namespace kvrank {

struct Panel {
  std::string title;  ///< e.g. the input file name
  std::vector<ModelReport> models;
};

struct PlotOptions {
  std::string metric = "erank";  ///< erank | erank_centered | erank_pct | erank_centered_pct |
                                 ///< mean_similarity | pcs_90
  std::string title;             ///< figure title (optional)
};

/// Throws kvrank::Error for an unknown metric.
std::string plot_curves_svg(const std::vector<Panel>& panels, const PlotOptions& options);

/// Throws kvrank::Error when the model has no such layer or the layer has no similarity matrix
/// (analyze with --similarity).
std::string plot_heatmap_svg(const ModelReport& model, int layer, const std::string& title);

/// Escapes &, <, >, " and ' for XML text and attributes.
std::string xml_escape(std::string_view text);

}  // namespace kvrank

// Figures as SVG, written by a small SVG writer of our own (no plotting dependency).
//
// plot_curves_svg: one panel per input file side by side; in each, x = layer, y = the metric, one
// coloured line with markers per model, a legend, ticks and axis labels, and the fully-redundant
// baseline as a dashed grey line at 1.0 (like the seed figure). plot_heatmap_svg: one layer's H×H
// similarity matrix with a colour bar. All text is XML-escaped.
#pragma once

#include <string>
#include <vector>

#include "kvrank/report/results.hpp"

namespace kvrank {

struct Panel {
  std::string title;  ///< e.g. the input file name
  std::vector<ModelReport> models;
  std::string source;  ///< the file the models came from, named in errors
};

struct PlotOptions {
  Metric metric = Metric::erank;  ///< the y axis (results.hpp)
  std::string title;              ///< figure title (optional)
};

/// Throws kvrank::Error for values too far apart to draw (naming the panel's source). Any finite
/// values and layer indices give a bounded figure.
std::string plot_curves_svg(const std::vector<Panel>& panels, const PlotOptions& options);

/// Throws kvrank::Error when the model has no such layer or the layer has no similarity matrix
/// (analyze with --similarity).
std::string plot_heatmap_svg(const ModelReport& model, int layer, const std::string& title);

/// Escapes &, <, >, " and ' for XML text and attributes, tab and line breaks as character
/// references (so attributes keep them); characters XML 1.0 does not allow (C0 controls, U+FFFE,
/// U+FFFF) and bytes that are not UTF-8 become U+FFFD, so the document is always well-formed.
std::string xml_escape(std::string_view text);

}  // namespace kvrank

// The figure of `kvrank diff --figure`: how far each head moved, as a layers × heads heatmap of
// head_similarity (report/diff_report.hpp), one panel per representation.
#pragma once

#include <string>

#include "kvrank/plot/figure_options.hpp"
#include "kvrank/report/diff_report.hpp"

namespace kvrank {

/// SVG of the head similarities of `diff`: rows are layers (first at the top), columns heads,
/// colour the cosine on the scale of the similarity heatmaps (svg.hpp's plot_heatmap_svg):
/// options.colour_map, by default rdbu over [−1, 1] (0 white); viridis and greys over [0, 1], a
/// negative cosine in 0's colour and the colour bar's lowest tick "≤ 0". A zero head is grey.
/// options.title heads the figure (empty: "Head similarity, A → B"); the other options are not
/// used. Throws kvrank::Error when the heads were not compared (result files hold no weights).
std::string plot_head_similarity_svg(const DiffResult& diff, const PlotOptions& options);
/// The same with only a title (empty: the default).
std::string plot_head_similarity_svg(const DiffResult& diff, const std::string& title);

}  // namespace kvrank

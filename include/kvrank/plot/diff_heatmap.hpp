// The figure of `kvrank diff --figure`: how far each head moved, as a layers × heads heatmap of
// head_similarity (report/diff_report.hpp), one panel per representation.
#pragma once

#include <string>

#include "kvrank/report/diff_report.hpp"

namespace kvrank {

/// SVG of the head similarities of `diff`: rows are layers (first at the top), columns heads,
/// colour the cosine (viridis over [0, 1], or [−1, 1] when some similarity is negative; a zero head
/// grey). `title` heads the figure (empty: "Head similarity, A → B"). Throws kvrank::Error when the
/// heads were not compared (result files hold no weights).
std::string plot_head_similarity_svg(const DiffResult& diff, const std::string& title);

}  // namespace kvrank

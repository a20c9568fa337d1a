// The legend of the line figures (svg_detail.hpp): one entry per series label, below, right of or
// inside the panels; inside, in the corner that covers the fewest drawn points.
#include <algorithm>
#include <array>
#include <cmath>

#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {

std::vector<LegendEntry> legend_entries(const std::vector<LinePanel>& panels) {
  std::vector<LegendEntry> entries;
  std::optional<std::string> baseline;
  for (const LinePanel& panel : panels) {
    bool panel_baseline = false;
    for (const Series& series : panel.series) {
      if (series.baseline) {
        panel_baseline = true;
        if (!baseline) baseline = series.label;
        continue;
      }
      const bool seen = std::any_of(entries.begin(), entries.end(),
                                    [&](const LegendEntry& e) { return e.label == series.label; });
      if (!seen) entries.push_back({series.label, series.style, false});
    }
    if (!panel_baseline && panel.line_at_one && !baseline) baseline = kBaselineLabel;
  }
  if (baseline) entries.push_back({*baseline, {}, true});
  return entries;
}

LegendBox legend_box(const std::vector<LegendEntry>& entries, const Fonts& fonts, double available,
                     bool one_column) {
  LegendBox box;
  if (entries.empty()) return box;
  double widest = 0;
  for (const LegendEntry& entry : entries) {
    widest = std::max(widest, text_width(entry.label, fonts.legend));
  }
  box.column_width = 2.3 * fonts.legend + 8 + widest + 1.5 * fonts.legend;
  box.row_height = 1.65 * fonts.legend;
  const int fit = std::max(1, static_cast<int>((available - 16) / box.column_width));
  box.columns = one_column ? 1 : std::min(fit, static_cast<int>(entries.size()));
  const auto rows = (entries.size() + static_cast<std::size_t>(box.columns) - 1) /
                    static_cast<std::size_t>(box.columns);
  box.width = box.columns * box.column_width + 8;
  box.height = static_cast<double>(rows) * box.row_height + 0.9 * fonts.legend;
  return box;
}

std::string legend_svg(const std::vector<LegendEntry>& entries, const LegendBox& box, double left,
                       double top, const Fonts& fonts, const std::string& extra) {
  const double marker_radius = 3.3 * fonts.label / 13.33;
  std::string out = "<g class=\"legend\"" + extra + ">\n<rect" + attr("x", left) + attr("y", top) +
                    attr("width", box.width) + attr("height", box.height) +
                    " rx=\"3\" fill=\"white\" fill-opacity=\"0.9\" stroke=\"#cccccc\"/>\n";
  const double swatch = 2.3 * fonts.legend;
  const auto columns = static_cast<std::size_t>(box.columns);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& entry = entries[i];
    const double x = left + 10 + static_cast<double>(i % columns) * box.column_width;
    const double y =
        top + 0.45 * fonts.legend + (static_cast<double>(i / columns) + 0.5) * box.row_height;
    out += "<g class=\"legend-entry\"" + attr("data-label", xml_escape(entry.label)) + ">\n";
    if (entry.baseline) {
      out += line(x, y, x + swatch, y,
                  attr("stroke", kBaselineColour) + attr("stroke-width", 0.9 * line_width(fonts)) +
                      " stroke-dasharray=\"6 4\"");
    } else {
      out += line(x, y, x + swatch, y,
                  attr("stroke", entry.style.colour) + attr("stroke-width", line_width(fonts)) +
                      dash_attribute(entry.style.dash));
      out += marker_svg(entry.style.marker, x + swatch / 2, y, marker_radius, entry.style.colour);
    }
    out += text(x + swatch + 8, y + 0.35 * fonts.legend, entry.label, fonts.legend, Anchor::kStart);
    out += "</g>\n";
  }
  return out + "</g>\n";
}

namespace {

/// The legend's top-left corner in `corner` of `frame`, `inset` from its sides.
std::pair<double, double> corner_position(const Frame& frame, const LegendBox& box,
                                          LegendCorner corner, double inset) {
  const bool left = corner == LegendCorner::top_left || corner == LegendCorner::bottom_left;
  const bool top = corner == LegendCorner::top_left || corner == LegendCorner::top_right;
  return {left ? frame.left + inset : frame.left + frame.width - box.width - inset,
          top ? frame.top + inset : frame.top + frame.height - box.height - inset};
}

std::size_t covered(const std::vector<std::pair<double, double>>& points, double left, double top,
                    const LegendBox& box, double margin) {
  return static_cast<std::size_t>(
      std::count_if(points.begin(), points.end(), [&](const std::pair<double, double>& p) {
        return p.first >= left - margin && p.first <= left + box.width + margin &&
               p.second >= top - margin && p.second <= top + box.height + margin;
      }));
}

}  // namespace

InsideLegend place_inside_legend(const std::vector<Frame>& frames,
                                 const std::vector<std::vector<std::pair<double, double>>>& drawn,
                                 const LegendBox& box, std::optional<LegendCorner> corner,
                                 double inset, double margin) {
  if (corner) {
    const auto [left, top] = corner_position(frames.front(), box, *corner, inset);
    return {0, *corner, left, top, covered(drawn.front(), left, top, box, margin)};
  }
  // matplotlib's loc="best" order on a tie: top-right, top-left, bottom-left, bottom-right; and
  // the first panel before the others.
  constexpr std::array kOrder = {LegendCorner::top_right, LegendCorner::top_left,
                                 LegendCorner::bottom_left, LegendCorner::bottom_right};
  std::optional<InsideLegend> best;
  for (std::size_t panel = 0; panel < frames.size(); ++panel) {
    for (const LegendCorner candidate : kOrder) {
      const auto [left, top] = corner_position(frames[panel], box, candidate, inset);
      const std::size_t count = covered(drawn[panel], left, top, box, margin);
      if (!best || count < best->covered) best = InsideLegend{panel, candidate, left, top, count};
    }
    if (best->covered == 0) break;
  }
  return *best;
}

}  // namespace kvrank::plot_detail

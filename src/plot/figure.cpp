// The multi-panel line figure (svg_detail.hpp): panels in a row or a grid (grid.cpp), axes,
// series with markers, the fully-redundant line, and one legend for all panels (legend.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kvrank/base/error.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Axes
// ---------------------------------------------------------------------------------------------

/// The finite y range of a panel, with 1.0 when the fully-redundant line is drawn.
std::pair<double, double> y_range(const LinePanel& panel) {
  double low = std::numeric_limits<double>::infinity();
  double high = -low;
  for (const Series& series : panel.series) {
    for (const auto& [x, y] : series.points) {
      if (!std::isfinite(y)) continue;
      low = std::min(low, y);
      high = std::max(high, y);
    }
  }
  if (panel.line_at_one) {
    low = std::min(low, 1.0);
    high = std::max(high, 1.0);
  }
  if (!std::isfinite(low)) return {0.0, 1.0};
  return {low, high};
}

/// A whole x value (a layer or a step, held as a double) back in 64 bits: steps near 2^63 round
/// to 2^63 as doubles, which llround cannot return.
std::int64_t whole(double x) {
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (x >= kTwoTo63) return std::numeric_limits<std::int64_t>::max();
  if (x < -kTwoTo63) return std::numeric_limits<std::int64_t>::min();
  return std::llround(x);
}

std::pair<std::int64_t, std::int64_t> x_range(const LinePanel& panel) {
  double first = std::numeric_limits<double>::infinity();
  double last = -first;
  for (const Series& series : panel.series) {
    for (const auto& [x, y] : series.points) {
      first = std::min(first, x);
      last = std::max(last, x);
    }
  }
  if (first > last) return {0, 1};
  return {whole(first), whole(last)};
}

/// The x axis of a panel, its ticks thinned until their labels fit the plot's width.
Axis x_axis(const LinePanel& panel, double plot_width, const Fonts& fonts) {
  const auto [first, last] = x_range(panel);
  Axis axis = integer_axis(first, last);
  double widest = 0;
  for (std::size_t i = 0; i < axis.ticks.size(); ++i) {
    widest = std::max(widest, text_width(axis.label(i), fonts.tick));
  }
  const int fit = static_cast<int>(plot_width / (widest + fonts.tick));
  return fit < 10 ? integer_axis(first, last, fit) : axis;
}

/// A value axis; values too far apart for a double (±1e308) are an error naming the panel's
/// file, as they would give infinite or NaN coordinates.
Axis checked_value_axis(const LinePanel& panel, double low, double high, int ticks) {
  Axis axis = value_axis(low, high, ticks);
  if (std::isfinite(axis.low) && std::isfinite(axis.high) && std::isfinite(axis.high - axis.low)) {
    return axis;
  }
  char range[96];
  std::snprintf(range, sizeof range, "values from %g to %g", low, high);
  throw Error(panel.source, panel.y_name + " " + range + " are too far apart to plot");
}

/// Each panel's y axis: --ylim, or one range over all panels (--share-y), or its own.
std::vector<Axis> y_axes(const std::vector<LinePanel>& panels, const PlotOptions& options) {
  const int ticks = options.width_in > 0 || options.height_in > 0 ? 6 : 8;
  std::vector<Axis> axes;
  double shared_low = std::numeric_limits<double>::infinity();
  double shared_high = -shared_low;
  for (const LinePanel& panel : panels) {
    const auto [low, high] = y_range(panel);
    shared_low = std::min(shared_low, low);
    shared_high = std::max(shared_high, high);
  }
  for (const LinePanel& panel : panels) {
    if (options.ylim) {
      axes.push_back(exact_axis(options.ylim->first, options.ylim->second, ticks));
    } else if (options.share_y) {
      axes.push_back(checked_value_axis(panel, shared_low, shared_high, ticks));
    } else {
      const auto [low, high] = y_range(panel);
      axes.push_back(checked_value_axis(panel, low, high, ticks));
    }
  }
  return axes;
}

double widest_tick_label(const std::vector<Axis>& axes, double size) {
  double widest = 0;
  for (const Axis& axis : axes) {
    for (std::size_t i = 0; i < axis.ticks.size(); ++i) {
      widest = std::max(widest, text_width(axis.label(i), size));
    }
  }
  return widest;
}

/// Where the y label goes: its centre, left of the tick labels of `frame`.
double y_label_x(const Frame& frame, const Fonts& fonts) {
  return frame.left - 7 - widest_tick_label({frame.y}, fonts.tick) - 0.9 * fonts.label;
}

std::string y_label_svg(const std::string& label, double x, double y, const Fonts& fonts) {
  return text(
      x, y, label, fonts.label, Anchor::kMiddle,
      attr("class", "y-label") + attr("transform", "rotate(-90 " + num(x) + " " + num(y) + ")"));
}

/// What a panel writes on its y axis: with shared axes, only the first column has tick labels,
/// and the figure one y label.
struct YText {
  bool tick_labels = true;
  bool label = true;
};

std::string axes_and_grid(const Frame& frame, const LinePanel& panel, const Fonts& fonts,
                          YText y_text) {
  std::string out = "<g class=\"grid\" stroke=\"#e5e5e5\" stroke-width=\"0.8\">\n";
  for (double tick : frame.x.ticks) {
    out += line(frame.px(tick), frame.top, frame.px(tick), frame.top + frame.height, "");
  }
  for (double tick : frame.y.ticks) {
    out += line(frame.left, frame.py(tick), frame.left + frame.width, frame.py(tick), "");
  }
  out += "</g>\n<g class=\"axes\">\n";
  const double bottom = frame.top + frame.height;
  const std::string tick_style = attr("stroke", "#262626") + attr("stroke-width", 0.8);
  for (std::size_t i = 0; i < frame.x.ticks.size(); ++i) {
    const double x = frame.px(frame.x.ticks[i]);
    out += line(x, bottom, x, bottom + 4, tick_style);
    out += text(x, bottom + 4 + 1.15 * fonts.tick, frame.x.label(i), fonts.tick, Anchor::kMiddle,
                attr("class", "x-tick"));
  }
  for (std::size_t i = 0; i < frame.y.ticks.size(); ++i) {
    const double y = frame.py(frame.y.ticks[i]);
    out += line(frame.left - 4, y, frame.left, y, tick_style);
    if (!y_text.tick_labels) continue;
    out += text(frame.left - 7, y + 0.35 * fonts.tick, frame.y.label(i), fonts.tick, Anchor::kEnd,
                attr("class", "y-tick"));
  }
  out += text(frame.left + frame.width / 2, bottom + 4 + 1.15 * fonts.tick + 1.45 * fonts.label,
              panel.x_label, fonts.label, Anchor::kMiddle, attr("class", "x-label"));
  if (y_text.label) {
    out += y_label_svg(panel.y_label, y_label_x(frame, fonts), frame.top + frame.height / 2, fonts);
  }
  return out + "</g>\n";
}

// ---------------------------------------------------------------------------------------------
// Series
// ---------------------------------------------------------------------------------------------

/// Points along a drawn line from a to b (both ends excluded), one every `spacing` units: what an
/// inside legend should not cover besides the markers.
void sample_segment(std::pair<double, double> a, std::pair<double, double> b,
                    std::vector<std::pair<double, double>>& drawn, double spacing = 4) {
  const double length = std::hypot(b.first - a.first, b.second - a.second);
  const int samples = static_cast<int>(std::min(200.0, length / spacing));
  for (int i = 1; i < samples; ++i) {
    const double t = static_cast<double>(i) / samples;
    drawn.emplace_back(a.first + t * (b.first - a.first), a.second + t * (b.second - a.second));
  }
}

/// Path data through the finite points (a non-finite value breaks the line): the points go to
/// `points`, and they and samples along the line to `drawn`.
std::string path_data(const Frame& frame, const Series& series,
                      std::vector<std::pair<double, double>>& points,
                      std::vector<std::pair<double, double>>& drawn) {
  std::string data;
  bool pen_down = false;
  std::pair<double, double> previous;
  for (const auto& [x_value, y_value] : series.points) {
    if (!std::isfinite(y_value)) {
      pen_down = false;
      continue;
    }
    const std::pair<double, double> point{frame.px(x_value), frame.py(y_value)};
    if (!data.empty()) data += ' ';
    data += pen_down ? 'L' : 'M';
    data += num(point.first) + " " + num(point.second);
    if (pen_down) sample_segment(previous, point, drawn);
    pen_down = true;
    previous = point;
    points.push_back(point);
    drawn.push_back(point);
  }
  return data;
}

std::string baseline_path(const std::string& data, const std::string& label, const Fonts& fonts) {
  return "<path class=\"baseline\"" + attr("data-label", xml_escape(label)) + attr("d", data) +
         attr("stroke", kBaselineColour) + attr("stroke-width", 0.9 * line_width(fonts)) +
         " stroke-dasharray=\"6 4\" fill=\"none\"/>\n";
}

std::string series_svg(const Frame& frame, const Series& series, double marker_radius,
                       const Fonts& fonts, std::vector<std::pair<double, double>>& drawn) {
  std::vector<std::pair<double, double>> points;
  const std::string data = path_data(frame, series, points, drawn);
  const std::string label = xml_escape(series.label);
  std::string out = "<g class=\"model\"" + attr("data-label", label) +
                    attr("data-colour", series.style.colour) + ">\n";
  out += "<path class=\"series\"" + attr("data-label", label) + attr("d", data) +
         attr("stroke", series.style.colour) + attr("stroke-width", line_width(fonts)) +
         " stroke-linejoin=\"round\" stroke-linecap=\"round\" fill=\"none\"" +
         dash_attribute(series.style.dash) + "/>\n";
  for (const auto& [x, y] : points) {
    out += marker_svg(series.style.marker, x, y, marker_radius, series.style.colour);
  }
  return out + "</g>\n";
}

/// A value as scripts read it back: all 17 significant digits (num() keeps two decimals).
std::string exact(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.17g", value);
  return buffer;
}

/// The baselines of a panel: its baseline series, or the fully-redundant line at 1.0.
std::string baselines_svg(const LinePanel& panel, const Frame& frame, const Fonts& fonts,
                          std::vector<std::pair<double, double>>& drawn) {
  std::string out;
  for (const Series& series : panel.series) {
    if (!series.baseline) continue;
    std::vector<std::pair<double, double>> points;
    out += baseline_path(path_data(frame, series, points, drawn), series.label, fonts);
  }
  if (out.empty() && panel.line_at_one) {
    const double y = frame.py(1.0);
    const double right = frame.left + frame.width;
    out += baseline_path("M" + num(frame.left) + " " + num(y) + " L" + num(right) + " " + num(y),
                         kBaselineLabel, fonts);
    // A reference line, not data: covering it costs a quarter of covering a series.
    sample_segment({frame.left, y}, {right, y}, drawn, 16);
  }
  return out;
}

/// One panel: grid, axes, baseline(s), series (clipped to the frame), frame, title. What it
/// draws inside the frame goes to `drawn`.
std::string panel_svg(const LinePanel& panel, const Frame& frame, std::size_t index,
                      const TitleLayout& title, YText y_text, const Fonts& fonts,
                      std::vector<std::pair<double, double>>& drawn) {
  std::string out =
      "<g class=\"panel\"" + attr("data-title", xml_escape(panel.title)) +
      attr("data-y-low", exact(frame.y.low)) + attr("data-y-high", exact(frame.y.high)) +
      attr("data-x-low", exact(frame.x.low)) + attr("data-x-high", exact(frame.x.high)) + ">\n";
  const std::string clip = "kvrank-clip-" + std::to_string(index);
  out += "<clipPath" + attr("id", clip) + "><rect" + attr("x", frame.left) + attr("y", frame.top) +
         attr("width", frame.width) + attr("height", frame.height) + "/></clipPath>\n";
  out += axes_and_grid(frame, panel, fonts, y_text);
  out += "<g clip-path=\"url(#" + clip + ")\">\n";
  out += baselines_svg(panel, frame, fonts, drawn);
  std::size_t points = 0;
  for (const Series& series : panel.series) points = std::max(points, series.points.size());
  const double marker_radius = (points > 20 ? 2.4 : 3.3) * fonts.label / 13.33;
  for (const Series& series : panel.series) {
    if (!series.baseline) out += series_svg(frame, series, marker_radius, fonts, drawn);
  }
  out += "</g>\n<rect class=\"frame\"" + attr("x", frame.left) + attr("y", frame.top) +
         attr("width", frame.width) + attr("height", frame.height) +
         " fill=\"none\" stroke=\"#262626\" stroke-width=\"0.9\"/>\n";
  out += title_svg(title, frame.left + frame.width / 2, frame.top, fonts);
  return out + "</g>\n";
}

/// Whether the panels show one y axis: the same range (--share-y or --ylim) and the same label.
bool shared_y(const std::vector<LinePanel>& panels, const PlotOptions& options) {
  if (panels.size() < 2 || !(options.share_y || options.ylim)) return false;
  return std::all_of(panels.begin(), panels.end(),
                     [&](const LinePanel& p) { return p.y_label == panels.front().y_label; });
}

/// The grid of a line figure: room for the y tick labels (left of the first column only when the
/// y axis is shared), the legend, and the panel titles fitted to the plots' width.
PanelGrid line_grid(const std::vector<LinePanel>& panels, const std::vector<Axis>& y,
                    const std::vector<LegendEntry>& entries, const PlotOptions& options,
                    const Fonts& fonts, std::vector<TitleLayout>& titles) {
  PanelGrid grid;
  grid.title_band = options.title.empty() ? 0 : 2.2 * fonts.figure_title;
  grid.margin_left = 7 + widest_tick_label(y, fonts.tick) + 1.5 * fonts.label + 4;
  grid.margin_right = 0.8 * fonts.tick + 4;
  if (shared_y(panels, options)) grid.inner_margin_left = 0.8 * fonts.tick + 8;
  grid.margin_top = 1.9 * fonts.title;
  grid.margin_bottom = 4 + 1.15 * fonts.tick + 2.0 * fonts.label;
  if (options.legend == LegendPlace::right && !entries.empty())
    grid.right_band = legend_box(entries, fonts, 0, true).width + grid.pad;
  std::int64_t widest_span = 0;
  for (const LinePanel& panel : panels) {
    const auto [first, last] = x_range(panel);
    widest_span = std::max(widest_span, last - first);
  }
  const bool below = options.legend == LegendPlace::below && !entries.empty();
  const auto bottom_band = [&](double width) {
    return below ? legend_box(entries, fonts, width, false).height + 6 : 0.0;
  };
  const double default_width = widest_span > 20 ? 520 : 420;
  size_grid(grid, panels.size(), options, default_width, bottom_band);
  std::vector<std::string> names;
  for (const LinePanel& panel : panels) names.push_back(panel.title);
  titles = fit_titles(names, fonts, grid.plot_width);
  grid.margin_top = title_room(titles, fonts);
  size_grid(grid, panels.size(), options, default_width, bottom_band);  // the plots' new height
  return grid;
}

/// A legend inside a panel must leave the panel visible.
void check_legend_fits(const LegendBox& box, const Frame& frame) {
  if (box.width + 12 <= frame.width && box.height + 12 <= frame.height) return;
  char sizes[128];
  std::snprintf(sizes, sizeof sizes,
                "the legend (%.2f × %.2f in) does not fit in a panel (%.2f × %.2f in)",
                box.width / kUnitsPerInch, box.height / kUnitsPerInch, frame.width / kUnitsPerInch,
                frame.height / kUnitsPerInch);
  throw Error("", std::string("--legend inside: ") + sizes +
                      ": give --legend below or right, or a larger --width");
}

std::string legend_placed(const std::vector<LegendEntry>& entries, const PanelGrid& grid,
                          const std::vector<Frame>& frames,
                          const std::vector<std::vector<std::pair<double, double>>>& drawn,
                          const PlotOptions& options, const Fonts& fonts) {
  if (entries.empty()) return "";
  switch (options.legend) {
    case LegendPlace::below: {
      const LegendBox box = legend_box(entries, fonts, grid.width, false);
      const double top = grid.height - grid.pad - grid.bottom_band + 6;
      return legend_svg(entries, box, (grid.width - box.width) / 2, top, fonts);
    }
    case LegendPlace::right: {
      const LegendBox box = legend_box(entries, fonts, 0, true);
      return legend_svg(entries, box, grid.width - grid.pad - box.width, grid.panel_top(0), fonts);
    }
    case LegendPlace::inside: {
      const LegendBox box = legend_box(entries, fonts, 0, true);
      check_legend_fits(box, frames.front());
      const InsideLegend place =
          place_inside_legend(frames, drawn, box, options.legend_corner, 6, 0.3 * fonts.label);
      return legend_svg(entries, box, place.left, place.top, fonts,
                        attr("data-panel", std::to_string(place.panel)) +
                            attr("data-corner", legend_corner_name(place.corner)));
    }
    case LegendPlace::none:
      break;
  }
  return "";
}

}  // namespace

std::string line_figure_svg(const std::vector<LinePanel>& panels, const PlotOptions& options) {
  if (panels.empty()) throw Error("", "nothing to plot: no input file");
  const Fonts fonts = fonts_for(options);
  const std::vector<Axis> y = y_axes(panels, options);
  const std::vector<LegendEntry> entries = legend_entries(panels);
  std::vector<TitleLayout> titles;
  const PanelGrid grid = line_grid(panels, y, entries, options, fonts, titles);
  const bool shared = shared_y(panels, options);

  std::string body;
  std::vector<Frame> frames;
  std::vector<std::vector<std::pair<double, double>>> drawn(panels.size());
  for (std::size_t i = 0; i < panels.size(); ++i) {
    Frame frame{grid.panel_left(i), grid.panel_top(i), grid.plot_width, grid.plot_height, {}, y[i]};
    frame.x = x_axis(panels[i], grid.plot_width, fonts);
    const bool first_column = i % static_cast<std::size_t>(grid.columns) == 0;
    const YText y_text{!shared || first_column, !shared};
    body += panel_svg(panels[i], frame, i, titles[i], y_text, fonts, drawn[i]);
    frames.push_back(frame);
  }
  if (shared) {  // one y label, centred on the rows
    const Frame& last =
        frames[(static_cast<std::size_t>(grid.rows) - 1) * static_cast<std::size_t>(grid.columns)];
    body += y_label_svg(panels.front().y_label, y_label_x(frames.front(), fonts),
                        (frames.front().top + last.top + last.height) / 2, fonts);
  }
  body += legend_placed(entries, grid, frames, drawn, options, fonts);
  return figure_document(grid, options, fonts, body);
}

}  // namespace kvrank::plot_detail

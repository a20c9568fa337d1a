// The multi-panel line figure (svg_detail.hpp): panels in a row or a grid, axes, series with
// markers, the fully-redundant line, and one legend for all panels.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kvrank/base/error.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {

Fonts fonts_for(const PlotOptions& options) {
  const double size = options.font_pt * kUnitsPerInch / 72;  // points → user units
  return {size, 0.85 * size, 1.05 * size, 0.9 * size, 1.2 * size};
}

double PanelGrid::panel_left(std::size_t i) const {
  const auto column = static_cast<double>(i % static_cast<std::size_t>(columns));
  return pad + column * (margin_left + plot_width + margin_right) + margin_left;
}

double PanelGrid::panel_top(std::size_t i) const {
  const auto row = static_cast<double>(i / static_cast<std::size_t>(columns));
  return title_band + pad + row * (margin_top + plot_height + margin_bottom) + margin_top;
}

void size_grid(PanelGrid& grid, std::size_t panels, const PlotOptions& options,
               double default_plot_width, const std::function<double(double)>& bottom_band_for) {
  const std::size_t wanted =
      options.columns > 0 ? static_cast<std::size_t>(options.columns) : panels;
  grid.columns =
      static_cast<int>(std::clamp<std::size_t>(wanted, 1, std::max<std::size_t>(panels, 1)));
  grid.rows = static_cast<int>((panels + static_cast<std::size_t>(grid.columns) - 1) /
                               static_cast<std::size_t>(grid.columns));
  const double margins = grid.margin_left + grid.margin_right;
  const auto columns = static_cast<double>(grid.columns);
  const auto rows = static_cast<double>(grid.rows);
  if (options.width_in > 0) {
    grid.width = options.width_in * kUnitsPerInch;
    grid.plot_width = (grid.width - 2 * grid.pad - grid.right_band) / columns - margins;
  } else {
    grid.plot_width = default_plot_width;
    grid.width = 2 * grid.pad + columns * (margins + grid.plot_width) + grid.right_band;
  }
  grid.bottom_band = bottom_band_for(grid.width);
  const double vertical = grid.margin_top + grid.margin_bottom;
  if (options.height_in > 0) {
    grid.height = options.height_in * kUnitsPerInch;
    grid.plot_height =
        (grid.height - grid.title_band - grid.bottom_band - 2 * grid.pad) / rows - vertical;
  } else {
    grid.plot_height =
        options.width_in > 0 ? std::clamp(0.72 * grid.plot_width, 60.0, 420.0) : 300.0;
    grid.height =
        grid.title_band + 2 * grid.pad + rows * (vertical + grid.plot_height) + grid.bottom_band;
  }
  if (grid.plot_width < 30 || grid.plot_height < 30) {
    char size[160];
    std::snprintf(size, sizeof size,
                  "a %.2f × %.2f in figure leaves %.2f × %.2f in per plot for %zu panel(s) in "
                  "%d row(s): give a larger --width/--height, a smaller --font-size or --cols",
                  grid.width / kUnitsPerInch, grid.height / kUnitsPerInch,
                  std::max(0.0, grid.plot_width) / kUnitsPerInch,
                  std::max(0.0, grid.plot_height) / kUnitsPerInch, panels, grid.rows);
    throw Error("", size);
  }
}

std::string figure_document(const PanelGrid& grid, const PlotOptions& options, const Fonts& fonts,
                            const std::string& body) {
  std::string out = document_open(grid.width, grid.height);
  if (!options.title.empty()) {
    out +=
        text(grid.width / 2, grid.pad + 1.3 * fonts.figure_title, options.title, fonts.figure_title,
             Anchor::kMiddle, attr("class", "figure-title") + attr("font-weight", "bold"));
  }
  return out + body + "</svg>\n";
}

namespace {

struct Frame {
  double left = 0, top = 0, width = 0, height = 0;
  Axis x, y;

  double px(double value) const { return left + x.fraction(value) * width; }
  double py(double value) const { return top + (1 - y.fraction(value)) * height; }
};

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
  return {std::llround(first), std::llround(last)};
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
    for (double tick : axis.ticks) {
      widest = std::max(widest, text_width(tick_label(tick, axis.decimals), size));
    }
  }
  return widest;
}

std::string axes_and_grid(const Frame& frame, const LinePanel& panel, const Fonts& fonts) {
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
  for (double tick : frame.x.ticks) {
    out += line(frame.px(tick), bottom, frame.px(tick), bottom + 4, tick_style);
    out += text(frame.px(tick), bottom + 4 + 1.15 * fonts.tick, tick_label(tick, 0), fonts.tick,
                Anchor::kMiddle);
  }
  for (double tick : frame.y.ticks) {
    out += line(frame.left - 4, frame.py(tick), frame.left, frame.py(tick), tick_style);
    out += text(frame.left - 7, frame.py(tick) + 0.35 * fonts.tick,
                tick_label(tick, frame.y.decimals), fonts.tick, Anchor::kEnd);
  }
  out += text(frame.left + frame.width / 2, bottom + 4 + 1.15 * fonts.tick + 1.45 * fonts.label,
              panel.x_label, fonts.label, Anchor::kMiddle, attr("class", "x-label"));
  const double widest = widest_tick_label({frame.y}, fonts.tick);
  const double label_x = frame.left - 7 - widest - 0.9 * fonts.label;
  const double label_y = frame.top + frame.height / 2;
  out += text(label_x, label_y, panel.y_label, fonts.label, Anchor::kMiddle,
              attr("class", "y-label") +
                  attr("transform", "rotate(-90 " + num(label_x) + " " + num(label_y) + ")"));
  return out + "</g>\n";
}

// ---------------------------------------------------------------------------------------------
// Series
// ---------------------------------------------------------------------------------------------

double line_width(const Fonts& fonts) { return std::max(1.0, 1.8 * fonts.label / 13.33); }

/// Path data through the finite points (a non-finite value breaks the line).
std::string path_data(const Frame& frame, const Series& series,
                      std::vector<std::pair<double, double>>* points) {
  std::string data;
  bool pen_down = false;
  for (const auto& [x_value, y_value] : series.points) {
    if (!std::isfinite(y_value)) {
      pen_down = false;
      continue;
    }
    const double x = frame.px(x_value);
    const double y = frame.py(y_value);
    if (!data.empty()) data += ' ';
    data += pen_down ? 'L' : 'M';
    data += num(x) + " " + num(y);
    pen_down = true;
    if (points) points->emplace_back(x, y);
  }
  return data;
}

std::string baseline_path(const std::string& data, const std::string& label, const Fonts& fonts) {
  return "<path class=\"baseline\"" + attr("data-label", xml_escape(label)) + attr("d", data) +
         attr("stroke", kBaselineColour) + attr("stroke-width", 0.9 * line_width(fonts)) +
         " stroke-dasharray=\"6 4\" fill=\"none\"/>\n";
}

std::string series_svg(const Frame& frame, const Series& series, double marker_radius,
                       const Fonts& fonts) {
  std::vector<std::pair<double, double>> points;
  const std::string data = path_data(frame, series, &points);
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

/// One panel: grid, axes, baseline(s), series (clipped to the frame), frame, title.
std::string panel_svg(const LinePanel& panel, const Frame& frame, std::size_t index,
                      const Fonts& fonts) {
  std::string out =
      "<g class=\"panel\"" + attr("data-title", xml_escape(panel.title)) +
      attr("data-y-low", exact(frame.y.low)) + attr("data-y-high", exact(frame.y.high)) +
      attr("data-x-low", exact(frame.x.low)) + attr("data-x-high", exact(frame.x.high)) + ">\n";
  const std::string clip = "kvrank-clip-" + std::to_string(index);
  out += "<clipPath" + attr("id", clip) + "><rect" + attr("x", frame.left) + attr("y", frame.top) +
         attr("width", frame.width) + attr("height", frame.height) + "/></clipPath>\n";
  out += axes_and_grid(frame, panel, fonts);
  out += "<g clip-path=\"url(#" + clip + ")\">\n";
  bool has_baseline = false;
  for (const Series& series : panel.series) {
    if (!series.baseline) continue;
    has_baseline = true;
    out += baseline_path(path_data(frame, series, nullptr), series.label, fonts);
  }
  if (!has_baseline && panel.line_at_one) {
    const double y = frame.py(1.0);
    out += baseline_path(
        "M" + num(frame.left) + " " + num(y) + " L" + num(frame.left + frame.width) + " " + num(y),
        kBaselineLabel, fonts);
  }
  std::size_t points = 0;
  for (const Series& series : panel.series) points = std::max(points, series.points.size());
  const double marker_radius = (points > 20 ? 2.4 : 3.3) * fonts.label / 13.33;
  for (const Series& series : panel.series) {
    if (!series.baseline) out += series_svg(frame, series, marker_radius, fonts);
  }
  out += "</g>\n<rect class=\"frame\"" + attr("x", frame.left) + attr("y", frame.top) +
         attr("width", frame.width) + attr("height", frame.height) +
         " fill=\"none\" stroke=\"#262626\" stroke-width=\"0.9\"/>\n";
  out += text(frame.left + frame.width / 2, frame.top - 0.75 * fonts.title, panel.title,
              fonts.title, Anchor::kMiddle, attr("class", "panel-title"));
  return out + "</g>\n";
}

// ---------------------------------------------------------------------------------------------
// Legend
// ---------------------------------------------------------------------------------------------

struct LegendEntry {
  std::string label;
  SeriesStyle style;
  bool baseline = false;
};

/// Every series label once, in order of appearance; the fully-redundant entry last.
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

struct LegendBox {
  int columns = 1;
  double column_width = 0, row_height = 0, width = 0, height = 0;
};

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
                       double top, const Fonts& fonts, double marker_radius) {
  std::string out = "<g class=\"legend\">\n<rect" + attr("x", left) + attr("y", top) +
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

}  // namespace

std::string line_figure_svg(const std::vector<LinePanel>& panels, const PlotOptions& options) {
  if (panels.empty()) throw Error("", "nothing to plot: no input file");
  const Fonts fonts = fonts_for(options);
  const std::vector<Axis> y = y_axes(panels, options);
  const std::vector<LegendEntry> entries = legend_entries(panels);

  PanelGrid grid;
  grid.title_band = options.title.empty() ? 0 : 2.2 * fonts.figure_title;
  grid.margin_left = 7 + widest_tick_label(y, fonts.tick) + 1.5 * fonts.label + 4;
  grid.margin_right = 0.8 * fonts.tick + 4;
  grid.margin_top = 1.9 * fonts.title;
  grid.margin_bottom = 4 + 1.15 * fonts.tick + 2.0 * fonts.label;
  const bool right = options.legend == LegendPlace::right && !entries.empty();
  const bool below = options.legend == LegendPlace::below && !entries.empty();
  const LegendBox right_box = legend_box(entries, fonts, 0, true);
  if (right) grid.right_band = right_box.width + grid.pad;
  std::int64_t widest_span = 0;
  for (const LinePanel& panel : panels) {
    const auto [first, last] = x_range(panel);
    widest_span = std::max(widest_span, last - first);
  }
  size_grid(grid, panels.size(), options, widest_span > 20 ? 520 : 420, [&](double width) {
    return below ? legend_box(entries, fonts, width, false).height + 6 : 0.0;
  });

  std::string body;
  for (std::size_t i = 0; i < panels.size(); ++i) {
    Frame frame;
    frame.left = grid.panel_left(i);
    frame.top = grid.panel_top(i);
    frame.width = grid.plot_width;
    frame.height = grid.plot_height;
    const auto [first, last] = x_range(panels[i]);
    frame.x = integer_axis(first, last);
    frame.y = y[i];
    body += panel_svg(panels[i], frame, i, fonts);
  }
  const double legend_marker = 3.3 * fonts.label / 13.33;
  if (below) {
    const LegendBox box = legend_box(entries, fonts, grid.width, false);
    const double top = grid.height - grid.pad - grid.bottom_band + 6;
    body += legend_svg(entries, box, (grid.width - box.width) / 2, top, fonts, legend_marker);
  } else if (right) {
    body += legend_svg(entries, right_box, grid.width - grid.pad - right_box.width,
                       grid.panel_top(0), fonts, legend_marker);
  } else if (options.legend == LegendPlace::inside && !entries.empty()) {
    body +=
        legend_svg(entries, right_box, grid.panel_left(0) + grid.plot_width - right_box.width - 6,
                   grid.panel_top(0) + 6, fonts, legend_marker);
  }
  return figure_document(grid, options, fonts, body);
}

}  // namespace kvrank::plot_detail

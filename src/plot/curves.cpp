// Rank curves (svg.hpp): one panel per input file, one series per model, a shared legend.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>

#include "kvrank/base/error.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/check.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank {
namespace {

using namespace plot_detail;

// ---------------------------------------------------------------------------------------------
// Curves
// ---------------------------------------------------------------------------------------------

struct Style {
  std::string colour;
  std::string dash;  // empty: solid
};

/// Colours by label in order of first appearance, so a model looks the same in every panel.
std::map<std::string, Style> assign_styles(const std::vector<Panel>& panels,
                                           std::vector<std::string>* order) {
  std::map<std::string, Style> styles;
  for (const Panel& panel : panels) {
    for (const ModelReport& model : panel.models) {
      if (is_baseline(model) || styles.count(model.label)) continue;
      const std::size_t index = order->size();
      // Past ten models the colours repeat, told apart by a dash pattern.
      styles[model.label] = {kPalette[index % kPalette.size()],
                             index < kPalette.size() ? "" : "5 2"};
      order->push_back(model.label);
    }
  }
  return styles;
}

struct Frame {
  double left = 0, top = 0, width = 0, height = 0;
  Axis x, y;

  double px(double layer) const { return left + x.fraction(layer) * width; }
  double py(double value) const { return top + (1 - y.fraction(value)) * height; }
};

struct Layout {
  double plot_width = 0;
  double plot_height = 300;
  double margin_left = 72;
  double margin_right = 22;
  double margin_top = 34;     // panel title
  double margin_bottom = 50;  // tick labels and x label
  double figure_title = 0;    // height of the figure title band
  double panel_width() const { return margin_left + plot_width + margin_right; }
};

/// The value range a panel must show: all finite points, and 1.0 when the baseline is drawn.
std::pair<double, double> value_range(const Panel& panel, Metric metric, bool baseline_at_one) {
  double low = std::numeric_limits<double>::infinity();
  double high = -low;
  for (const ModelReport& model : panel.models) {
    for (const LayerMetrics& layer : model.layers) {
      const double value = metric_value(layer, metric);
      if (!std::isfinite(value)) continue;
      low = std::min(low, value);
      high = std::max(high, value);
    }
  }
  if (baseline_at_one) {
    low = std::min(low, 1.0);
    high = std::max(high, 1.0);
  }
  if (!std::isfinite(low)) return {0.0, 1.0};
  return {low, high};
}

std::pair<int, int> layer_range(const Panel& panel) {
  int first = std::numeric_limits<int>::max();
  int last = std::numeric_limits<int>::min();
  for (const ModelReport& model : panel.models) {
    for (const LayerMetrics& layer : model.layers) {
      first = std::min(first, layer.layer);
      last = std::max(last, layer.layer);
    }
  }
  if (first > last) return {0, 1};
  return {first, last};
}

/// last − first of a panel's layers, in 64 bits (two ints can be 2^32 apart).
std::int64_t layer_span(const Panel& panel) {
  const auto [first, last] = layer_range(panel);
  return std::int64_t{last} - first;
}

/// The value axis of a panel; values too far apart for a double (±1e308) are an error naming the
/// panel's file, as they would give infinite or NaN coordinates.
Axis checked_value_axis(const Panel& panel, Metric metric, double low, double high) {
  Axis axis = value_axis(low, high, 8);
  if (std::isfinite(axis.low) && std::isfinite(axis.high) && std::isfinite(axis.high - axis.low)) {
    return axis;
  }
  char range[96];
  std::snprintf(range, sizeof range, "values from %g to %g", low, high);
  throw Error(panel.source,
              std::string(metric_name(metric)) + " " + range + " are too far apart to plot");
}

std::string axes_and_grid(const Frame& frame, const std::string& y_label) {
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
    out += text(frame.px(tick), bottom + 17, tick_label(tick, 0), 11, Anchor::kMiddle);
  }
  for (double tick : frame.y.ticks) {
    out += line(frame.left - 4, frame.py(tick), frame.left, frame.py(tick), tick_style);
    out += text(frame.left - 7, frame.py(tick) + 3.8, tick_label(tick, frame.y.decimals), 11,
                Anchor::kEnd);
  }
  out += text(frame.left + frame.width / 2, bottom + 38, "Layer", 13, Anchor::kMiddle,
              attr("class", "x-label"));
  double widest_tick = 0;
  for (double tick : frame.y.ticks) {
    widest_tick = std::max(widest_tick, text_width(tick_label(tick, frame.y.decimals), 11));
  }
  const double label_x = frame.left - 7 - widest_tick - 12;
  const double label_y = frame.top + frame.height / 2;
  out += text(label_x, label_y, y_label, 13, Anchor::kMiddle,
              attr("class", "y-label") +
                  attr("transform", "rotate(-90 " + num(label_x) + " " + num(label_y) + ")"));
  out += "</g>\n";
  return out;
}

std::string frame_box(const Frame& frame) {
  return "<rect class=\"frame\"" + attr("x", frame.left) + attr("y", frame.top) +
         attr("width", frame.width) + attr("height", frame.height) +
         " fill=\"none\" stroke=\"#262626\" stroke-width=\"0.9\"/>\n";
}

/// Path data through the finite points of a model (a NaN layer breaks the line).
std::string path_data(const Frame& frame, const ModelReport& model, Metric metric,
                      std::vector<std::pair<double, double>>* points) {
  std::string data;
  bool pen_down = false;
  for (const LayerMetrics& layer : model.layers) {
    const double value = metric_value(layer, metric);
    if (!std::isfinite(value)) {
      pen_down = false;
      continue;
    }
    const double x = frame.px(layer.layer);
    const double y = frame.py(value);
    if (!data.empty()) data += ' ';
    data += pen_down ? 'L' : 'M';
    data += num(x) + " " + num(y);
    pen_down = true;
    if (points) points->emplace_back(x, y);
  }
  return data;
}

std::string baseline_path(const std::string& data, const std::string& label) {
  return "<path class=\"baseline\"" + attr("data-label", xml_escape(label)) + attr("d", data) +
         attr("stroke", kBaselineColour) +
         " stroke-width=\"1.6\" stroke-dasharray=\"6 4\" fill=\"none\"/>\n";
}

std::string model_series(const Frame& frame, const ModelReport& model, Metric metric,
                         const Style& style, double marker_radius) {
  std::vector<std::pair<double, double>> points;
  const std::string data = path_data(frame, model, metric, &points);
  const std::string label = xml_escape(model.label);
  std::string out = "<g class=\"model\"" + attr("data-label", label) + ">\n";
  out += "<path class=\"series\"" + attr("data-label", label) + attr("d", data) +
         attr("stroke", style.colour) +
         " stroke-width=\"1.8\" stroke-linejoin=\"round\" stroke-linecap=\"round\" fill=\"none\"" +
         (style.dash.empty() ? "" : attr("stroke-dasharray", style.dash)) + "/>\n";
  for (const auto& [x, y] : points) {
    out += "<circle class=\"marker\"" + attr("cx", x) + attr("cy", y) + attr("r", marker_radius) +
           attr("fill", style.colour) + " stroke=\"white\" stroke-width=\"0.6\"/>\n";
  }
  return out + "</g>\n";
}

/// One panel: grid, axes, baseline(s), one series per model, frame, title.
std::string panel_svg(const Panel& panel, const Frame& frame, const PlotOptions& options,
                      const std::map<std::string, Style>& styles, bool* drew_baseline,
                      std::string* baseline_label) {
  std::string out = "<g class=\"panel\"" + attr("data-title", xml_escape(panel.title)) + ">\n";
  out += axes_and_grid(frame, std::string(metric_axis_label(options.metric)));
  bool has_baseline_model = false;
  for (const ModelReport& model : panel.models) {
    if (!is_baseline(model)) continue;
    has_baseline_model = true;
    out += baseline_path(path_data(frame, model, options.metric, nullptr), model.label);
    *drew_baseline = true;
    if (baseline_label->empty()) *baseline_label = model.label;
  }
  if (!has_baseline_model && fully_redundant_at_one(options.metric)) {
    const double y = frame.py(1.0);
    out += baseline_path(
        "M" + num(frame.left) + " " + num(y) + " L" + num(frame.left + frame.width) + " " + num(y),
        kBaselineLabel);
    *drew_baseline = true;
  }
  const double marker_radius = layer_span(panel) > 20 ? 2.4 : 3.3;
  for (const ModelReport& model : panel.models) {
    if (!is_baseline(model)) {
      out += model_series(frame, model, options.metric, styles.at(model.label), marker_radius);
    }
  }
  out += frame_box(frame);
  out += text(frame.left + frame.width / 2, frame.top - 12, panel.title, 14, Anchor::kMiddle,
              attr("class", "panel-title"));
  return out + "</g>\n";
}

struct LegendEntry {
  std::string label;
  Style style;
  bool baseline = false;
};

double legend_height(std::size_t entries, int columns) {
  const auto rows = static_cast<double>((entries + static_cast<std::size_t>(columns) - 1) /
                                        static_cast<std::size_t>(columns));
  return rows * 20 + 12;
}

/// The legend's column count and column width for an available width.
std::pair<int, double> legend_columns(const std::vector<LegendEntry>& entries, double available) {
  double widest = 0;
  for (const LegendEntry& entry : entries) widest = std::max(widest, text_width(entry.label, 12));
  const double column_width = 36 + widest + 18;
  const int fit = std::max(1, static_cast<int>((available - 16) / column_width));
  return {std::min(fit, static_cast<int>(entries.size())), column_width};
}

std::string legend_svg(const std::vector<LegendEntry>& entries, double centre_x, double top,
                       double available_width) {
  const auto [columns, column_width] = legend_columns(entries, available_width);
  const double width = columns * column_width + 8;
  const double height = legend_height(entries.size(), columns);
  const double left = centre_x - width / 2;
  std::string out = "<g class=\"legend\">\n<rect" + attr("x", left) + attr("y", top) +
                    attr("width", width) + attr("height", height) +
                    " rx=\"3\" fill=\"white\" fill-opacity=\"0.9\" stroke=\"#cccccc\"/>\n";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const LegendEntry& entry = entries[i];
    const double x =
        left + 12 + static_cast<double>(i % static_cast<std::size_t>(columns)) * column_width;
    const double y = top + 16 + static_cast<double>(i / static_cast<std::size_t>(columns)) * 20;
    out += "<g class=\"legend-entry\"" + attr("data-label", xml_escape(entry.label)) + ">\n";
    if (entry.baseline) {
      out +=
          line(x, y, x + 28, y,
               attr("stroke", kBaselineColour) + " stroke-width=\"1.6\" stroke-dasharray=\"6 4\"");
    } else {
      out += line(x, y, x + 28, y,
                  attr("stroke", entry.style.colour) + " stroke-width=\"1.8\"" +
                      (entry.style.dash.empty() ? "" : attr("stroke-dasharray", entry.style.dash)));
      out += "<circle" + attr("cx", x + 14) + attr("cy", y) + " r=\"3.3\"" +
             attr("fill", entry.style.colour) + " stroke=\"white\" stroke-width=\"0.6\"/>\n";
    }
    out += text(x + 36, y + 4.2, entry.label, 12, Anchor::kStart);
    out += "</g>\n";
  }
  return out + "</g>\n";
}

}  // namespace

std::string plot_curves_svg(const std::vector<Panel>& panels, const PlotOptions& options) {
  if (panels.empty()) throw Error("", "nothing to plot: no input file");

  std::vector<std::string> order;
  const auto styles = assign_styles(panels, &order);
  Layout layout;
  std::int64_t widest_span = 0;
  for (const Panel& panel : panels) widest_span = std::max(widest_span, layer_span(panel));
  layout.plot_width = widest_span > 20 ? 520 : 420;
  layout.figure_title = options.title.empty() ? 0 : 34;

  std::vector<LegendEntry> entries;
  for (const std::string& label : order) entries.push_back({label, styles.at(label), false});
  const double figure_width = layout.panel_width() * static_cast<double>(panels.size()) + 16;

  std::string body;
  bool drew_baseline = false;
  std::string baseline_label;
  for (std::size_t i = 0; i < panels.size(); ++i) {
    const Panel& panel = panels[i];
    Frame frame;
    frame.left = 8 + layout.panel_width() * static_cast<double>(i) + layout.margin_left;
    frame.top = layout.figure_title + layout.margin_top;
    frame.width = layout.plot_width;
    frame.height = layout.plot_height;
    const auto [first, last] = layer_range(panel);
    frame.x = layer_axis(first, last);
    const bool at_one = fully_redundant_at_one(options.metric);
    const auto [low, high] = value_range(panel, options.metric, at_one);
    frame.y = checked_value_axis(panel, options.metric, low, high);
    body += panel_svg(panel, frame, options, styles, &drew_baseline, &baseline_label);
  }
  if (drew_baseline) {
    entries.push_back({baseline_label.empty() ? kBaselineLabel : baseline_label, {}, true});
  }

  const double legend_top =
      layout.figure_title + layout.margin_top + layout.plot_height + layout.margin_bottom + 6;
  double figure_height = legend_top + 10;
  if (!entries.empty()) {
    const auto [columns, column_width] = legend_columns(entries, figure_width);
    figure_height += legend_height(entries.size(), columns);
    body += legend_svg(entries, figure_width / 2, legend_top, figure_width);
  }
  std::string out = document_open(figure_width, figure_height);
  if (!options.title.empty()) {
    out += text(figure_width / 2, 26, options.title, 16, Anchor::kMiddle,
                attr("class", "figure-title") + attr("font-weight", "bold"));
  }
  return out + body + "</svg>\n";
}

}  // namespace kvrank

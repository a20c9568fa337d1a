// Figures as SVG: rank curves (one panel per input file) and similarity heatmaps.
//
// The look follows a matplotlib paper figure: tab10 colours, light grid, boxed axes, a dashed grey
// "Fully redundant" line, DejaVu Sans / sans-serif text. A model keeps its colour in every panel
// (colours are assigned by label), so one legend below the panels serves them all.
//
// Structure (what tests and scripts can rely on): each model is a <g class="model" data-label=…>
// holding ONE <path class="series"> and one <circle class="marker"> per plotted layer; the
// fully-redundant line is a <path class="baseline">; legend entries are <g class="legend-entry">;
// heatmap cells are <rect class="cell">.
#include "kvrank/svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>

#include "kvrank/check.hpp"
#include "kvrank/error.hpp"

namespace kvrank {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";
constexpr const char* kTextColour = "#262626";
constexpr const char* kBaselineColour = "#7f7f7f";
constexpr const char* kBaselineLabel = "Fully redundant";
// matplotlib's tab10.
constexpr std::array<const char*, 10> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                  "#bcbd22", "#17becf"};

// ---------------------------------------------------------------------------------------------
// Small SVG vocabulary
// ---------------------------------------------------------------------------------------------

/// A coordinate or length, with at most two decimals and no trailing zeros.
std::string num(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text = buffer;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

std::string attr(const char* name, const std::string& value) {
  return std::string(" ") + name + "=\"" + value + "\"";
}
std::string attr(const char* name, double value) { return attr(name, num(value)); }

std::string line(double x1, double y1, double x2, double y2, const std::string& style) {
  return "<line" + attr("x1", x1) + attr("y1", y1) + attr("x2", x2) + attr("y2", y2) + style +
         "/>\n";
}

enum class Anchor { kStart, kMiddle, kEnd };

std::string text(double x, double y, const std::string& content, double size, Anchor anchor,
                 const std::string& extra = "") {
  static const char* const kAnchors[] = {"start", "middle", "end"};
  return "<text" + attr("x", x) + attr("y", y) + attr("font-size", size) +
         attr("text-anchor", kAnchors[static_cast<int>(anchor)]) + extra + ">" +
         xml_escape(content) + "</text>\n";
}

std::string document_open(double width, double height) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\"" +
         attr("width", width) + attr("height", height) +
         attr("viewBox", "0 0 " + num(width) + " " + num(height)) + attr("font-family", kFont) +
         attr("fill", kTextColour) + ">\n" + "<rect" + attr("width", width) +
         attr("height", height) + attr("fill", "white") + "/>\n";
}

/// Rough width of a text in a sans-serif font (no font metrics here): 0.55 em per character.
double text_width(const std::string& content, double size) {
  std::size_t characters = 0;
  for (unsigned char c : content) characters += (c & 0xC0) != 0x80;  // count UTF-8 code points
  return 0.55 * size * static_cast<double>(characters);
}

// ---------------------------------------------------------------------------------------------
// Axes
// ---------------------------------------------------------------------------------------------

struct Axis {
  double low = 0;
  double high = 1;
  std::vector<double> ticks;
  int decimals = 0;

  double fraction(double value) const { return (value - low) / (high - low); }
};

/// Matplotlib-like limits (data ± 5 %) and "nice" ticks (1, 2, 2.5, 5 × 10^k) inside them.
Axis value_axis(double data_min, double data_max, int target_ticks) {
  if (!(data_max - data_min > 1e-12)) {
    const double half = std::max(0.5, std::fabs(data_min) * 0.1);
    data_min -= half;
    data_max += half;
  }
  Axis axis;
  const double margin = 0.05 * (data_max - data_min);
  axis.low = data_min - margin;
  axis.high = data_max + margin;
  const double raw_step = (axis.high - axis.low) / target_ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double nice = 10;
  for (double candidate : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (candidate * magnitude >= raw_step * (1 - 1e-9)) {
      nice = candidate;
      break;
    }
  }
  const double step = nice * magnitude;
  const double extra_decimal = nice == 2.5 ? 1 : 0;
  axis.decimals =
      static_cast<int>(std::max(0.0, -std::floor(std::log10(step) + 1e-9) + extra_decimal));
  for (double tick = std::ceil(axis.low / step - 1e-9) * step; tick <= axis.high + 1e-9 * step;
       tick += step) {
    axis.ticks.push_back(std::fabs(tick) < 1e-12 * step ? 0.0 : tick);
  }
  return axis;
}

/// Integer tick step for a layer span: 1, 2, 5, 10, 20, 50 … giving at most 10 ticks.
int layer_step(int span) {
  for (int magnitude = 1;; magnitude *= 10) {
    for (int multiple : {1, 2, 5}) {
      if (span / (multiple * magnitude) + 1 <= 10) return multiple * magnitude;
    }
  }
}

/// Layer axis: limits 5 % beyond the first and last layer, integer ticks.
Axis layer_axis(int first, int last) {
  Axis axis;
  const double margin = first == last ? 0.5 : 0.05 * (last - first);
  axis.low = first - margin;
  axis.high = last + margin;
  const int step = layer_step(last - first);
  for (int tick = (first / step) * step; tick <= last; tick += step) {
    if (tick >= first) axis.ticks.push_back(tick);
  }
  return axis;
}

std::string tick_label(double value, int decimals) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  std::string label = buffer;
  // A tiny negative value must not print as "-0.00".
  if (label.find_first_not_of("-0.") == std::string::npos && label[0] == '-') label.erase(0, 1);
  return label;
}

std::string metric_axis_label(const std::string& metric) {
  static const std::map<std::string, std::string> kLabels = {
      {"erank", "Effective rank"},
      {"erank_centered", "Effective rank (centred)"},
      {"erank_pct", "Effective rank (% of heads)"},
      {"erank_centered_pct", "Centred effective rank (% of heads)"},
      {"mean_similarity", "Mean head similarity"},
      {"pcs_90", "Components for 90% of variance"},
  };
  return kLabels.at(metric);
}

bool has_fully_redundant_line(const std::string& metric) {
  return metric == "erank" || metric == "erank_centered";
}

bool is_baseline(const ModelReport& model) { return model.variant == "baseline"; }

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
std::pair<double, double> value_range(const Panel& panel, const std::string& metric,
                                      bool baseline_at_one) {
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
std::string path_data(const Frame& frame, const ModelReport& model, const std::string& metric,
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

std::string model_series(const Frame& frame, const ModelReport& model, const std::string& metric,
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
  out += axes_and_grid(frame, metric_axis_label(options.metric));
  bool has_baseline_model = false;
  for (const ModelReport& model : panel.models) {
    if (!is_baseline(model)) continue;
    has_baseline_model = true;
    out += baseline_path(path_data(frame, model, options.metric, nullptr), model.label);
    *drew_baseline = true;
    if (baseline_label->empty()) *baseline_label = model.label;
  }
  if (!has_baseline_model && has_fully_redundant_line(options.metric)) {
    const double y = frame.py(1.0);
    out += baseline_path(
        "M" + num(frame.left) + " " + num(y) + " L" + num(frame.left + frame.width) + " " + num(y),
        kBaselineLabel);
    *drew_baseline = true;
  }
  const auto [first, last] = layer_range(panel);
  const double marker_radius = last - first > 20 ? 2.4 : 3.3;
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
  metric_value(LayerMetrics{}, options.metric);  // rejects an unknown metric up front
  if (panels.empty()) throw Error("", "nothing to plot: no input file");

  std::vector<std::string> order;
  const auto styles = assign_styles(panels, &order);
  Layout layout;
  int widest_span = 0;
  for (const Panel& panel : panels) {
    const auto [first, last] = layer_range(panel);
    widest_span = std::max(widest_span, last - first);
  }
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
    const bool at_one = has_fully_redundant_line(options.metric);
    const auto [low, high] = value_range(panel, options.metric, at_one);
    frame.y = value_axis(low, high, 8);
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

// ---------------------------------------------------------------------------------------------
// Heatmap
// ---------------------------------------------------------------------------------------------
namespace {

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

}  // namespace

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

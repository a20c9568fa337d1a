// figure_options.hpp: formats, size presets, y limits, legend places and style files.
#include "kvrank/plot/figure_options.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/base/text.hpp"

namespace kvrank {
namespace {

/// --head-order: the heads of a heatmap in index order, or clustered (the value: whether to).
constexpr std::array<Named<bool>, 2> kHeadOrders{{{false, "index"}, {true, "cluster"}}};

/// The narrowest --ylim, relative to the size of its limits (a double has 15–16 digits: ticks
/// closer than this would print alike).
constexpr double kMinYlimSpread = 1e-9;

// The names the options take, one table per enum: parsing and naming read the same rows.
constexpr std::array kCornerNames = {std::pair{LegendCorner::top_right, "top-right"},
                                     std::pair{LegendCorner::top_left, "top-left"},
                                     std::pair{LegendCorner::bottom_left, "bottom-left"},
                                     std::pair{LegendCorner::bottom_right, "bottom-right"}};
constexpr std::array kColourMapNames = {std::pair{ColourMap::viridis, "viridis"},
                                        std::pair{ColourMap::rdbu, "rdbu"},
                                        std::pair{ColourMap::greys, "greys"}};

/// The name of `value` in a table of (value, name) rows.
template <typename Enum, std::size_t N>
const char* name_in(const std::array<std::pair<Enum, const char*>, N>& table, Enum value) {
  for (const auto& [entry, name] : table) {
    if (entry == value) return name;
  }
  return "";
}

/// The value named `text` in a table of (value, name) rows, if any.
template <typename Enum, std::size_t N>
std::optional<Enum> value_in(const std::array<std::pair<Enum, const char*>, N>& table,
                             std::string_view text) {
  for (const auto& [entry, name] : table) {
    if (text == name) return entry;
  }
  return std::nullopt;
}

std::string_view trim_spaces(std::string_view text) {
  const std::size_t first = text.find_first_not_of(' ');
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(' ') - first + 1);
}

std::string comma_list(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return list;
}

double parse_number(std::string_view text, std::string_view whole) {
  const std::string_view trimmed = trim_spaces(text);
  double value = 0;
  const auto [end, error] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), value);
  if (trimmed.empty() || error != std::errc() || end != trimmed.data() + trimmed.size() ||
      !std::isfinite(value)) {
    throw Error("", "--ylim: expected LOW,HIGH (e.g. 1,8), found \"" + excerpt(whole) + "\"");
  }
  return value;
}

bool is_hex_colour(std::string_view text) {
  if ((text.size() != 4 && text.size() != 7) || text[0] != '#') return false;
  return text.substr(1).find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
}

/// A dash name or an SVG dash list of up to 8 positive numbers ("6 3", "4,2,1,2").
bool is_dash(const std::string& text) {
  static const std::vector<std::string> kNames = {"solid", "dashed", "dotted", "dashdot"};
  if (std::find(kNames.begin(), kNames.end(), text) != kNames.end()) return true;
  if (text.empty() || text.size() > 64) return false;
  if (text.find_first_not_of("0123456789. ,") != std::string::npos) return false;
  return text.find_first_of("123456789") != std::string::npos;
}

std::string style_field(const nlohmann::json& value, const std::string& file,
                        const std::string& where) {
  if (!value.is_string()) throw Error(file, where + ": expected a string");
  return value.get<std::string>();
}

SeriesStyle parse_series_style(const nlohmann::json& entry, const std::string& file,
                               const std::string& label) {
  const std::string where = "\"" + excerpt(label) + "\"";
  if (!entry.is_object()) {
    throw Error(file, where +
                          ": expected an object like {\"colour\": \"#0072b2\", \"marker\": "
                          "\"square\", \"dash\": \"dashed\"}");
  }
  SeriesStyle style;
  for (const auto& [key, value] : entry.items()) {
    const std::string field = where + "." + excerpt(key);
    if (key == "colour" || key == "color") {
      style.colour = style_field(value, file, field);
      if (!is_hex_colour(style.colour)) {
        throw Error(file,
                    field + ": expected #rrggbb or #rgb, found \"" + excerpt(style.colour) + "\"");
      }
    } else if (key == "marker") {
      style.marker = style_field(value, file, field);
      const auto& names = marker_names();
      if (std::find(names.begin(), names.end(), style.marker) == names.end()) {
        throw Error(file, field + ": unknown marker \"" + excerpt(style.marker) + "\" (expected " +
                              comma_list(names) + ")");
      }
    } else if (key == "dash") {
      style.dash = style_field(value, file, field);
      if (!is_dash(style.dash)) {
        throw Error(file, field +
                              ": expected solid, dashed, dotted, dashdot or a dash list like "
                              "\"6 3\", found \"" +
                              excerpt(style.dash) + "\"");
      }
    } else {
      throw Error(file,
                  where + ": unknown key \"" + excerpt(key) + "\" (expected colour, marker, dash)");
    }
  }
  return style;
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// `value` when within [low, high]; otherwise the usage error of `option`.
template <typename Number>
Number in_range(std::string_view option, Number value, Number low, Number high) {
  if (!(value >= low && value <= high))  // NaN is out of range too
    throw Error("", std::string(option) + ": expected " + number_text(low) + " to " +
                        number_text(high) + ", found " + number_text(value));
  return value;
}

}  // namespace

PlotOptions plot_options(const FigureSettings& settings) {
  PlotOptions options;
  options.metric = parse_curve(settings.metric);
  options.title = settings.title;
  if (!settings.size.empty()) apply_size_preset(options, settings.size);
  if (settings.width)
    options.width_in = in_range("--width", *settings.width, kMinFigureInches, kMaxFigureInches);
  if (settings.height)
    options.height_in = in_range("--height", *settings.height, kMinFigureInches, kMaxFigureInches);
  if (settings.font_size)
    options.font_pt = in_range("--font-size", *settings.font_size, kMinFontPoints, kMaxFontPoints);
  if (settings.columns)
    options.columns = in_range("--cols", *settings.columns, 1, kMaxPanelColumns);
  options.share_y = settings.share_y;
  if (!settings.ylim.empty()) options.ylim = parse_ylim(settings.ylim);
  const LegendChoice legend = parse_legend(settings.legend);
  options.legend = legend.place;
  options.legend_corner = legend.corner;
  if (!settings.colour_map.empty()) options.colour_map = parse_colour_map(settings.colour_map);
  if (!settings.head_order.empty()) {
    const std::optional<bool> cluster = value_named(kHeadOrders, settings.head_order);
    if (!cluster)
      throw Error("", "--head-order: " + expected_name(kHeadOrders, settings.head_order));
    options.cluster_heads = *cluster;
  }
  if (!settings.style_file.empty())
    options.styles = parse_style_file(read_json_object(settings.style_file), settings.style_file);
  return options;
}

int png_dpi(const FigureSettings& settings) {
  if (!settings.dpi) return kDefaultPngDpi;
  return in_range("--dpi", *settings.dpi, kMinPngDpi, kMaxPngDpi);
}

FigureFormat figure_format(const std::string& path) {
  const std::string extension = ascii_lower(std::filesystem::path(path).extension().string());
  if (extension == ".svg") return FigureFormat::svg;
  if (extension == ".png") return FigureFormat::png;
  if (extension == ".pdf") return FigureFormat::pdf;
  throw Error(path,
              "unknown figure format \"" + extension + "\": name the output .svg, .png or .pdf");
}

void apply_size_preset(PlotOptions& options, std::string_view preset) {
  if (preset == "column") {
    options.width_in = 3.5;
    options.font_pt = 8;
  } else if (preset == "page") {
    options.width_in = 7.0;
    options.font_pt = 9;
  } else {
    throw Error("", "--size: expected column or page, found \"" + std::string(preset) + "\"");
  }
}

std::pair<double, double> parse_ylim(std::string_view text) {
  const std::size_t comma = text.find(',');
  if (comma == std::string_view::npos) parse_number("", text);  // throws the usage message
  const double low = parse_number(text.substr(0, comma), text);
  const double high = parse_number(text.substr(comma + 1), text);
  const std::string quoted = "\"" + excerpt(text) + "\"";
  if (!(low < high)) throw Error("", "--ylim: LOW must be below HIGH, found " + quoted);
  // Beyond these the axis has no coordinates (HIGH − LOW is infinite: NaN positions) or no
  // distinct ticks (a one-ulp range gives ticks that print alike).
  if (!std::isfinite(high - low))
    throw Error("", "--ylim: " + quoted + " is too wide to draw (HIGH - LOW overflows a double)");
  if (!(high - low > kMinYlimSpread * std::max(std::fabs(low), std::fabs(high))))
    throw Error("", "--ylim: " + quoted +
                        " is too narrow to draw (HIGH - LOW must be at least 1e-9 of their size)");
  return {low, high};
}

LegendChoice parse_legend(std::string_view text) {
  static constexpr std::array kPlaces = {
      std::pair{LegendPlace::below, "below"}, std::pair{LegendPlace::right, "right"},
      std::pair{LegendPlace::inside, "inside"}, std::pair{LegendPlace::none, "none"}};
  if (const auto place = value_in(kPlaces, text)) return {*place, std::nullopt};
  constexpr std::string_view kInside = "inside:";
  if (text.substr(0, kInside.size()) == kInside) {
    if (const auto corner = value_in(kCornerNames, text.substr(kInside.size())))
      return {LegendPlace::inside, corner};
  }
  throw Error("",
              "--legend: expected below, right, inside or none (inside:CORNER: top-left, "
              "top-right, bottom-left or bottom-right), found \"" +
                  excerpt(text) + "\"");
}

LegendPlace parse_legend_place(std::string_view text) { return parse_legend(text).place; }

const char* legend_corner_name(LegendCorner corner) { return name_in(kCornerNames, corner); }

ColourMap parse_colour_map(std::string_view text) {
  if (const auto map = value_in(kColourMapNames, text)) return *map;
  throw Error("", "--colour-map: expected viridis, rdbu or greys, found \"" + excerpt(text) + "\"");
}

const char* colour_map_name(ColourMap map) { return name_in(kColourMapNames, map); }

std::map<std::string, SeriesStyle> parse_style_file(const nlohmann::json& document,
                                                    const std::string& file) {
  if (!document.is_object()) throw Error(file, "expected an object: label → style");
  std::map<std::string, SeriesStyle> styles;
  for (const auto& [label, entry] : document.items()) {
    styles[label] = parse_series_style(entry, file, label);
  }
  return styles;
}

std::vector<std::string> head_order_names() { return names_of(kHeadOrders); }

const std::vector<std::string>& marker_names() {
  static const std::vector<std::string> kMarkers = {
      "circle",   "square",  "triangle", "diamond", "triangle-down",
      "pentagon", "hexagon", "star",     "plus",    "cross"};
  return kMarkers;
}

}  // namespace kvrank

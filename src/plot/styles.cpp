// Series styles (svg_detail.hpp): colours, markers and dashes of the figures' series.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <set>

#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {
namespace {

// Okabe & Ito's colour-blind-safe palette, ordered like the paper's figure (blue, orange, green,
// red, purple, brown), then four more distinct ones. No grey: that is the baseline's.
constexpr std::array<const char*, 10> kPalette = {"#0072b2", "#e69f00", "#009e73", "#d55e00",
                                                  "#cc79a7", "#8c564b", "#56b4e9", "#000000",
                                                  "#999933", "#882255"};

/// The palette slot the paper gives a variant (its figure: MHA blue, LRKV r=16 orange, LRKV
/// r=64 green, MQA red, MLA purple, GQA brown); -1 for others. LRKV's two slots go to its ranks
/// in increasing order.
int paper_slot(const SeriesKey& key, const std::vector<int>& lrkv_ranks) {
  if (key.variant == "mha") return 0;
  if (key.variant == "mqa") return 3;
  if (key.variant == "mla") return 4;
  if (key.variant == "gqa") return 5;
  if (key.variant == "lrkv" && key.lrkv_rank) {
    const auto at = std::find(lrkv_ranks.begin(), lrkv_ranks.end(), *key.lrkv_rank);
    const auto index = at - lrkv_ranks.begin();
    if (index < 2) return 1 + static_cast<int>(index);
  }
  return -1;
}

std::vector<int> sorted_lrkv_ranks(const std::vector<SeriesKey>& keys) {
  std::set<int> ranks;
  for (const SeriesKey& key : keys) {
    if (key.variant == "lrkv" && key.lrkv_rank) ranks.insert(*key.lrkv_rank);
  }
  return {ranks.begin(), ranks.end()};
}

/// The user's fields over the defaults.
SeriesStyle merged(const SeriesStyle& defaults, const PlotOptions& options,
                   const std::string& label) {
  const auto found = options.styles.find(label);
  if (found == options.styles.end()) return defaults;
  SeriesStyle style = defaults;
  if (!found->second.colour.empty()) style.colour = found->second.colour;
  if (!found->second.marker.empty()) style.marker = found->second.marker;
  if (!found->second.dash.empty()) style.dash = found->second.dash;
  return style;
}

std::string polygon(const std::vector<std::pair<double, double>>& points) {
  std::string d;
  for (const auto& [x, y] : points) d += (d.empty() ? "M" : " L") + num(x) + " " + num(y);
  return d + " Z";
}

/// A regular polygon (or a star: alternating radii) around the origin, first vertex at `angle`.
std::string regular(int vertices, double outer, double inner, double angle) {
  std::vector<std::pair<double, double>> points;
  const int count = inner > 0 ? 2 * vertices : vertices;
  for (int i = 0; i < count; ++i) {
    const double radius = inner > 0 && i % 2 == 1 ? inner : outer;
    const double a = angle + 2 * std::numbers::pi * i / count;
    points.emplace_back(radius * std::cos(a), radius * std::sin(a));
  }
  return polygon(points);
}

/// A plus sign with arms of half-width w and length l, turned by `angle`.
std::string cross_shape(double l, double w, double angle) {
  const std::vector<std::pair<double, double>> arm = {{w, w},  {l, w},   {l, -w},  {w, -w},
                                                      {w, -l}, {-w, -l}, {-w, -w}, {-l, -w},
                                                      {-l, w}, {-w, w},  {-w, l},  {w, l}};
  std::vector<std::pair<double, double>> points;
  for (const auto& [x, y] : arm) {
    points.emplace_back(x * std::cos(angle) - y * std::sin(angle),
                        x * std::sin(angle) + y * std::cos(angle));
  }
  return polygon(points);
}

/// Path data of a marker centred at the origin; sizes chosen so the shapes look equally heavy.
std::string marker_path(const std::string& shape, double r) {
  constexpr double kUp = -std::numbers::pi / 2;
  if (shape == "square") return regular(4, 1.2 * r, 0, std::numbers::pi / 4);
  if (shape == "triangle") return regular(3, 1.4 * r, 0, kUp);
  if (shape == "diamond") return regular(4, 1.35 * r, 0, kUp);
  if (shape == "triangle-down") return regular(3, 1.4 * r, 0, -kUp);
  if (shape == "pentagon") return regular(5, 1.2 * r, 0, kUp);
  if (shape == "hexagon") return regular(6, 1.15 * r, 0, kUp);
  if (shape == "star") return regular(5, 1.5 * r, 0.62 * r, kUp);
  if (shape == "plus") return cross_shape(1.35 * r, 0.45 * r, 0);
  if (shape == "cross") return cross_shape(1.35 * r, 0.45 * r, std::numbers::pi / 4);
  return "M" + num(r) + " 0 A" + num(r) + " " + num(r) + " 0 1 0 " + num(-r) + " 0 A" + num(r) +
         " " + num(r) + " 0 1 0 " + num(r) + " 0 Z";  // circle
}

}  // namespace

std::map<std::string, SeriesStyle> model_styles(const std::vector<SeriesKey>& keys,
                                                const PlotOptions& options) {
  const std::vector<int> lrkv_ranks = sorted_lrkv_ranks(keys);
  std::vector<int> slot_of(keys.size(), -1);
  std::vector<bool> taken(kPalette.size(), false);
  for (std::size_t i = 0; i < keys.size(); ++i) {  // the paper's slots first
    const int slot = paper_slot(keys[i], lrkv_ranks);
    if (slot >= 0 && !taken[static_cast<std::size_t>(slot)]) {
      slot_of[i] = slot;
      taken[static_cast<std::size_t>(slot)] = true;
    }
  }
  std::size_t overflow = 0;  // past ten series the colours repeat, told apart by a dash
  std::map<std::string, SeriesStyle> styles;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (slot_of[i] < 0) {
      const auto free_slot = std::find(taken.begin(), taken.end(), false);
      if (free_slot != taken.end()) {
        *free_slot = true;
        slot_of[i] = static_cast<int>(free_slot - taken.begin());
      }
    }
    SeriesStyle defaults;
    if (slot_of[i] >= 0) {
      const auto slot = static_cast<std::size_t>(slot_of[i]);
      defaults = {kPalette[slot], marker_names()[slot], "solid"};
    } else {
      const std::size_t index = overflow++;
      defaults = {kPalette[index % kPalette.size()], marker_names()[(index + 3) % 10], "dashed"};
    }
    styles[keys[i].label] = merged(defaults, options, keys[i].label);
  }
  return styles;
}

std::map<std::string, SeriesStyle> sequential_styles(const std::vector<std::string>& labels,
                                                     const PlotOptions& options) {
  std::map<std::string, SeriesStyle> styles;
  const auto count = static_cast<double>(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    // Viridis stops at 0.85: its last yellows vanish on white.
    const double t = count > 1 ? 0.85 * static_cast<double>(i) / (count - 1) : 0.0;
    const SeriesStyle defaults = {viridis(t), marker_names()[i % marker_names().size()],
                                  i < marker_names().size() ? "solid" : "dashed"};
    styles[labels[i]] = merged(defaults, options, labels[i]);
  }
  return styles;
}

std::string marker_svg(const std::string& shape, double x, double y, double radius,
                       const std::string& colour) {
  return "<path class=\"marker\"" + attr("data-shape", shape) + attr("data-x", x) +
         attr("data-y", y) + attr("transform", "translate(" + num(x) + " " + num(y) + ")") +
         attr("d", marker_path(shape, radius)) + attr("fill", colour) +
         " stroke=\"white\" stroke-width=\"0.6\"/>\n";
}

std::string dash_attribute(const std::string& dash) {
  if (dash.empty() || dash == "solid") return "";
  if (dash == "dashed") return attr("stroke-dasharray", "6 3");
  if (dash == "dotted") return attr("stroke-dasharray", "1 3");
  if (dash == "dashdot") return attr("stroke-dasharray", "6 2.5 1 2.5");
  return attr("stroke-dasharray", dash);  // a dash list, checked by parse_style_file
}

}  // namespace kvrank::plot_detail

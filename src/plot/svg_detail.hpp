// Private: the pieces the figures of svg.hpp share — the small SVG vocabulary (svg.cpp) and the
// axes (axes.cpp); the rank curves live in curves.cpp, the heatmaps in heatmap.cpp.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "kvrank/plot/svg.hpp"

namespace kvrank::plot_detail {

constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";
constexpr const char* kTextColour = "#262626";
constexpr const char* kBaselineColour = "#7f7f7f";
constexpr const char* kBaselineLabel = "Fully redundant";
// matplotlib's tab10.
constexpr std::array<const char*, 10> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                  "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                                  "#bcbd22", "#17becf"};

// ---------------------------------------------------------------------------------------------
// Small SVG vocabulary (svg.cpp)
// ---------------------------------------------------------------------------------------------

/// A coordinate or length, with at most two decimals and no trailing zeros.
std::string num(double value);
std::string attr(const char* name, const std::string& value);
std::string attr(const char* name, double value);
std::string line(double x1, double y1, double x2, double y2, const std::string& style);

enum class Anchor { kStart, kMiddle, kEnd };

std::string text(double x, double y, const std::string& content, double size, Anchor anchor,
                 const std::string& extra = "");
std::string document_open(double width, double height);
/// Rough width of a text in a sans-serif font (no font metrics here): 0.55 em per character.
double text_width(const std::string& content, double size);

// ---------------------------------------------------------------------------------------------
// Axes (axes.cpp)
// ---------------------------------------------------------------------------------------------

struct Axis {
  double low = 0;
  double high = 1;
  std::vector<double> ticks;
  int decimals = 0;

  double fraction(double value) const { return (value - low) / (high - low); }
};

/// Matplotlib-like limits (data ± 5 %) and "nice" ticks (1, 2, 2.5, 5 × 10^k) inside them.
Axis value_axis(double data_min, double data_max, int target_ticks);
/// Layer axis: limits 5 % beyond the first and last layer, integer ticks.
Axis layer_axis(int first, int last);
std::string tick_label(double value, int decimals);

}  // namespace kvrank::plot_detail

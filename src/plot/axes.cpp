// Axes of the figures (svg.hpp): matplotlib-like limits, nice ticks, labels.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {
// ---------------------------------------------------------------------------------------------
// Axes
// ---------------------------------------------------------------------------------------------

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

namespace {

/// Integer tick step for a layer span: 1, 2, 5, 10, 20, 50 … giving at most 10 ticks.
int layer_step(int span) {
  for (int magnitude = 1;; magnitude *= 10) {
    for (int multiple : {1, 2, 5}) {
      if (span / (multiple * magnitude) + 1 <= 10) return multiple * magnitude;
    }
  }
}

}  // namespace

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

}  // namespace kvrank::plot_detail

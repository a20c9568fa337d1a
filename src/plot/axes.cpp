// Axes of the figures (svg.hpp): matplotlib-like limits, nice ticks, labels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>

#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {
// ---------------------------------------------------------------------------------------------
// Axes
// ---------------------------------------------------------------------------------------------

namespace {

// More ticks than fit on an axis are never drawn, whatever the data: this bounds the loops below.
constexpr std::size_t kMaxTicks = 25;

}  // namespace

namespace {

/// Nice ticks (1, 2, 2.5, 5 × 10^k) between axis.low and axis.high, and their decimals.
void nice_ticks(Axis& axis, int target_ticks) {
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
  // Ticks as multiples k·step (no running sum, whose round-off could stall or drift).
  const double last = std::floor(axis.high / step + 1e-9);
  for (double k = std::ceil(axis.low / step - 1e-9); k <= last && axis.ticks.size() < kMaxTicks;
       ++k) {
    const double tick = k * step;
    axis.ticks.push_back(std::fabs(tick) < 1e-12 * step ? 0.0 : tick);
  }
}

}  // namespace

/// Matplotlib-like limits (data ± 5 %) and "nice" ticks (1, 2, 2.5, 5 × 10^k) inside them.
Axis value_axis(double data_min, double data_max, int target_ticks) {
  // A spread below 1e-9 of the values' size is round-off, not a trend, and ticks that close could
  // not even be stepped through in a double (1e17 + 4 == 1e17): drawn as a flat line.
  const double scale = std::max(std::fabs(data_min), std::fabs(data_max));
  if (!(data_max - data_min > std::max(1e-12, 1e-9 * scale))) {
    const double half = std::max(0.5, std::fabs(data_min) * 0.1);
    data_min -= half;
    data_max += half;
  }
  Axis axis;
  const double margin = 0.05 * (data_max - data_min);
  axis.low = data_min - margin;
  axis.high = data_max + margin;
  nice_ticks(axis, target_ticks);
  return axis;
}

Axis exact_axis(double low, double high, int target_ticks) {
  Axis axis;
  axis.low = low;
  axis.high = high;
  nice_ticks(axis, target_ticks);
  return axis;
}

namespace {

/// Integer tick step for a layer span: 1, 2, 5, 10, 20, 50 … giving at most 10 ticks. In 64 bits:
/// a span of layer indices (any two ints) reaches 2^32, and 10^10 must not overflow.
std::int64_t layer_step(std::int64_t span) {
  for (std::int64_t magnitude = 1;; magnitude *= 10) {
    for (std::int64_t multiple : {1, 2, 5}) {
      if (span / (multiple * magnitude) + 1 <= 10) return multiple * magnitude;
    }
  }
}

}  // namespace

/// Integer axis: limits 5 % beyond the first and last value, integer ticks.
Axis integer_axis(std::int64_t first, std::int64_t last) {
  Axis axis;
  // Steps reach int64; layer indices, int: a span can pass 2^62 only for steps, and is clamped
  // there (the ticks then thin out to their maximum count).
  const std::int64_t span =
      last >= 0 && first < 0 && last > INT64_MAX + first ? INT64_MAX : last - first;
  const double margin = first == last ? 0.5 : 0.05 * static_cast<double>(span);
  axis.low = static_cast<double>(first) - margin;
  axis.high = static_cast<double>(last) + margin;
  const std::int64_t step = layer_step(span);
  for (std::int64_t tick = (first / step) * step; tick <= last && axis.ticks.size() < kMaxTicks;
       tick += step) {
    if (tick >= first) axis.ticks.push_back(static_cast<double>(tick));
    if (tick > INT64_MAX - step) break;  // the next tick would overflow
  }
  return axis;
}

std::string tick_label(double value, int decimals) {
  char buffer[512];  // room for any double in fixed notation (DBL_MAX has 309 digits)
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  std::string label = buffer;
  // A tiny negative value must not print as "-0.00".
  if (label.find_first_not_of("-0.") == std::string::npos && label[0] == '-') label.erase(0, 1);
  return label;
}

}  // namespace kvrank::plot_detail

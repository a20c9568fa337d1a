// Axes of the figures (svg.hpp): matplotlib-like limits, nice ticks, labels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {
namespace {

// More ticks than fit on an axis are never drawn, whatever the data: this bounds the loops below.
constexpr std::size_t kMaxTicks = 25;

/// Fixed-point labels up to this many decimals and below kMaxFixed; beyond, 1.5e-07 / 2e+300
/// (a 309-digit label would push the panel off the page).
constexpr int kMaxFixedDecimals = 6;
constexpr double kMaxFixed = 1e7;

/// "1.5e-7", "2e300": a value in scientific notation with `digits` after the point, the exponent
/// without '+' and leading zeros.
std::string scientific(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*e", digits, value);
  std::string label = buffer;
  const std::size_t e = label.find('e');
  std::string exponent = label.substr(e + 1);
  const bool negative = exponent[0] == '-';
  exponent.erase(0, exponent.find_first_not_of("+-0"));
  if (exponent.empty()) return label.substr(0, e);  // e+00: the mantissa alone
  return label.substr(0, e + 1) + (negative ? "-" : "") + exponent;
}

/// Nice ticks (1, 2, 2.5, 5 × 10^k) between axis.low and axis.high, and their labels' format.
void nice_ticks(Axis& axis, int target_ticks) {
  const double raw_step = (axis.high - axis.low) / target_ticks;
  // A span past a double's range has no ticks: the caller refuses it (checked_value_axis), and
  // the steps below would be infinite.
  if (!std::isfinite(raw_step) || !(raw_step > 0)) return;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double nice = 10;
  for (double candidate : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (candidate * magnitude >= raw_step * (1 - 1e-9)) {
      nice = candidate;
      break;
    }
  }
  const double step = nice * magnitude;
  const int extra_decimal = nice == 2.5 ? 1 : 0;
  const int step_digits = static_cast<int>(std::floor(std::log10(step) + 1e-9));
  axis.decimals = std::max(0, -step_digits + extra_decimal);
  // Ticks as multiples k·step (no running sum, whose round-off could stall or drift); counted, so
  // that a k too large to step by one in a double cannot loop, and distinct, so that no two ticks
  // share a place or a label.
  const double first = std::ceil(axis.low / step - 1e-9);
  const double last = std::floor(axis.high / step + 1e-9);
  for (std::size_t i = 0; first + static_cast<double>(i) <= last && i < kMaxTicks; ++i) {
    double tick = (first + static_cast<double>(i)) * step;
    if (std::fabs(tick) < 1e-12 * step) tick = 0.0;
    if (axis.ticks.empty() || tick > axis.ticks.back()) axis.ticks.push_back(tick);
  }
  double largest = 0;
  for (double tick : axis.ticks) largest = std::max(largest, std::fabs(tick));
  if (axis.decimals > kMaxFixedDecimals || largest >= kMaxFixed) {
    const int largest_digits = largest > 0 ? static_cast<int>(std::floor(std::log10(largest))) : 0;
    axis.scientific_digits = std::max(0, largest_digits - step_digits + extra_decimal);
  }
}

/// Integer tick step for a span: 1, 2, 5, 10, 20, 50 … giving at most `most` ticks. In 64 bits:
/// a span of steps reaches 2^63, and the magnitude stops before it would overflow.
std::int64_t integer_step(std::int64_t span, int most) {
  for (std::int64_t magnitude = 1;; magnitude *= 10) {
    for (std::int64_t multiple : {1, 2, 5}) {
      if (span / (multiple * magnitude) < most) return multiple * magnitude;  // ticks ≤ most
    }
    if (magnitude > INT64_MAX / 10) return INT64_MAX;  // at most one tick
  }
}

}  // namespace

std::string Axis::label(std::size_t i) const {
  if (i < labels.size()) return labels[i];
  if (scientific_digits) return scientific(ticks[i], *scientific_digits);
  return tick_label(ticks[i], decimals);
}

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

/// Integer axis: limits 5 % beyond the first and last value, integer ticks labelled exactly.
Axis integer_axis(std::int64_t first, std::int64_t last, int most_ticks) {
  Axis axis;
  // Steps reach int64; layer indices, int: a span can pass 2^62 only for steps, and is clamped
  // there (the ticks then thin out to their maximum count).
  const std::int64_t span =
      last >= 0 && first < 0 && last > INT64_MAX + first ? INT64_MAX : last - first;
  const double low = static_cast<double>(first);
  const double high = static_cast<double>(last);
  // Near 2^63 a double holds only every 1024th integer: steps closer than that share a place,
  // and the axis is widened around them as for one value (limits equal would give NaN).
  const double width = high - low;
  if (!(width > 1e-9 * std::max(std::fabs(low), std::fabs(high)))) {
    const double half = std::max(0.5, 0.05 * std::fabs(low));
    axis.low = low - half;
    axis.high = high + half;
    axis.ticks.push_back(low);
    axis.labels.push_back(std::to_string(first));
    return axis;
  }
  axis.low = low - 0.05 * width;
  axis.high = high + 0.05 * width;
  const std::int64_t step = integer_step(span, std::clamp(most_ticks, 2, 10));
  for (std::int64_t tick = (first / step) * step; tick <= last && axis.ticks.size() < kMaxTicks;
       tick += step) {
    if (tick >= first) {
      axis.ticks.push_back(static_cast<double>(tick));
      axis.labels.push_back(std::to_string(tick));
    }
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

// The heatmaps' colour maps (svg_detail.hpp): viridis, ColorBrewer's red–blue and greys, each a
// few anchor colours evenly spaced over the map's range, interpolated linearly in between.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {
namespace {

struct Rgb {
  double r, g, b;
};

const std::vector<Rgb> kViridis = {{68, 1, 84},    {71, 45, 123},  {59, 82, 139},
                                   {44, 114, 142}, {33, 145, 140}, {40, 174, 128},
                                   {94, 201, 98},  {173, 220, 48}, {253, 231, 37}};
// Negative blue, positive red (matplotlib's RdBu_r): the convention for correlations.
const std::vector<Rgb> kRedBlue = {{5, 48, 97},     {33, 102, 172},  {67, 147, 195},
                                   {146, 197, 222}, {209, 229, 240}, {247, 247, 247},
                                   {253, 219, 199}, {244, 165, 130}, {214, 96, 77},
                                   {178, 24, 43},   {103, 0, 31}};
// Light to dark: the high values stand out in grey print as in colour.
const std::vector<Rgb> kGreys = {{250, 250, 250}, {30, 30, 30}};

const std::vector<Rgb>& anchors_of(ColourMap map) {
  switch (map) {
    case ColourMap::viridis:
      return kViridis;
    case ColourMap::rdbu:
      return kRedBlue;
    case ColourMap::greys:
      return kGreys;
  }
  return kViridis;
}

Rgb colour_at(const ColourScale& scale, double value) {
  const std::vector<Rgb>& anchors = anchors_of(scale.map);
  double t = std::clamp((value - scale.low) / (scale.high - scale.low), 0.0, 1.0);
  if (!std::isfinite(t)) t = 0;
  const double position = t * static_cast<double>(anchors.size() - 1);
  const auto index = std::min(static_cast<std::size_t>(position), anchors.size() - 2);
  const double w = position - static_cast<double>(index);
  const Rgb& a = anchors[index];
  const Rgb& b = anchors[index + 1];
  return {a.r + w * (b.r - a.r), a.g + w * (b.g - a.g), a.b + w * (b.b - a.b)};
}

}  // namespace

std::string ColourScale::colour(double value) const {
  const Rgb rgb = colour_at(*this, value);
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", static_cast<int>(std::lround(rgb.r)),
                static_cast<int>(std::lround(rgb.g)), static_cast<int>(std::lround(rgb.b)));
  return buffer;
}

bool ColourScale::dark(double value) const {
  const Rgb rgb = colour_at(*this, value);
  return 0.299 * rgb.r + 0.587 * rgb.g + 0.114 * rgb.b < 128;
}

std::string ColourScale::gradient(const std::string& id) const {
  std::string out = "<linearGradient" + attr("id", id) + " x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  constexpr int kStops = 20;
  for (int i = 0; i <= kStops; ++i) {
    const double t = static_cast<double>(i) / kStops;
    out +=
        "<stop" + attr("offset", t) + attr("stop-color", colour(low + t * (high - low))) + "/>\n";
  }
  return out + "</linearGradient>\n";
}

std::string viridis(double t) { return ColourScale{ColourMap::viridis, 0, 1}.colour(t); }

}  // namespace kvrank::plot_detail

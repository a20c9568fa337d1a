// The metric table of results.hpp: the per-layer curves `check` compares and `plot` draws.
#include <array>
#include <string>

#include "kvrank/base/error.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/report/results.hpp"

namespace kvrank {
namespace {

struct MetricInfo {
  Metric metric;
  std::string_view name;
  double (*value)(const LayerMetrics&);
  std::string_view axis_label;
  bool fully_redundant_at_one;  // the 1-head reference line belongs on the plot
};

constexpr std::array<MetricInfo, 6> kMetrics{{
    {Metric::erank, "erank", [](const LayerMetrics& m) { return m.erank; }, "Effective rank", true},
    {Metric::erank_centered, "erank_centered",
     [](const LayerMetrics& m) { return m.erank_centered; }, "Effective rank (centred)", true},
    {Metric::erank_pct, "erank_pct", [](const LayerMetrics& m) { return m.erank_pct; },
     "Effective rank (% of heads)", false},
    {Metric::erank_centered_pct, "erank_centered_pct",
     [](const LayerMetrics& m) { return m.erank_centered_pct; },
     "Centred effective rank (% of heads)", false},
    {Metric::mean_similarity, "mean_similarity",
     [](const LayerMetrics& m) { return m.mean_similarity; }, "Mean head similarity", false},
    {Metric::pcs_90, "pcs_90", [](const LayerMetrics& m) { return double(m.pcs_90); },
     "Components for 90% of variance", false},
}};
static_assert(in_enum_order(kMetrics, &MetricInfo::metric));

constexpr const MetricInfo& info(Metric metric) noexcept {
  return kMetrics[static_cast<std::size_t>(metric)];
}

}  // namespace

std::string_view metric_name(Metric metric) noexcept { return info(metric).name; }

Metric parse_metric(std::string_view name) {
  if (const auto metric = value_named(kMetrics, name, &MetricInfo::metric)) return *metric;
  throw Error(
      "", "unknown metric \"" + std::string(name) + "\" (expected " + name_list(kMetrics) + ")");
}

double metric_value(const LayerMetrics& layer, Metric metric) noexcept {
  return info(metric).value(layer);
}

std::string_view metric_axis_label(Metric metric) noexcept { return info(metric).axis_label; }

bool fully_redundant_at_one(Metric metric) noexcept { return info(metric).fully_redundant_at_one; }

}  // namespace kvrank

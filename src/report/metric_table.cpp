// The field tables of result_model.hpp: each per-layer curve and each geometry field, described
// once; the writers (result_files.cpp, csv.cpp, table.cpp), the JSON reader, `check` and `plot`
// read them.
#include <array>
#include <string>

#include "kvrank/base/error.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/report/result_model.hpp"

namespace kvrank {
namespace {

// The table headings are padded as the columns were laid out by hand: a percentage column's value
// is one character wider than its heading (the '%' overhangs).
constexpr std::array<CurveField, 6> kMetrics{{
    {Curve::erank, "erank", [](const LayerMetrics& m) { return m.erank; },
     [](LayerMetrics& m, double v) { m.erank = v; }, false, "Effective rank", true,
     &Summary::erank_mean, "     erank", " %9.3f", 1},
    {Curve::erank_pct, "erank_pct", [](const LayerMetrics& m) { return m.erank_pct; },
     [](LayerMetrics& m, double v) { m.erank_pct = v; }, false, "Effective rank (% of heads)",
     false, &Summary::erank_pct_mean, "  erank%", " %7.1f%%", 1},
    {Curve::erank_centered, "erank_centered",
     [](const LayerMetrics& m) { return m.erank_centered; },
     [](LayerMetrics& m, double v) { m.erank_centered = v; }, false, "Effective rank (centred)",
     true, &Summary::erank_centered_mean, "   centred", " %9.3f", 1},
    {Curve::erank_centered_pct, "erank_centered_pct",
     [](const LayerMetrics& m) { return m.erank_centered_pct; },
     [](LayerMetrics& m, double v) { m.erank_centered_pct = v; }, false,
     "Centred effective rank (% of heads)", false, &Summary::erank_centered_pct_mean, "  centred%",
     " %8.1f%%", 1},
    {Curve::mean_similarity, "mean_similarity",
     [](const LayerMetrics& m) { return m.mean_similarity; },
     [](LayerMetrics& m, double v) { m.mean_similarity = v; }, false, "Mean head similarity", false,
     nullptr, "  mean sim", " %9.3f", 1},
    {Curve::pcs_90, "pcs_90", [](const LayerMetrics& m) { return double(m.pcs_90); },
     [](LayerMetrics& m, double v) { m.pcs_90 = static_cast<int>(v); }, true,
     "Components for 90% of variance", false, nullptr, "  pcs90", " %6.0f", 1},
}};
static_assert(in_enum_order(kMetrics, &CurveField::metric));

constexpr std::array<GeometryField, 5> kGeometry{{
    {"heads", &ModelGeometry::heads, 1},
    {"kv_heads", &ModelGeometry::kv_heads, 1},
    {"head_dim", &ModelGeometry::head_dim, 1},
    {"d_model", &ModelGeometry::d_model, 1},
    {"num_layers", &ModelGeometry::num_layers, 1},
}};

constexpr std::array<OptionalGeometryField, 2> kOptionalGeometry{{
    {"lrkv_rank", &ModelGeometry::lrkv_rank, 1},
    {"mla_kv_lora_rank", &ModelGeometry::mla_kv_lora_rank, 1},
}};

}  // namespace

std::span<const CurveField> metric_fields() noexcept { return kMetrics; }

const CurveField& curve_field(Curve metric) noexcept {
  return kMetrics[static_cast<std::size_t>(metric)];
}

std::string_view curve_name(Curve metric) noexcept { return curve_field(metric).name; }

Curve parse_curve(std::string_view name) {
  if (const auto metric = value_named(kMetrics, name, &CurveField::metric)) return *metric;
  throw Error("", "--metric: " + expected_name(kMetrics, name));
}

double curve_value(const LayerMetrics& layer, Curve metric) noexcept {
  return curve_field(metric).value(layer);
}

std::string_view curve_axis_label(Curve metric) noexcept { return curve_field(metric).axis_label; }

bool fully_redundant_at_one(Curve metric) noexcept {
  return curve_field(metric).fully_redundant_at_one;
}

std::string summary_key(const CurveField& field) { return std::string(field.name) + "_mean"; }

std::span<const GeometryField> geometry_fields() noexcept { return kGeometry; }

std::span<const OptionalGeometryField> optional_geometry_fields() noexcept {
  return kOptionalGeometry;
}

}  // namespace kvrank

// CSV of analysis results (report.hpp): one row per model and layer.
#include <charconv>
#include <string>

#include "kvrank/report/report.hpp"

namespace kvrank {

// ----------------------------------------------------------------------------------------------
// CSV writer
// ----------------------------------------------------------------------------------------------
namespace {

// RFC 4180: a field holding a comma, a quote or a line break is quoted, inner quotes doubled.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + '"';
}

// The shortest text that reads back as exactly the same double (std::to_chars).
std::string shortest_double(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

// The number as CSV text: integral metrics as integers, others in their shortest exact form.
std::string metric_text(const MetricField& field, const LayerMetrics& layer) {
  const double value = field.value(layer);
  return field.integral ? std::to_string(static_cast<long long>(value)) : shortest_double(value);
}

}  // namespace

// Numbers are written in their shortest exact form (they read back bit-identical); lines end in
// "\n" (not CRLF), which every CSV reader accepts. The metric columns follow the metric table.
std::string to_csv(const std::vector<ModelReport>& models) {
  std::string out = "label,variant,repr,layer,heads";
  for (const MetricField& field : metric_fields()) out += ',' + std::string(field.name);
  out += '\n';
  for (const ModelReport& model : models) {
    for (const LayerMetrics& layer : model.layers) {
      out += csv_field(model.label) + ',' + csv_field(model.variant) + ',' + csv_field(model.repr);
      out += ',' + std::to_string(layer.layer) + ',' + std::to_string(layer.heads);
      for (const MetricField& field : metric_fields()) out += ',' + metric_text(field, layer);
      out += '\n';
    }
  }
  return out;
}

}  // namespace kvrank

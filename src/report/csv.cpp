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

}  // namespace

// Numbers are written in their shortest exact form (they read back bit-identical); lines end in
// "\n" (not CRLF), which every CSV reader accepts.
std::string to_csv(const std::vector<ModelReport>& models) {
  std::string out =
      "label,variant,repr,layer,heads,erank,erank_centered,erank_pct,erank_centered_pct,"
      "mean_similarity,pcs_90\n";
  for (const ModelReport& model : models) {
    for (const LayerMetrics& layer : model.layers) {
      out += csv_field(model.label) + ',' + csv_field(model.variant) + ',' + csv_field(model.repr);
      out += ',' + std::to_string(layer.layer) + ',' + std::to_string(layer.heads);
      for (double value : {layer.erank, layer.erank_centered, layer.erank_pct,
                           layer.erank_centered_pct, layer.mean_similarity}) {
        out += ',' + shortest_double(value);
      }
      out += ',' + std::to_string(layer.pcs_90) + '\n';
    }
  }
  return out;
}

}  // namespace kvrank

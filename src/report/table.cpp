// The terminal table of analysis results (result_files.hpp).
#include <cstdio>
#include <string>

#include "kvrank/base/text.hpp"
#include "kvrank/report/result_files.hpp"

namespace kvrank {

// ----------------------------------------------------------------------------------------------
// Terminal table
// ----------------------------------------------------------------------------------------------
namespace {

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

// A bar of `width` cells for a fraction in [0, 1], with eighth-block resolution.
std::string fraction_bar(double fraction, int width) {
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  if (!std::isfinite(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int eighths = static_cast<int>(std::lround(fraction * width * 8));
  std::string bar;
  for (int i = 0; i < eighths / 8; ++i) bar += "█";
  bar += kEighths[eighths % 8];
  const int used = eighths / 8 + (eighths % 8 ? 1 : 0);
  bar.append(static_cast<std::size_t>(width - used), ' ');
  return bar;
}

std::string join_ints(const std::vector<int>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) text += ',';
    text += std::to_string(values[i]);
  }
  return text;
}

std::string model_heading(const ModelReport& model) {
  // The table is for a terminal: a label (a file name by default) is shown escaped.
  const ModelGeometry& geometry = model.geometry;
  std::string text = printable(model.label) + "  (" + model.family + ", " + model.variant;
  if (geometry.lrkv_rank) text += " r=" + std::to_string(*geometry.lrkv_rank);
  if (geometry.mla_kv_lora_rank)
    text += " kv_lora_rank=" + std::to_string(*geometry.mla_kv_lora_rank);
  text += ")  heads " + std::to_string(geometry.heads) + "  kv_heads " +
          std::to_string(geometry.kv_heads) + "  head_dim " + std::to_string(geometry.head_dim) +
          "  repr " + model.repr;
  if (model.attention) text += "  attention " + series_text(*model.attention);
  return text + "\n";
}

std::string column_titles() {
  std::string titles = " layer";
  for (const CurveField& field : metric_fields()) titles += field.table_title;
  return titles + "  erank/H\n";
}

std::string layer_row(const LayerMetrics& layer) {
  char number[16];
  std::snprintf(number, sizeof number, "%6d", layer.layer);
  std::string row = number;
  for (const CurveField& field : metric_fields())
    row += format(field.table_pattern, field.value(layer));
  row += "  " + fraction_bar(layer.erank_pct / 100.0, 10);
  if (!layer.zero_heads.empty()) row += "  zero heads: " + join_ints(layer.zero_heads);
  return row + "\n";
}

// The means sit under their columns, which come first in the table.
std::string summary_row(const Summary& summary) {
  std::string row = "  mean";
  for (const CurveField& field : metric_fields())
    if (field.mean) row += format(field.table_pattern, summary.*field.mean);
  return row + "\n";
}

/// `analyze --pairs K`: the layer's most similar pairs and each head's nearest neighbour.
std::string head_pairs_rows(const LayerMetrics& layer) {
  if (layer.nearest_heads.empty()) return "";
  return "  layer " + std::to_string(layer.layer) +
         " most similar pairs: " + head_pairs_text(layer.similar_pairs, 3) +
         "\n    nearest head: " + nearest_heads_text(layer.nearest_heads, 3) + "\n";
}

}  // namespace

std::string to_table(const std::vector<ModelReport>& models) {
  std::string out;
  for (std::size_t m = 0; m < models.size(); ++m) {
    const ModelReport& model = models[m];
    if (m) out += "\n";
    out += model_heading(model) + column_titles();
    for (const LayerMetrics& layer : model.layers) out += layer_row(layer);
    out += summary_row(model.summary);
    for (const LayerMetrics& layer : model.layers) out += head_pairs_rows(layer);
  }
  return out;
}

}  // namespace kvrank

// The summary of a report: means over its layers (result_model.hpp). Its own file, apart from the
// JSON reader and writer, as `merge` needs only this and the reader (fuzz/fuzz_merge.cpp).
#include "kvrank/report/result_model.hpp"

namespace kvrank {

Summary summarize(const std::vector<LayerMetrics>& layers) {
  Summary summary;
  if (layers.empty()) return summary;
  const double count = static_cast<double>(layers.size());
  for (const CurveField& field : metric_fields()) {
    if (!field.mean) continue;
    double total = 0;
    for (const LayerMetrics& layer : layers) total += field.value(layer);
    summary.*field.mean = total / count;
  }
  return summary;
}

}  // namespace kvrank

// The summary of a report: means over its layers (results.hpp). Its own file, apart from the JSON
// reader and writer, as `merge` needs only this and the reader (fuzz/fuzz_merge.cpp).
#include "kvrank/report/results.hpp"

namespace kvrank {

Summary summarize(const std::vector<LayerMetrics>& layers) {
  Summary summary;
  if (layers.empty()) return summary;
  for (const LayerMetrics& layer : layers) {
    summary.erank_mean += layer.erank;
    summary.erank_centered_mean += layer.erank_centered;
    summary.erank_pct_mean += layer.erank_pct;
    summary.erank_centered_pct_mean += layer.erank_centered_pct;
  }
  const double count = static_cast<double>(layers.size());
  summary.erank_mean /= count;
  summary.erank_centered_mean /= count;
  summary.erank_pct_mean /= count;
  summary.erank_centered_pct_mean /= count;
  return summary;
}

}  // namespace kvrank

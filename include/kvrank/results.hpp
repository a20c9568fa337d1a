// The results of an analysis, as the writers (report.hpp), `check` and the figures (svg.hpp) see
// them: one ModelReport per model and representation. Needs no checkpoint reader.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kvrank/diversity.hpp"

namespace kvrank {

struct Summary {
  double erank_mean = 0;
  double erank_centered_mean = 0;
  double erank_pct_mean = 0;
  double erank_centered_pct_mean = 0;
};

/// One model × one representation. Fields match the JSON schema of SPEC.md §3.
struct ModelReport {
  std::string label;
  std::string path;
  std::string family;
  std::string variant;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int d_model = 0;
  int num_layers = 0;
  std::optional<int> lrkv_rank;
  std::optional<int> mla_kv_lora_rank;
  std::string repr = "qk";
  std::vector<LayerMetrics> layers;
  Summary summary;
};

}  // namespace kvrank

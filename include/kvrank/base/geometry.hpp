// The head geometry of a model: what layout detection (layout/layout.hpp) finds and what every
// result (report/result_model.hpp) reports — one struct, so the two cannot drift apart.
#pragma once

#include <optional>

namespace kvrank {

struct ModelGeometry {
  int heads = 0;     ///< query heads per layer
  int kv_heads = 0;  ///< key/value heads per layer (heads for MHA, 1 for MQA)
  int head_dim = 0;
  int d_model = 0;  ///< the hidden size the projections act on
  int num_layers = 0;
  std::optional<int> lrkv_rank;         ///< LRKV's per-head rank r; absent for other families
  std::optional<int> mla_kv_lora_rank;  ///< MLA's cached latent size; absent for other families

  bool operator==(const ModelGeometry&) const = default;
};

}  // namespace kvrank

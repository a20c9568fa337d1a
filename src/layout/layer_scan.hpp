// Private: finding the per-layer tensors of a family from one marker tensor name.
#pragma once

#include <string>

#include "kvrank/checkpoint.hpp"

namespace kvrank::detail {

/// Tensors named `<prefix><layer><suffix>`: the prefix (e.g. "model.layers.") and the number of
/// layers (largest index + 1). `count` is 0 when no tensor matches. When several prefixes carry the
/// suffix, the one of the first tensor in name order wins and only its layers are counted.
struct LayerScan {
  std::string prefix;
  int count = 0;
};
LayerScan scan_layers(const Checkpoint& checkpoint, const std::string& suffix);

}  // namespace kvrank::detail

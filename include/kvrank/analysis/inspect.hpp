// `kvrank inspect`: what a checkpoint holds — every tensor grouped by layer, and what kvrank
// detects (family, variant, head counts; an encoder-decoder's attention series; a hybrid's
// attention layers). Detection failures are reported, not thrown, so a file kvrank cannot analyse
// can still be inspected.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"

namespace kvrank {

struct InspectReport {
  std::string path;
  std::vector<TensorView> tensors;  ///< sorted by layer index, then name
  /// One layout per attention series analyze would measure (detect_series): one for a
  /// decoder-only model, several for an encoder-decoder; empty when detection failed.
  std::vector<ModelLayout> series;
  std::string detection_error;  ///< why, when it failed
};

InspectReport inspect_checkpoint(const Checkpoint& checkpoint,
                                 const LayoutOverrides& overrides = {});
nlohmann::json to_json(const std::vector<InspectReport>& reports);
std::string to_text(const std::vector<InspectReport>& reports);

}  // namespace kvrank

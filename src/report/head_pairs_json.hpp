// Private: the JSON of `analyze --pairs K` in a layer of a result file (metric/head_pairs.hpp,
// docs/result-format.md): written by to_json, read back by reports_from_json so that merge and
// plot keep it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kvrank/metric/diversity.hpp"

namespace kvrank::detail {

/// Adds "similar_pairs", "nearest_head" and "nearest_head_similarity" to a layer's object when the
/// layer has them (layer.nearest_heads not empty).
void add_head_pairs(nlohmann::json& out, const LayerMetrics& layer);

/// Reads those keys of a layer's object, when present, into `layer`. Throws kvrank::Error naming
/// `file` and the place (`where`.similar_pairs[2]) of a mistyped entry, or of nearest_head and
/// nearest_head_similarity of different lengths.
void read_head_pairs(const nlohmann::json& object, const std::string& where,
                     const std::string& file, LayerMetrics& layer);

}  // namespace kvrank::detail

// Layer indices as the user writes them and as tensor names carry them: `--layers 0-11,20`,
// `--layer-shard I/N`, the compact lists in messages ("0-3,7"), and the digits of
// `model.layers.12.` — one set of rules for every layer, so that what `--layers` accepts,
// what `merge` prints and what a tensor name may say agree.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvrank {

/// Layer indices kvrank reads — in tensor names, `--layers` and `baseline --layers` — are below
/// this (the deepest models have about 130 layers); larger ones are refused before anything is
/// allocated for them.
inline constexpr int kMaxLayers = 100'000;

/// Parses "0-11,20" into sorted unique layer indices; throws kvrank::Error on bad syntax.
std::vector<int> parse_layer_list(std::string_view text);

/// "0-3,7,9-11" for sorted unique layers: the inverse of parse_layer_list.
std::string format_layer_list(const std::vector<int>& layers);

/// The layers that have attention heads: a hybrid's `attention_layers` (increasing) when it lists
/// them, else every layer 0 … num_layers − 1 (layout.hpp's attention_layer_list, merge's
/// expected layers).
std::vector<int> layers_with_heads(const std::vector<int>& attention_layers, int num_layers);

/// `--layer-shard I/N`: the I-th (0-based) of N contiguous, near-equal slices of the selected
/// layers, so that N jobs together analyse each layer once. Slices may be empty (N > layers).
struct LayerShard {
  int index = 0;
  int count = 1;
};

/// Parses "I/N" (0 ≤ I < N); throws kvrank::Error on bad syntax.
LayerShard parse_layer_shard(std::string_view text);

/// The layers of `shard`: the first (size % N) slices hold one layer more than the others.
std::vector<int> shard_layers(const std::vector<int>& layers, LayerShard shard);

/// Whether `digits` is written as a layer index in a tensor name: a run of decimal digits without
/// a leading zero ("7", not "07" or "7a").
bool is_layer_number(std::string_view digits) noexcept;

/// `digits` as a layer index: nullopt unless is_layer_number(digits) and the value is below
/// kMaxLayers (read digit by digit, stopping past the bound: no overflow whatever the length).
std::optional<int> layer_number(std::string_view digits) noexcept;

}  // namespace kvrank

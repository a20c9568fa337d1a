// Private: reading layer indices out of tensor names, and finding a family's per-layer tensors.
//
// Tensor names are untrusted (a header may hold a 100,000-character name): everything here is a
// single linear pass over the name, no regex.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"

namespace kvrank::detail {

/// `digits` as a layer index: a run of decimal digits without a leading zero ("7", not "07").
/// nullopt when `digits` is not of that form; throws kvrank::Error naming the tensor when the
/// index is kMaxLayers or more (a name like layers.1234567.k_proj is refused, not skipped).
std::optional<int> layer_index(const TensorView& tensor, std::string_view digits);

/// The layer of a tensor named `<prefix><index><suffix>` exactly (a "{i}" template split at its
/// slot), or nullopt.
std::optional<int> template_layer(const TensorView& tensor, std::string_view prefix,
                                  std::string_view suffix);

/// A tensor name read as `<before><digits><suffix>`, `digits` the (non-empty) run of digits right
/// before `suffix`; nullopt when the name has no such form. Callers check the form of `before`,
/// then read the index with layer_index().
struct LayerName {
  std::string_view before;
  std::string_view digits;
};
std::optional<LayerName> split_layer_name(std::string_view name, std::string_view suffix);

/// Tensors named `<prefix><layer><suffix>`, the index after '.' or '_' (or at the start): the
/// prefix (e.g. "model.layers.") and the number of layers (largest index + 1). `count` is 0 when
/// no tensor matches. When several prefixes carry the suffix, the one of the first tensor in name
/// order wins and only its layers are counted.
struct LayerScan {
  std::string prefix;
  int count = 0;
};
LayerScan scan_layers(const Checkpoint& checkpoint, const std::string& suffix);

/// The number of layers to analyse when the tensors hold layers [0, found): the layer count of
/// config.json (`configured`, when present) is cross-checked, never trusted alone. A config that
/// promises more layers than the tensors hold means tensors are missing (a lost shard, a truncated
/// export): the error names `first_missing`, the first tensor of layer `found`. A config that
/// promises fewer is ignored (the tensors are what is analysed), except that up to `extra` trailing
/// layers may be left out when the config says so (DeepSeek-V3 stores its multi-token-prediction
/// module as layer num_hidden_layers).
int checked_layer_count(const Checkpoint& checkpoint, int found, std::optional<int> configured,
                        const std::string& first_missing, int extra = 0);

}  // namespace kvrank::detail

#include "layout/layer_scan.hpp"

#include <algorithm>

#include "kvrank/base/error.hpp"
#include "kvrank/base/layer_list.hpp"

namespace kvrank::detail {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The index as printed in an error: a name can carry thousands of digits.
std::string shown_digits(std::string_view digits) {
  constexpr std::size_t kShown = 12;
  if (digits.size() <= kShown) return std::string(digits);
  return std::string(digits.substr(0, kShown)) + "... (" + std::to_string(digits.size()) +
         " digits)";
}

}  // namespace

std::optional<int> layer_index(const TensorView& tensor, std::string_view digits) {
  if (!is_layer_number(digits)) return std::nullopt;
  if (const std::optional<int> layer = layer_number(digits)) return layer;
  throw Error(tensor.file, tensor.name,
              "layer index " + shown_digits(digits) + " is too large (kvrank reads at most " +
                  std::to_string(kMaxLayers) + " layers)");
}

std::optional<int> template_layer(const TensorView& tensor, std::string_view prefix,
                                  std::string_view suffix) {
  const std::string_view name = tensor.name;
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix))
    return std::nullopt;
  return layer_index(tensor,
                     name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
}

std::optional<LayerName> split_layer_name(std::string_view name, std::string_view suffix) {
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return std::nullopt;
  const std::string_view head = name.substr(0, name.size() - suffix.size());
  std::size_t start = head.size();
  while (start > 0 && is_digit(head[start - 1])) --start;
  if (start == head.size()) return std::nullopt;
  return LayerName{head.substr(0, start), head.substr(start)};
}

LayerScan scan_layers(const Checkpoint& checkpoint, const std::string& suffix) {
  LayerScan scan;
  bool found = false;
  for (const TensorView& tensor : checkpoint.tensors()) {
    const std::optional<LayerName> split = split_layer_name(tensor.name, suffix);
    if (!split) continue;
    if (!split->before.empty() && split->before.back() != '.' && split->before.back() != '_')
      continue;  // a number inside a word ("fc2.k"), not a layer index
    const std::optional<int> layer = layer_index(tensor, split->digits);
    if (!layer) continue;
    if (!found) {
      scan.prefix = std::string(split->before);
      found = true;
    }
    if (split->before == scan.prefix) scan.count = std::max(scan.count, *layer + 1);
  }
  return scan;
}

int checked_layer_count(const Checkpoint& checkpoint, int found, std::optional<int> configured,
                        const std::string& first_missing, int extra) {
  if (!configured || *configured == found) return found;
  if (*configured > found) {
    throw Error(checkpoint.path().string(), first_missing,
                "no such tensor in the checkpoint (" + checkpoint.config_path().string() +
                    " says " + std::to_string(*configured) +
                    " layers, the tensors stop after layer " + std::to_string(found - 1) + ")");
  }
  return found - *configured <= extra ? *configured : found;
}

}  // namespace kvrank::detail

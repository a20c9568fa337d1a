#include "layout/layer_scan.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace kvrank::detail {

namespace {

// Splits "<prefix><digits><suffix>" into prefix and index; false when `name` has another form.
bool split_layer_name(std::string_view name, std::string_view suffix, std::string_view* prefix,
                      int* layer) {
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return false;
  const std::string_view head = name.substr(0, name.size() - suffix.size());
  std::size_t start = head.size();
  while (start > 0 && std::isdigit(static_cast<unsigned char>(head[start - 1]))) --start;
  const std::size_t digits = head.size() - start;
  if (digits == 0 || digits > 6) return false;  // a layer index, not a number in the name
  if (start > 0 && head[start - 1] != '.' && head[start - 1] != '_') return false;
  *prefix = head.substr(0, start);
  *layer = std::stoi(std::string(head.substr(start)));
  return true;
}

}  // namespace

LayerScan scan_layers(const Checkpoint& checkpoint, const std::string& suffix) {
  LayerScan scan;
  bool found = false;
  for (const TensorView& tensor : checkpoint.tensors()) {
    std::string_view prefix;
    int layer = 0;
    if (!split_layer_name(tensor.name, suffix, &prefix, &layer)) continue;
    if (!found) {
      scan.prefix = std::string(prefix);
      found = true;
    }
    if (prefix == scan.prefix) scan.count = std::max(scan.count, layer + 1);
  }
  return scan;
}

}  // namespace kvrank::detail

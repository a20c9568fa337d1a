#include "kvrank/base/layer_list.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"

namespace kvrank {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

int parse_layer_index(std::string_view text, std::string_view part) {
  text = trim(text);
  const std::optional<std::int64_t> value = decimal_value(text);  // decimal, as every option
  if (!value)
    throw Error("", "--layers: expected a layer index or a range like 0-11, found \"" +
                        excerpt(part) + "\"");
  if (*value >= kMaxLayers)
    throw Error("", "--layers: layer index " + excerpt(text) +
                        " is too large (kvrank reads at most " + std::to_string(kMaxLayers) +
                        " layers)");
  return static_cast<int>(*value);
}

[[noreturn]] void bad_layer_shard(std::string_view text) {
  throw Error("", "--layer-shard: expected I/N with 0 <= I < N (e.g. 0/4), found \"" +
                      excerpt(text) + "\"");
}

int parse_shard_number(std::string_view text, std::string_view whole) {
  const std::optional<std::int64_t> value = decimal_value(text);
  if (!value || *value > std::numeric_limits<int>::max()) bad_layer_shard(whole);
  return static_cast<int>(*value);
}

}  // namespace

std::vector<int> parse_layer_list(std::string_view text) {
  std::set<int> layers;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view part = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (trim(part).empty())
      throw Error("",
                  "--layers: empty entry in \"" + std::string(text) + "\" (expected e.g. 0-11,20)");
    const std::size_t dash = part.find('-');
    if (dash == std::string_view::npos) {
      layers.insert(parse_layer_index(part, part));
    } else {
      const int first = parse_layer_index(part.substr(0, dash), part);
      const int last = parse_layer_index(part.substr(dash + 1), part);
      if (first > last)
        throw Error("", "--layers: range \"" + std::string(trim(part)) +
                            "\" runs backwards (expected first ≤ last)");
      for (int layer = first; layer <= last; ++layer) layers.insert(layer);
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return {layers.begin(), layers.end()};
}

std::string format_layer_list(const std::vector<int>& layers) {
  std::string text;
  for (std::size_t start = 0; start < layers.size();) {
    std::size_t end = start;
    while (end + 1 < layers.size() && layers[end + 1] == layers[end] + 1) ++end;
    if (!text.empty()) text += ',';
    text += std::to_string(layers[start]);
    if (end > start) text += '-' + std::to_string(layers[end]);
    start = end + 1;
  }
  return text;
}

LayerShard parse_layer_shard(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos) bad_layer_shard(text);
  const LayerShard shard{parse_shard_number(text.substr(0, slash), text),
                         parse_shard_number(text.substr(slash + 1), text)};
  if (shard.index >= shard.count) bad_layer_shard(text);
  return shard;
}

std::vector<int> layers_with_heads(const std::vector<int>& attention_layers, int num_layers) {
  if (!attention_layers.empty()) return attention_layers;
  std::vector<int> layers;
  for (int layer = 0; layer < num_layers; ++layer) layers.push_back(layer);
  return layers;
}

std::vector<int> shard_layers(const std::vector<int>& layers, LayerShard shard) {
  if (shard.index < 0 || shard.index >= shard.count)
    bad_layer_shard(std::to_string(shard.index) + "/" + std::to_string(shard.count));
  const std::size_t count = static_cast<std::size_t>(shard.count);
  const std::size_t index = static_cast<std::size_t>(shard.index);
  const std::size_t base = layers.size() / count;
  const std::size_t larger = layers.size() % count;  // the first `larger` shards get one more
  const std::size_t begin = index * base + std::min(index, larger);
  const std::size_t size = base + (index < larger ? 1 : 0);
  return {layers.begin() + static_cast<std::ptrdiff_t>(begin),
          layers.begin() + static_cast<std::ptrdiff_t>(begin + size)};
}

bool is_layer_number(std::string_view digits) noexcept {
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit)) return false;
  return digits.size() == 1 || digits.front() != '0';
}

std::optional<int> layer_number(std::string_view digits) noexcept {
  if (!is_layer_number(digits)) return std::nullopt;
  int value = 0;
  for (char digit : digits) {
    value = value * 10 + (digit - '0');
    if (value >= kMaxLayers) return std::nullopt;
  }
  return value;
}

}  // namespace kvrank

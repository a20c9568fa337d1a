// The JSON of `analyze --pairs K` (head_pairs_json.hpp).
#include "report/head_pairs_json.hpp"

#include <cstdint>
#include <limits>

#include "kvrank/base/error.hpp"

namespace kvrank::detail {

using nlohmann::json;

void add_head_pairs(json& out, const LayerMetrics& layer) {
  if (layer.nearest_heads.empty()) return;
  json pairs = json::array();
  for (const HeadPair& pair : layer.similar_pairs)
    pairs.push_back({{"heads", {pair.first, pair.second}}, {"similarity", pair.similarity}});
  json nearest = json::array(), similarity = json::array();
  for (const NearestHead& head : layer.nearest_heads) {
    nearest.push_back(head.head < 0 ? json() : json(head.head));
    similarity.push_back(head.head < 0 ? json() : json(head.similarity));
  }
  out["similar_pairs"] = std::move(pairs);
  out["nearest_head"] = std::move(nearest);
  out["nearest_head_similarity"] = std::move(similarity);
}

namespace {

/// A head number: an integer from 0 to int's largest.
bool is_head(const json& value) {
  if (value.is_number_unsigned())  // as parsed from text
    return value.get<std::uint64_t>() <= std::uint64_t(std::numeric_limits<int>::max());
  return value.is_number_integer() && value.get<std::int64_t>() >= 0 &&  // as built in memory
         value.get<std::int64_t>() <= std::numeric_limits<int>::max();
}

const json& array_at(const json& object, const char* key, const std::string& where,
                     const std::string& file) {
  const json& value = object.at(key);
  if (!value.is_array()) throw Error(file, where + "." + key + ": expected an array");
  return value;
}

std::vector<HeadPair> pairs_from_json(const json& items, const std::string& where,
                                      const std::string& file) {
  std::vector<HeadPair> pairs;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const json& item = items[i];
    const auto heads = item.is_object() ? item.find("heads") : item.end();
    const auto value = item.is_object() ? item.find("similarity") : item.end();
    if (heads == item.end() || value == item.end() || !heads->is_array() || heads->size() != 2 ||
        !is_head((*heads)[0]) || !is_head((*heads)[1]) || !value->is_number())
      throw Error(file, where + ".similar_pairs[" + std::to_string(i) +
                            "]: expected {\"heads\": [i, j], \"similarity\": number}");
    pairs.push_back({(*heads)[0].get<int>(), (*heads)[1].get<int>(), value->get<double>()});
  }
  return pairs;
}

}  // namespace

void read_head_pairs(const json& object, const std::string& where, const std::string& file,
                     LayerMetrics& layer) {
  if (!object.contains("nearest_head")) return;
  const json& nearest = array_at(object, "nearest_head", where, file);
  const json& similarity = object.contains("nearest_head_similarity")
                               ? array_at(object, "nearest_head_similarity", where, file)
                               : json::array();
  if (similarity.size() != nearest.size())
    throw Error(file, where + ": nearest_head and nearest_head_similarity differ in length");
  for (std::size_t h = 0; h < nearest.size(); ++h) {
    const bool none = nearest[h].is_null() && similarity[h].is_null();
    if (!none && (!is_head(nearest[h]) || !similarity[h].is_number()))
      throw Error(file, where + ".nearest_head[" + std::to_string(h) +
                            "]: expected a head and its similarity, or null and null");
    layer.nearest_heads.push_back(
        none ? NearestHead{-1, std::numeric_limits<double>::quiet_NaN()}
             : NearestHead{nearest[h].get<int>(), similarity[h].get<double>()});
  }
  if (object.contains("similar_pairs"))
    layer.similar_pairs =
        pairs_from_json(array_at(object, "similar_pairs", where, file), where, file);
}

}  // namespace kvrank::detail

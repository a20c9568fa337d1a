// Dense layouts (families.cpp): the `--map` file, which names the tensors of a layout kvrank does
// not know and may give its head geometry.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include "io/json_strict.hpp"
#include "kvrank/error.hpp"
#include "layout/dense.hpp"

namespace kvrank::dense {
namespace {

// ---- the `--map` file ---------------------------------------------------------------------------

constexpr std::array<const char*, 11> kMapKeys{
    "q", "k", "v", "o", "qkv", "qkv_order", "heads", "kv_heads", "head_dim", "d_model", "layout"};

std::optional<int> map_int(const nlohmann::json& map, const std::string& file, const char* key) {
  auto it = map.find(key);
  if (it == map.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1 ||
      it->get<std::int64_t>() > std::numeric_limits<int>::max())
    throw Error(file, std::string("\"") + key + "\": expected a positive integer, found " +
                          detail::json_excerpt(*it));
  return static_cast<int>(it->get<std::int64_t>());
}

std::optional<std::string> map_string(const nlohmann::json& map, const std::string& file,
                                      const char* key) {
  auto it = map.find(key);
  if (it == map.end() || it->is_null()) return std::nullopt;
  if (!it->is_string())
    throw Error(file, std::string("\"") + key + "\": expected a string, found " +
                          detail::json_excerpt(*it));
  return it->get<std::string>();
}

}  // namespace

void check_map_keys(const nlohmann::json& map, const std::string& file) {
  for (const auto& item : map.items()) {
    const bool known = std::any_of(kMapKeys.begin(), kMapKeys.end(),
                                   [&](const char* key) { return item.key() == key; });
    if (!known)
      throw Error(file, "unknown key \"" + item.key() +
                            "\" (expected q, k, v, o, qkv, qkv_order, heads, kv_heads, head_dim, "
                            "d_model, layout)");
  }
}

DenseSpec read_map_spec(const nlohmann::json& map, const std::string& file) {
  DenseSpec spec{"map", {}, "", false};
  for (const char* role : {"q", "k", "v", "o", "qkv"}) {
    auto name_template = map_string(map, file, role);
    if (!name_template) continue;
    if (name_template->find(kLayerSlot) == std::string::npos)
      throw Error(file, std::string("\"") + role +
                            "\": expected a tensor name with \"{i}\" for "
                            "the layer index, found \"" +
                            *name_template + "\"");
    spec.names[role] = *name_template;
  }
  const bool fused = spec.names.count("qkv") > 0;
  if (fused && (spec.names.count("q") || spec.names.count("k") || spec.names.count("v")))
    throw Error(file, "give either \"qkv\" or \"q\"/\"k\"/\"v\", not both");
  if (!fused && (!spec.names.count("k") || !spec.names.count("v")))
    throw Error(file, "expected \"k\" and \"v\" (or a fused \"qkv\") tensor names");
  spec.qkv_order = map_string(map, file, "qkv_order").value_or("stacked");
  if (spec.qkv_order != "stacked" && spec.qkv_order != "grouped")
    throw Error(file, "\"qkv_order\": expected \"stacked\" or \"grouped\", found \"" +
                          spec.qkv_order + "\"");
  const std::string layout = map_string(map, file, "layout").value_or("out_in");
  if (layout != "out_in" && layout != "in_out")
    throw Error(file, "\"layout\": expected \"out_in\" or \"in_out\", found \"" + layout + "\"");
  spec.in_out = layout == "in_out";
  return spec;
}

Geometry map_geometry(const nlohmann::json& map, const std::string& file, Geometry geometry) {
  bool any = false;
  auto take = [&](const char* key, std::optional<int>& field) {
    if (auto value = map_int(map, file, key)) {
      field = value;
      any = true;
    }
  };
  take("heads", geometry.heads);
  take("kv_heads", geometry.kv_heads);
  take("head_dim", geometry.head_dim);
  take("d_model", geometry.d_model);
  if (map.contains("d_model")) geometry.d_model_given = true;
  if (any) geometry.add_source(file);
  return geometry;
}

}  // namespace kvrank::dense

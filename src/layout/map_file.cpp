// Dense layouts (layout.cpp): the `--map` file, which names the tensors of a layout kvrank does
// not know and may give its head geometry.
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/base/text.hpp"
#include "layout/dense.hpp"

namespace kvrank::detail {
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

constexpr std::array<Named<QkvOrder>, 2> kQkvOrders{
    {{QkvOrder::stacked, "stacked"}, {QkvOrder::grouped, "grouped"}}};
static_assert(in_enum_order(kQkvOrders));
constexpr std::array<Named<Orientation>, 3> kOrientations{
    {{Orientation::out_in, "out_in"},
     {Orientation::in_out, "in_out"},
     {Orientation::heads_in_out, "heads_in_out"}}};
static_assert(in_enum_order(kOrientations));

/// The value of a string field naming one of `choices`; the first when the field is absent.
template <typename Enum, std::size_t N>
Enum map_choice(const nlohmann::json& map, const std::string& file, const char* key,
                const std::array<Named<Enum>, N>& choices) {
  const std::optional<std::string> name = map_string(map, file, key);
  if (!name) return choices[0].value;
  if (const std::optional<Enum> value = value_named(choices, *name)) return *value;
  std::string expected;
  for (std::size_t i = 0; i < N; ++i)
    expected += (i == 0       ? "\""
                 : i + 1 == N ? " or \""
                              : ", \"") +
                std::string(choices[i].name) + "\"";
  throw Error(file, std::string("\"") + key + "\": expected " + expected + ", found \"" +
                        excerpt(*name) + "\"");
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
  DenseSpec spec{Family::map, {}};
  auto& names = spec.tensors.names;
  for (ProjectionRole role : {ProjectionRole::q, ProjectionRole::k, ProjectionRole::v,
                              ProjectionRole::o, ProjectionRole::fused_qkv}) {
    const std::string key(role_name(role));
    auto name_template = map_string(map, file, key.c_str());
    if (!name_template) continue;
    if (name_template->find(kLayerSlot) == std::string::npos)
      throw Error(file, "\"" + key +
                            "\": expected a tensor name with \"{i}\" for "
                            "the layer index, found \"" +
                            *name_template + "\"");
    names[role] = *name_template;
  }
  const bool fused = spec.tensors.fused();
  if (fused && (names.count(ProjectionRole::q) || names.count(ProjectionRole::k) ||
                names.count(ProjectionRole::v)))
    throw Error(file, "give either \"qkv\" or \"q\"/\"k\"/\"v\", not both");
  if (!fused && (!names.count(ProjectionRole::k) || !names.count(ProjectionRole::v)))
    throw Error(file, "expected \"k\" and \"v\" (or a fused \"qkv\") tensor names");
  spec.tensors.qkv_order = map_choice(map, file, "qkv_order", kQkvOrders);
  spec.tensors.orientation = map_choice(map, file, "layout", kOrientations);
  if (fused && spec.tensors.orientation == Orientation::heads_in_out)
    throw Error(file,
                "\"layout\": \"heads_in_out\" (per-head [heads, in, out] tensors) needs "
                "separate \"q\", \"k\" and \"v\", not a fused \"qkv\"");
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

}  // namespace kvrank::detail

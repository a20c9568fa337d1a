// Family detection and per-head factors for the dense layouts — llama-like, gpt2, gpt_neox, falcon,
// phi3 and `--map` — plus the shared helpers of family_detail.hpp and the dispatch to the MLA, LRKV
// and activation readers.
//
// Every dense layout is described by data (DenseSpec): tensor-name templates with a "{i}" layer
// slot, either one per projection (q, k, v, o) or a fused q/k/v tensor with its row order, and the
// storage orientation. Two fused row orders cover all the families:
//   stacked: all q heads, then all k heads, then all v heads     (gpt2, phi3)
//   grouped: per KV head g: its H/H_kv q heads, then k_g, then v_g (gpt_neox = [H,3,d_h]; falcon's
//            three layouts, which are this order with H_kv = num_kv_heads, 1 or H).
// layer_factors() turns a layer into canonical projections — q [H·d_h, d], k and v [H_kv·d_h, d],
// o [d, H·d_h] — and those into HeadFactors.
#include "kvrank/families.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <regex>
#include <utility>

#include "kvrank/error.hpp"
#include "layout/family_detail.hpp"

namespace kvrank {
namespace detail {

/// Throws kvrank::Error naming the tensor unless it is a [rows, cols] matrix.
void check_matrix_shape(const TensorView& tensor, Index rows, Index cols, const std::string& why);

namespace {

const nlohmann::json* config_field(const Checkpoint& checkpoint, const char* key) {
  const auto& config = checkpoint.config();
  if (!config) return nullptr;
  auto it = config->find(key);
  if (it == config->end() || it->is_null()) return nullptr;
  return &*it;
}

Error config_type_error(const Checkpoint& checkpoint, const char* key, const char* expected,
                        const nlohmann::json& found) {
  return Error(checkpoint.config_path().string(), std::string("field \"") + key + "\": expected " +
                                                      expected + ", found " + found.dump());
}

std::string shape_text(Index rows, Index cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

}  // namespace

void check_matrix_shape(const TensorView& tensor, Index rows, Index cols, const std::string& why) {
  if (tensor.shape.size() == 2 && tensor.shape[0] == rows && tensor.shape[1] == cols) return;
  throw Error(tensor.file, tensor.name,
              "expected shape " + shape_text(rows, cols) + " (" + why + "), found " +
                  tensor.shape_string());
}

std::optional<int> config_int(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  const char* expected = "a non-negative integer";
  if (field->is_number_unsigned()) {
    auto value = field->get<std::uint64_t>();
    if (value > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
      throw config_type_error(checkpoint, key, expected, *field);
    return static_cast<int>(value);
  }
  if (field->is_number_integer()) {
    auto value = field->get<std::int64_t>();
    if (value < 0 || value > std::numeric_limits<int>::max())
      throw config_type_error(checkpoint, key, expected, *field);
    return static_cast<int>(value);
  }
  throw config_type_error(checkpoint, key, expected, *field);
}

std::optional<std::string> config_string(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  if (!field->is_string()) throw config_type_error(checkpoint, key, "a string", *field);
  return field->get<std::string>();
}

std::optional<bool> config_bool(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  if (!field->is_boolean()) throw config_type_error(checkpoint, key, "true or false", *field);
  return field->get<bool>();
}

RowMatrixF load_matrix(const Checkpoint& checkpoint, const std::string& name, Index rows,
                       Index cols, const std::string& why) {
  const TensorView& tensor = checkpoint.at(name);
  check_matrix_shape(tensor, rows, cols, why);
  return to_matrix(tensor);
}

FactorSide row_block_side(RowMatrixF rows, int heads, Index head_cols, int heads_per_block) {
  FactorSide side;
  side.basis = std::move(rows);
  side.head_cols = head_cols;
  side.heads.reserve(static_cast<std::size_t>(heads));
  for (int h = 0; h < heads; ++h) {
    const Index block = h / heads_per_block;
    side.heads.push_back({CoeffBlock::identity(block * head_cols, head_cols)});
  }
  return side;
}

FactorSide column_block_side(const RowMatrixF& matrix, int heads, Index head_cols) {
  return row_block_side(matrix.transpose(), heads, head_cols, 1);
}

std::string attention_variant(int heads, int kv_heads) {
  if (kv_heads == heads) return "mha";
  if (kv_heads == 1) return "mqa";
  return "gqa";
}

}  // namespace detail

namespace {

using detail::config_bool;
using detail::config_int;
using detail::config_string;

// ---- tensor-name templates ("model.layers.{i}.self_attn.q_proj.weight") -----------------------

constexpr std::string_view kLayerSlot = "{i}";

std::string replace_last(std::string text, std::string_view from, std::string_view to) {
  const auto at = text.rfind(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string layer_name(const std::string& name_template, int layer) {
  std::string name = name_template;
  const auto at = name.find(kLayerSlot);
  if (at != std::string::npos) name.replace(at, kLayerSlot.size(), std::to_string(layer));
  return name;
}

/// The layer indices present for a template: [first, last], or nullopt when no tensor matches.
std::optional<std::pair<int, int>> template_layers(const Checkpoint& checkpoint,
                                                   const std::string& name_template) {
  const auto slot = name_template.find(kLayerSlot);
  const std::string prefix = name_template.substr(0, slot);
  const std::string suffix = name_template.substr(slot + kLayerSlot.size());
  std::optional<std::pair<int, int>> range;
  for (const TensorView& tensor : checkpoint.tensors()) {
    const std::string& name = tensor.name;
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
        !name.ends_with(suffix))
      continue;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 6 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const int layer = std::stoi(digits);
    if (!range) range = {layer, layer};
    range->first = std::min(range->first, layer);
    range->second = std::max(range->second, layer);
  }
  return range;
}

/// The template of the first tensor whose whole name matches `pattern` (group 1 = layer index).
std::optional<std::string> find_template(const Checkpoint& checkpoint, const std::regex& pattern) {
  std::smatch match;
  for (const TensorView& tensor : checkpoint.tensors()) {
    if (!std::regex_match(tensor.name, match, pattern)) continue;
    std::string name_template = tensor.name;
    name_template.replace(static_cast<std::size_t>(match.position(1)),
                          static_cast<std::size_t>(match.length(1)), kLayerSlot);
    return name_template;
  }
  return std::nullopt;
}

// ---- dense layouts as data ----------------------------------------------------------------------

struct DenseSpec {
  std::string family;
  std::map<std::string, std::string> names;  // "q","k","v","o" or "qkv","o" → template
  std::string qkv_order;                     // "stacked" | "grouped" when fused
  bool in_out = false;                       // stored [in, out] (gpt2 Conv1D, map "in_out")
  bool fused() const { return names.count("qkv") > 0; }
};

struct FusedFamily {
  const char* family;
  const char* pattern;  // the fused tensor; group 1 = layer index
  const char* fused_part;
  const char* output_part;
  const char* order;
  bool in_out;
};

constexpr std::array<FusedFamily, 4> kFusedFamilies{{
    {"phi3", R"((?:.*\.)?layers\.(\d+)\.self_attn\.qkv_proj\.weight)", "qkv_proj", "o_proj",
     "stacked", false},
    {"gpt2", R"((?:transformer\.)?h\.(\d+)\.attn\.c_attn\.weight)", "c_attn", "c_proj", "stacked",
     true},
    {"gpt_neox", R"((?:gpt_neox\.)?layers\.(\d+)\.attention\.query_key_value\.weight)",
     "query_key_value", "dense", "grouped", false},
    {"falcon", R"((?:transformer\.)?h\.(\d+)\.self_attention\.query_key_value\.weight)",
     "query_key_value", "dense", "grouped", false},
}};

constexpr std::array<const char*, 7> kDenseFamilies{"llama",  "phi3", "gpt2", "gpt_neox",
                                                    "falcon", "map",  "npy"};

bool template_present(const Checkpoint& checkpoint, const std::string& name_template) {
  return template_layers(checkpoint, name_template).has_value();
}

/// Llama-like: separate q/k/v/o projections, found by their key projection (K/V-only inputs such
/// as NPY folders of `layers.{i}.k_proj` have no queries).
std::optional<DenseSpec> find_llama(const Checkpoint& checkpoint) {
  static const std::regex pattern(R"((?:.*\.)?layers\.(\d+)\.(?:self_attn\.)?k_proj(?:\.weight)?)");
  const auto key_template = find_template(checkpoint, pattern);
  if (!key_template) return std::nullopt;
  DenseSpec spec{"llama", {}, "", false};
  for (const char* role : {"q", "k", "v", "o"}) {
    std::string name_template = replace_last(*key_template, "k_proj", std::string(role) + "_proj");
    const bool required = role[0] == 'k' || role[0] == 'v';
    if (required || template_present(checkpoint, name_template)) spec.names[role] = name_template;
  }
  const std::string& file =
      checkpoint.at(layer_name(*key_template, template_layers(checkpoint, *key_template)->first))
          .file;
  if (file.ends_with(".npy") || file.ends_with(".npz")) spec.family = "npy";
  return spec;
}

std::optional<DenseSpec> find_fused(const Checkpoint& checkpoint, const FusedFamily& family) {
  const auto fused_template = find_template(checkpoint, std::regex(family.pattern));
  if (!fused_template) return std::nullopt;
  DenseSpec spec{family.family, {{"qkv", *fused_template}}, family.order, family.in_out};
  std::string output = replace_last(*fused_template, family.fused_part, family.output_part);
  if (template_present(checkpoint, output)) spec.names["o"] = output;
  return spec;
}

/// The dense layout of a checkpoint by its tensor names; `only` restricts to one family.
std::optional<DenseSpec> find_dense(const Checkpoint& checkpoint,
                                    const std::optional<std::string>& only) {
  for (const FusedFamily& family : kFusedFamilies) {
    if (only && *only != family.family) continue;
    if (auto spec = find_fused(checkpoint, family)) return spec;
  }
  if (!only || *only == "llama" || *only == "npy") return find_llama(checkpoint);
  return std::nullopt;
}

// ---- head geometry ------------------------------------------------------------------------------

struct Geometry {
  std::optional<int> heads, kv_heads, head_dim, d_model, num_layers;
  bool d_model_given = false;        // from config, map or flag rather than a tensor shape
  std::vector<std::string> sources;  // where the numbers came from, for error messages

  void add_source(const std::string& source) {
    if (std::find(sources.begin(), sources.end(), source) == sources.end())
      sources.push_back(source);
  }
  std::string source_text() const {
    std::string text;
    for (const auto& source : sources) text += (text.empty() ? "" : " and ") + source;
    return text.empty() ? "tensor shapes" : text;
  }
};

std::optional<int> first_config_int(const Checkpoint& checkpoint,
                                    std::initializer_list<const char*> keys) {
  for (const char* key : keys)
    if (auto value = config_int(checkpoint, key)) return value;
  return std::nullopt;
}

/// Falcon's key/value head count from its three config flags (HF FalconConfig defaults).
std::optional<int> falcon_kv_heads(const Checkpoint& checkpoint, std::optional<int> heads) {
  if (config_bool(checkpoint, "new_decoder_architecture").value_or(false)) {
    auto kv = first_config_int(checkpoint, {"num_kv_heads", "n_head_kv"});
    return kv ? kv : heads;
  }
  if (config_bool(checkpoint, "multi_query").value_or(true)) return 1;
  return heads;
}

Geometry config_geometry(const Checkpoint& checkpoint, const std::string& family) {
  Geometry geometry;
  if (!checkpoint.config()) return geometry;
  geometry.heads = first_config_int(checkpoint, {"num_attention_heads", "n_head", "num_heads"});
  geometry.d_model = first_config_int(checkpoint, {"hidden_size", "n_embd", "d_model"});
  geometry.head_dim = config_int(checkpoint, "head_dim");
  geometry.num_layers =
      first_config_int(checkpoint, {"num_hidden_layers", "n_layer", "num_layers"});
  if (family == "falcon") {
    geometry.kv_heads = falcon_kv_heads(checkpoint, geometry.heads);
  } else if (family == "gpt2" || family == "gpt_neox") {
    geometry.kv_heads = geometry.heads;
  } else {
    geometry.kv_heads =
        first_config_int(checkpoint, {"num_key_value_heads", "num_kv_heads", "n_head_kv"});
    if (!geometry.kv_heads && config_bool(checkpoint, "multi_query").value_or(false))
      geometry.kv_heads = 1;
    if (!geometry.kv_heads) geometry.kv_heads = geometry.heads;
  }
  geometry.d_model_given = geometry.d_model.has_value();
  if (geometry.heads || geometry.d_model || geometry.head_dim)
    geometry.add_source(checkpoint.config_path().string());
  return geometry;
}

void apply_overrides(const LayoutOverrides& overrides, Geometry& geometry) {
  if (overrides.heads) {
    geometry.heads = overrides.heads;
    geometry.add_source("--heads");
  }
  if (overrides.kv_heads) {
    geometry.kv_heads = overrides.kv_heads;
    geometry.add_source("--kv-heads");
  }
  if (overrides.head_dim) {
    geometry.head_dim = overrides.head_dim;
    geometry.add_source("--head-dim");
  }
}

// ---- the `--map` file ---------------------------------------------------------------------------

constexpr std::array<const char*, 11> kMapKeys{
    "q", "k", "v", "o", "qkv", "qkv_order", "heads", "kv_heads", "head_dim", "d_model", "layout"};

std::optional<int> map_int(const nlohmann::json& map, const std::string& file, const char* key) {
  auto it = map.find(key);
  if (it == map.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1 ||
      it->get<std::int64_t>() > std::numeric_limits<int>::max())
    throw Error(file,
                std::string("\"") + key + "\": expected a positive integer, found " + it->dump());
  return static_cast<int>(it->get<std::int64_t>());
}

std::optional<std::string> map_string(const nlohmann::json& map, const std::string& file,
                                      const char* key) {
  auto it = map.find(key);
  if (it == map.end() || it->is_null()) return std::nullopt;
  if (!it->is_string())
    throw Error(file, std::string("\"") + key + "\": expected a string, found " + it->dump());
  return it->get<std::string>();
}

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

// ---- resolving the geometry against layer shapes ------------------------------------------------

/// A 2-D tensor's [out, in] sizes, whatever its storage orientation.
std::pair<Index, Index> out_in_shape(const TensorView& tensor, bool in_out) {
  if (tensor.shape.size() != 2)
    throw Error(tensor.file, tensor.name,
                "expected a 2-D projection matrix, found shape " + tensor.shape_string());
  const Index first = static_cast<Index>(tensor.shape[0]);
  const Index second = static_cast<Index>(tensor.shape[1]);
  return in_out ? std::pair{second, first} : std::pair{first, second};
}

/// total / part as an int; 0 (later reported as an invalid geometry) when it cannot be one.
int ratio(Index total, int part) {
  if (part <= 0 || total / part > std::numeric_limits<int>::max()) return 0;
  return static_cast<int>(total / part);
}

/// Fills what config, map and flags left open from the first layer's tensor shapes.
void infer_geometry(const Checkpoint& checkpoint, const DenseSpec& spec, int first_layer,
                    Geometry& g) {
  const std::string main_role = spec.fused() ? "qkv" : "k";
  const TensorView& main = checkpoint.at(layer_name(spec.names.at(main_role), first_layer));
  const auto [main_out, main_in] = out_in_shape(main, spec.in_out);
  const bool has_q = spec.names.count("q") > 0;
  const Index q_out =
      has_q ? out_in_shape(checkpoint.at(layer_name(spec.names.at("q"), first_layer)), spec.in_out)
                  .first
            : 0;
  if (!g.d_model) {
    g.d_model = ratio(main_in, 1);
    g.add_source("tensor shapes");
  }
  const bool need_flag = !g.heads && !g.head_dim && !(g.kv_heads && !spec.fused());
  if (need_flag)
    throw Error(checkpoint.path().string(),
                "cannot tell the number of attention heads: neither config.json nor a flag gives "
                "it; pass --heads "
                "(and --kv-heads, --head-dim when they differ from the defaults)");
  if (!g.head_dim) {
    if (g.heads && (spec.fused() || g.d_model_given || !has_q)) {
      g.head_dim = ratio(*g.d_model, *g.heads);
    } else if (g.heads) {
      g.head_dim = ratio(q_out, *g.heads);
    } else {
      g.head_dim = ratio(main_out, *g.kv_heads);
    }
  }
  if (spec.fused()) {
    if (!g.heads) g.heads = ratio(*g.d_model, *g.head_dim);
    if (!g.kv_heads) g.kv_heads = (ratio(main_out, *g.head_dim) - *g.heads) / 2;
  } else {
    if (!g.kv_heads) g.kv_heads = ratio(main_out, *g.head_dim);
    if (!g.heads) g.heads = has_q ? ratio(q_out, *g.head_dim) : *g.kv_heads;
  }
}

void check_geometry(const Checkpoint& checkpoint, const Geometry& g) {
  const std::string file =
      checkpoint.config() ? checkpoint.config_path().string() : checkpoint.path().string();
  const std::string numbers = "heads " + std::to_string(g.heads.value_or(0)) + ", kv_heads " +
                              std::to_string(g.kv_heads.value_or(0)) + ", head_dim " +
                              std::to_string(g.head_dim.value_or(0)) + ", hidden size " +
                              std::to_string(g.d_model.value_or(0));
  if (g.heads.value_or(0) < 1 || g.kv_heads.value_or(0) < 1 || g.head_dim.value_or(0) < 1 ||
      g.d_model.value_or(0) < 1)
    throw Error(file, "invalid head geometry: " + numbers + " (from " + g.source_text() + ")");
  if (*g.heads % *g.kv_heads != 0)
    throw Error(file, "heads " + std::to_string(*g.heads) + " is not a multiple of kv_heads " +
                          std::to_string(*g.kv_heads) + " (from " + g.source_text() + ")");
}

// ---- the canonical projections of one layer
// ------------------------------------------------------

struct Dims {
  int heads, kv_heads;
  Index head_dim, d_model;
  std::string source;
  bool in_out;
  std::string qkv_order;
};

Dims dims_of(const ModelLayout& layout) {
  auto field = [&](const char* key) {
    auto it = layout.details.find(key);
    return it == layout.details.end() ? std::string() : it->second;
  };
  return {layout.heads,      layout.kv_heads, layout.head_dim,
          layout.d_model,    field("source"), field("orientation") == "in_out",
          field("qkv_order")};
}

/// Rows a role has in canonical [out, in] form ('o' is [d, H·d_h]: its rows are d).
Index role_rows(const Dims& dims, char role) {
  switch (role) {
    case 'q':
      return dims.heads * dims.head_dim;
    case 'k':
    case 'v':
      return dims.kv_heads * dims.head_dim;
    case 'o':
      return dims.d_model;
    default:
      return (Index{dims.heads} + 2 * Index{dims.kv_heads}) * dims.head_dim;  // fused qkv
  }
}

Index role_cols(const Dims& dims, char role) {
  return role == 'o' ? dims.heads * dims.head_dim : dims.d_model;
}

/// Why a role has the shape it has, for shape errors ("8 heads × head_dim 8 = 64 rows, ...").
std::string shape_reason(const Dims& dims, char role) {
  const std::string head_dim = " × head_dim " + std::to_string(dims.head_dim) + " = ";
  std::string count;
  if (role == 'q' || role == 'o') {
    count = std::to_string(dims.heads) + " heads" + head_dim;
  } else if (role == 'k' || role == 'v') {
    count = std::to_string(dims.kv_heads) + " kv heads" + head_dim;
  } else {
    count = "(" + std::to_string(dims.heads) + " heads + 2 × " + std::to_string(dims.kv_heads) +
            " kv heads)" + head_dim;
  }
  // The head dimension is the output side of q/k/v and the input side of o.
  const bool heads_on_rows = (role != 'o') != dims.in_out;
  return count + std::to_string(role == 'o' ? role_cols(dims, role) : role_rows(dims, role)) +
         (heads_on_rows ? " rows" : " columns") + ", hidden size " + std::to_string(dims.d_model) +
         "; from " + dims.source;
}

/// The role's tensor in canonical [out, in] form, its shape checked.
RowMatrixF load_role(const Checkpoint& checkpoint, const Dims& dims, const std::string& name,
                     char role) {
  const Index rows = role_rows(dims, role);
  const Index cols = role_cols(dims, role);
  const std::string why = shape_reason(dims, role);
  if (!dims.in_out) return detail::load_matrix(checkpoint, name, rows, cols, why);
  return detail::load_matrix(checkpoint, name, cols, rows, why).transpose();
}

/// Checks a role's tensor shape from its metadata only (detection time: nothing is read).
void check_role_shape(const Checkpoint& checkpoint, const Dims& dims, const std::string& name,
                      char role) {
  Index rows = role_rows(dims, role);
  Index cols = role_cols(dims, role);
  if (dims.in_out) std::swap(rows, cols);
  detail::check_matrix_shape(checkpoint.at(name), rows, cols, shape_reason(dims, role));
}

/// First row of head `head` of `role` ('q': a query head; 'k'/'v': a KV head) in a fused tensor.
Index fused_row(const Dims& dims, char role, int head) {
  const int group = dims.heads / dims.kv_heads;
  Index block = 0;
  if (dims.qkv_order == "grouped") {
    const int stride = group + 2;
    if (role == 'q') block = (head / group) * stride + head % group;
    if (role == 'k') block = head * stride + group;
    if (role == 'v') block = head * stride + group + 1;
  } else {
    if (role == 'q') block = head;
    if (role == 'k') block = dims.heads + head;
    if (role == 'v') block = dims.heads + dims.kv_heads + head;
  }
  return block * dims.head_dim;
}

class LayerProjections {
 public:
  LayerProjections(const Checkpoint& checkpoint, const ModelLayout& layout, int layer)
      : checkpoint_(checkpoint), layout_(layout), dims_(dims_of(layout)), layer_(layer) {}

  /// q [H·d_h, d], k / v [H_kv·d_h, d], o [d, H·d_h].
  RowMatrixF get(char role) {
    const bool fused = layout_.details.count("qkv") > 0;
    if (role == 'o' || !fused)
      return load_role(checkpoint_, dims_, name(std::string(1, role)), role);
    if (!fused_) fused_ = load_role(checkpoint_, dims_, name("qkv"), 'f');
    const int count = role == 'q' ? dims_.heads : dims_.kv_heads;
    RowMatrixF rows(count * dims_.head_dim, dims_.d_model);
    for (int h = 0; h < count; ++h)
      rows.middleRows(h * dims_.head_dim, dims_.head_dim) =
          fused_->middleRows(fused_row(dims_, role, h), dims_.head_dim);
    return rows;
  }

 private:
  std::string name(const std::string& role) const {
    auto it = layout_.details.find(role);
    if (it == layout_.details.end())
      throw Error(checkpoint_.path().string(),
                  "this checkpoint has no " + role + " projection tensors");
    return layer_name(it->second, layer_);
  }

  const Checkpoint& checkpoint_;
  const ModelLayout& layout_;
  Dims dims_;
  int layer_;
  std::optional<RowMatrixF> fused_;
};

HeadFactors dense_factors(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                          Repr repr) {
  LayerProjections projections(checkpoint, layout, layer);
  const int heads = layout.heads;
  const int group = layout.heads / layout.kv_heads;
  const Index head_dim = layout.head_dim;
  HeadFactors factors;
  switch (repr) {
    case Repr::qk:
      factors.left = detail::row_block_side(projections.get('q'), heads, head_dim, 1);
      factors.right = detail::row_block_side(projections.get('k'), heads, head_dim, group);
      break;
    case Repr::ov:
      factors.left = detail::column_block_side(projections.get('o'), heads, head_dim);
      factors.right = detail::row_block_side(projections.get('v'), heads, head_dim, group);
      break;
    case Repr::k:
    case Repr::v:
      factors.left = detail::row_block_side(projections.get(repr == Repr::k ? 'k' : 'v'), heads,
                                            head_dim, group);
      factors.symmetric = true;
      break;
  }
  return factors;
}

// ---- detection ---------------------------------------------------------------------------------

std::optional<int> first_layer_of(const Checkpoint& checkpoint, const DenseSpec& spec,
                                  int& num_layers) {
  std::optional<int> first;
  for (const auto& [role, name_template] : spec.names) {
    auto range = template_layers(checkpoint, name_template);
    if (!range) continue;
    first = std::min(first.value_or(range->first), range->first);
    num_layers = std::max(num_layers, range->second + 1);
  }
  return first;
}

/// Layers come from the tensor names; a config.json that promises more means tensors are missing
/// (a lost shard, a truncated export): name the first one rather than analyse part of the model.
void check_layer_count(const Checkpoint& checkpoint, const DenseSpec& spec, int found,
                       std::optional<int> configured) {
  if (!configured || *configured <= found) return;
  const std::string missing = layer_name(spec.names.begin()->second, found);
  throw Error(checkpoint.path().string(), missing,
              "no such tensor in the checkpoint (" + checkpoint.config_path().string() + " says " +
                  std::to_string(*configured) + " layers, the tensors stop after layer " +
                  std::to_string(found - 1) + ")");
}

ModelLayout dense_layout(const Checkpoint& checkpoint, const DenseSpec& spec, Geometry geometry,
                         const std::string& spec_file) {
  int num_layers = 0;
  const auto first_layer = first_layer_of(checkpoint, spec, num_layers);
  if (!first_layer)
    throw Error(spec_file, "no tensor matches any of the names given (e.g. \"" +
                               spec.names.begin()->second + "\")");
  infer_geometry(checkpoint, spec, *first_layer, geometry);
  check_geometry(checkpoint, geometry);

  ModelLayout layout;
  layout.family = spec.family;
  layout.heads = *geometry.heads;
  layout.kv_heads = *geometry.kv_heads;
  layout.head_dim = *geometry.head_dim;
  layout.d_model = *geometry.d_model;
  layout.num_layers = num_layers;
  check_layer_count(checkpoint, spec, num_layers, geometry.num_layers);
  layout.variant = detail::attention_variant(layout.heads, layout.kv_heads);
  layout.has_queries = spec.names.count("q") || spec.fused();
  layout.has_outputs = spec.names.count("o") > 0;
  layout.details = spec.names;
  layout.details["orientation"] = spec.in_out ? "in_out" : "out_in";
  if (spec.fused()) layout.details["qkv_order"] = spec.qkv_order;
  layout.details["source"] = geometry.source_text();
  if (auto model_type = config_string(checkpoint, "model_type"))
    layout.details["model_type"] = *model_type;

  const Dims dims = dims_of(layout);
  for (const auto& [role, name_template] : spec.names) {
    const char role_char = role == "qkv" ? 'f' : role[0];
    check_role_shape(checkpoint, dims, layer_name(name_template, *first_layer), role_char);
  }
  return layout;
}

ModelLayout map_layout(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  const std::string file = overrides.map_file->string();
  const nlohmann::json map = read_json_object(*overrides.map_file);
  check_map_keys(map, file);
  const DenseSpec spec = read_map_spec(map, file);
  Geometry geometry = map_geometry(map, file, config_geometry(checkpoint, "map"));
  apply_overrides(overrides, geometry);
  return dense_layout(checkpoint, spec, geometry, file);
}

// Model types whose checkpoints use the llama tensor names; `--family` accepts them too.
constexpr std::array<const char*, 9> kLlamaAliases{
    "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "olmo2", "starcoder2", "granite"};

bool is_llama_alias(const std::string& family) {
  return std::any_of(kLlamaAliases.begin(), kLlamaAliases.end(),
                     [&](const char* name) { return family == name; });
}

bool is_mla_family(const std::string& family) {
  return family == "deepseek_v2" || family == "deepseek_v3" || family == "mla";
}

void check_family_name(const std::string& family) {
  const bool dense = std::any_of(kDenseFamilies.begin(), kDenseFamilies.end(),
                                 [&](const char* name) { return family == name; });
  if (!dense && !is_llama_alias(family) && !is_mla_family(family) && family != "lrkv")
    throw Error("", "unknown --family \"" + family +
                        "\" (expected llama or a llama-like model type such as mistral, "
                        "gpt2, gpt_neox, falcon, phi3, deepseek_v2, deepseek_v3, lrkv, map)");
}

ModelLayout dense_detect(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  std::optional<std::string> only = overrides.family;
  if (only && is_llama_alias(*only)) only = "llama";
  const auto spec = find_dense(checkpoint, only);
  if (!spec) {
    const std::string wanted =
        overrides.family ? "tensors of family " + *overrides.family
                         : "attention tensors of a known family (llama-like, gpt2, gpt_neox, "
                           "falcon, phi3, deepseek MLA, lrkv)";
    throw Error(checkpoint.path().string(), "found no " + wanted + "; name them with --map");
  }
  Geometry geometry = config_geometry(checkpoint, spec->family);
  apply_overrides(overrides, geometry);
  return dense_layout(checkpoint, *spec, geometry, checkpoint.path().string());
}

void check_repr_supported(const Checkpoint& checkpoint, const ModelLayout& layout, Repr repr) {
  const std::string file = checkpoint.path().string();
  if (repr == Repr::qk && !layout.has_queries)
    throw Error(file,
                "--repr qk needs query projections, but this checkpoint holds only "
                "key/value projections (use --repr k,v)");
  if (repr == Repr::ov && !layout.has_outputs)
    throw Error(file, "--repr ov needs output projections, but this checkpoint has none");
}

}  // namespace

std::string_view repr_name(Repr repr) noexcept {
  switch (repr) {
    case Repr::qk:
      return "qk";
    case Repr::ov:
      return "ov";
    case Repr::k:
      return "k";
    case Repr::v:
      return "v";
  }
  return "qk";
}

Repr parse_repr(std::string_view name) {
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v})
    if (repr_name(repr) == name) return repr;
  throw Error("", "unknown representation \"" + std::string(name) +
                      "\" for --repr (expected qk, ov, k or v)");
}

ModelLayout detect_layout(const Checkpoint& checkpoint, const LayoutOverrides& overrides) {
  if (overrides.activations) return detail::detect_activations(checkpoint, overrides);
  if (overrides.family) check_family_name(*overrides.family);
  const std::string family = overrides.family.value_or("");
  if (overrides.map_file || family == "map") {
    if (!overrides.map_file) throw Error("", "--family map needs --map FILE");
    return map_layout(checkpoint, overrides);
  }
  if (is_mla_family(family) || (family.empty() && detail::is_mla(checkpoint)))
    return detail::detect_mla(checkpoint, overrides);
  if (family == "lrkv" || (family.empty() && detail::is_lrkv(checkpoint)))
    return detail::detect_lrkv(checkpoint, overrides);
  return dense_detect(checkpoint, overrides);
}

HeadFactors layer_factors(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                          Repr repr) {
  if (layer < 0 || layer >= layout.num_layers)
    throw Error(checkpoint.path().string(), "layer " + std::to_string(layer) +
                                                " out of range (the model has " +
                                                std::to_string(layout.num_layers) + " layers)");
  check_repr_supported(checkpoint, layout, repr);
  if (layout.family == "activations")
    return detail::activation_factors(checkpoint, layout, layer, repr);
  if (layout.variant == "mla") return detail::mla_factors(checkpoint, layout, layer, repr);
  if (layout.variant == "lrkv") return detail::lrkv_factors(checkpoint, layout, layer, repr);
  return dense_factors(checkpoint, layout, layer, repr);
}

std::vector<std::string> layer_tensor_names(const ModelLayout& layout, int layer) {
  if (layout.family == "activations") return detail::activation_tensor_names(layout, layer);
  if (layout.variant == "mla") return detail::mla_tensor_names(layout, layer);
  if (layout.variant == "lrkv") return detail::lrkv_tensor_names(layout, layer);
  std::vector<std::string> names;
  for (const char* role : {"q", "k", "v", "o", "qkv"}) {
    auto it = layout.details.find(role);
    if (it != layout.details.end()) names.push_back(layer_name(it->second, layer));
  }
  return names;
}

}  // namespace kvrank

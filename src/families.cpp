// Family detection and per-head factors for the dense layouts (llama-like, gpt2, gpt_neox, falcon,
// phi3, --map), the shared helpers of family_detail.hpp, and dispatch to MLA / LRKV / activations.
#include "kvrank/families.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>

#include "family_detail.hpp"
#include "kvrank/error.hpp"

namespace kvrank {
namespace detail {
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
  return Error(checkpoint.config_path().string(),
               std::string("field \"") + key + "\": expected " + expected + ", found " +
                   found.dump());
}

std::string shape_text(Index rows, Index cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

}  // namespace

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
    if (value < 0) throw config_type_error(checkpoint, key, expected, *field);
    if (value > std::numeric_limits<int>::max())
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

RowMatrixF load_matrix(const Checkpoint& checkpoint, const std::string& name, Index rows, Index cols,
                       const std::string& why) {
  const TensorView& tensor = checkpoint.at(name);
  const bool matches =
      tensor.shape.size() == 2 && tensor.shape[0] == rows && tensor.shape[1] == cols;
  if (!matches) {
    throw Error(tensor.file, name,
                "expected shape " + shape_text(rows, cols) + " (" + why + "), found " +
                    tensor.shape_string());
  }
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

std::string_view repr_name(Repr) noexcept { return "qk"; }
Repr parse_repr(std::string_view) { throw std::logic_error("not implemented"); }
ModelLayout detect_layout(const Checkpoint&, const LayoutOverrides&) {
  throw std::logic_error("not implemented");
}
HeadFactors layer_factors(const Checkpoint&, const ModelLayout&, int, Repr) {
  throw std::logic_error("not implemented");
}
std::vector<std::string> layer_tensor_names(const ModelLayout&, int) {
  throw std::logic_error("not implemented");
}

}  // namespace kvrank

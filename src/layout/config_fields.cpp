// The readers' shared access to config.json (family_detail.hpp): typed fields, the top level or a
// multimodal checkpoint's "text_config", each error naming config.json and the field; and the
// model type, from config.json or a GGUF file's architecture.
#include <cstdint>
#include <limits>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {
namespace {

const nlohmann::json* config_field(const Checkpoint& checkpoint, const char* key) {
  const auto& config = checkpoint.config();
  if (!config) return nullptr;
  auto it = config->find(key);
  if (it != config->end() && !it->is_null()) return &*it;
  // Multimodal checkpoints (Gemma 3, …) keep the language model's fields under "text_config".
  auto text = config->find("text_config");
  if (text == config->end() || !text->is_object()) return nullptr;
  it = text->find(key);
  if (it == text->end() || it->is_null()) return nullptr;
  return &*it;
}

Error config_type_error(const Checkpoint& checkpoint, const char* key, const char* expected,
                        const nlohmann::json& found) {
  return Error(checkpoint.config_path().string(), std::string("field \"") + key + "\": expected " +
                                                      expected + ", found " + json_excerpt(found));
}

/// A config field as a non-negative int, or an error naming `key`.
int config_int_value(const Checkpoint& checkpoint, const char* key, const nlohmann::json* field) {
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

}  // namespace

std::optional<int> config_int(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  return config_int_value(checkpoint, key, field);
}

std::optional<int> config_section_int(const Checkpoint& checkpoint, const char* section,
                                      const char* key) {
  const auto& config = checkpoint.config();
  if (!config) return std::nullopt;
  const auto part = config->find(section);
  if (part == config->end() || !part->is_object()) return std::nullopt;
  const auto field = part->find(key);
  if (field == part->end() || field->is_null()) return std::nullopt;
  const std::string name = std::string(section) + "." + key;
  return config_int_value(checkpoint, name.c_str(), &*field);
}

std::optional<std::string> config_string(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  if (!field->is_string()) throw config_type_error(checkpoint, key, "a string", *field);
  return field->get<std::string>();
}

std::optional<std::string> model_type_of(const Checkpoint& checkpoint) {
  if (!is_gguf(checkpoint)) return config_string(checkpoint, "model_type");
  const std::string architecture = *config_string(checkpoint, "gguf_architecture");
  const ModelTypeInfo* row = model_type_of_gguf(architecture);
  if (!row)
    throw Error(checkpoint.path().string(), "GGUF architecture \"" + excerpt(architecture) +
                                                "\" is not supported (kvrank reads " +
                                                gguf_architecture_list() + ")");
  // DeepSeek-V3 routes its experts with a sigmoid (expert_gating_func 2), V2 with a softmax.
  if (row->family == Family::deepseek_v2 && config_int(checkpoint, "expert_gating_func") == 2)
    return std::string(family_name(Family::deepseek_v3));
  return std::string(row->name);
}

bool is_gguf(const Checkpoint& checkpoint) {
  return config_field(checkpoint, "gguf_architecture") != nullptr;
}

std::optional<bool> config_bool(const Checkpoint& checkpoint, const char* key) {
  const nlohmann::json* field = config_field(checkpoint, key);
  if (!field) return std::nullopt;
  if (!field->is_boolean()) throw config_type_error(checkpoint, key, "true or false", *field);
  return field->get<bool>();
}

}  // namespace kvrank::detail

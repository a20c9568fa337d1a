// FieldReader (private to the result reader): reads the fields of one JSON object of a result file
// to the rules of the JSON Schema (docs/schema/kvrank-result.schema.json) — types, minimums, the
// known names, no unknown keys — naming the file and the field's place ("models[2].layers[5]") in
// every error, with the value quoted as an excerpt.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/report/result_model.hpp"

namespace kvrank::report_detail {

class FieldReader {
 public:
  using json = nlohmann::json;

  FieldReader(const json& object, std::string where, const std::string& file)
      : object_(object), where_(std::move(where)), file_(file) {
    if (!object_.is_object()) fail(where_, "expected an object, found " + type_of(object_));
  }

  const json& field(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end()) fail(where_, std::string("missing \"") + key + "\"");
    return *it;
  }
  bool has(const char* key) const { return object_.contains(key); }
  /// Whether the key is there and not null.
  bool has_value(const char* key) const { return has(key) && !field(key).is_null(); }
  std::string place(const char* key) const { return where_.empty() ? key : where_ + "." + key; }

  /// The schema's "additionalProperties": false — every key is one of `keys`.
  void allow_only(std::span<const std::string_view> keys) const {
    for (const auto& [key, value] : object_.items()) {
      bool known = false;
      for (std::string_view allowed : keys) known = known || key == allowed;
      if (!known) fail(where_, "unexpected key \"" + excerpt(key) + "\"");
    }
  }
  void allow_only(std::initializer_list<std::string_view> keys) const {
    allow_only(std::span<const std::string_view>(keys.begin(), keys.size()));
  }

  std::string string(const char* key) const {
    const json& value = field(key);
    if (!value.is_string()) fail(place(key), "expected a string, found " + type_of(value));
    return value.get<std::string>();
  }
  /// A string that must be one of `names` (the schema's "enum").
  std::string choice(const char* key, std::initializer_list<std::string_view> names) const {
    return choice(key, std::span<const std::string_view>(names.begin(), names.size()));
  }
  std::string choice(const char* key, std::span<const std::string_view> names) const {
    const std::string value = string(key);
    std::string list;
    for (std::string_view name : names) {
      if (value == name) return value;
      list += (list.empty() ? "" : ", ") + std::string(name);
    }
    fail(place(key), "expected one of " + list + ", found " + detail::json_excerpt(value));
  }
  std::optional<std::string> optional_choice(const char* key,
                                             std::span<const std::string_view> names) const {
    if (field(key).is_null()) return std::nullopt;
    return choice(key, names);
  }
  double number(const char* key) const { return as_number(field(key), place(key)); }
  int integer(const char* key) const { return as_int(field(key), place(key)); }
  /// An integer at least `minimum` (the schema's "minimum").
  int count(const char* key, int minimum = 0) const {
    return at_least(integer(key), minimum, place(key));
  }
  /// A number, or null (nullopt).
  std::optional<double> optional_number(const char* key) const {
    if (field(key).is_null()) return std::nullopt;
    return number(key);
  }
  bool boolean(const char* key) const {
    const json& value = field(key);
    if (!value.is_boolean()) fail(place(key), "expected a boolean, found " + type_of(value));
    return value.get<bool>();
  }
  /// An item of an array the caller walks (at its place `at`): an integer at least `minimum`.
  int count_item(const json& item, const std::string& at, int minimum = 0) const {
    return at_least(as_int(item, at), minimum, at);
  }
  std::optional<std::string> optional_string(const char* key) const {
    if (field(key).is_null()) return std::nullopt;
    return string(key);
  }
  /// An integer >= 0 (a training step), or null.
  std::optional<std::int64_t> optional_step(const char* key) const {
    const json& value = field(key);
    if (value.is_null()) return std::nullopt;
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() &&
         value.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())))
      fail(place(key), "expected an integer or null, found " + describe(value));
    if (value.get<std::int64_t>() < 0) fail(place(key), "expected >= 0, found " + value.dump());
    return value.get<std::int64_t>();
  }
  /// An integer at least `minimum`, or null.
  std::optional<int> optional_count(const char* key, int minimum) const {
    const json& value = field(key);
    if (value.is_null()) return std::nullopt;
    return at_least(as_int(value, place(key)), minimum, place(key));
  }
  std::vector<double> numbers(const char* key) const {
    std::vector<double> out;
    for_each_item(
        key, [&](const json& item, const std::string& at) { out.push_back(as_number(item, at)); });
    return out;
  }
  /// Integers at least `minimum` each.
  std::vector<int> counts(const char* key, int minimum = 0) const {
    std::vector<int> out;
    for_each_item(key, [&](const json& item, const std::string& at) {
      out.push_back(count_item(item, at, minimum));
    });
    return out;
  }
  const json& array(const char* key) const {
    const json& value = field(key);
    if (!value.is_array()) fail(place(key), "expected an array, found " + type_of(value));
    return value;
  }

  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const std::string& at, const std::string& what) const {
    throw Error(file_, at.empty() ? what : at + ": " + what);
  }

  static std::string type_of(const json& value) {
    switch (value.type()) {
      case json::value_t::null:
        return "null";
      case json::value_t::object:
        return "an object";
      case json::value_t::array:
        return "an array";
      case json::value_t::string:
        return "a string";
      case json::value_t::boolean:
        return "a boolean";
      default:
        return "a number";
    }
  }

 private:
  template <typename Function>
  void for_each_item(const char* key, Function&& function) const {
    const json& items = array(key);
    for (std::size_t i = 0; i < items.size(); ++i) {
      function(items[i], place(key) + "[" + std::to_string(i) + "]");
    }
  }

  int at_least(int value, int minimum, const std::string& at) const {
    if (value < minimum)
      fail(at, "expected >= " + std::to_string(minimum) + ", found " + std::to_string(value));
    return value;
  }

  double as_number(const json& value, const std::string& at) const {
    if (!value.is_number()) fail(at, "expected a number, found " + type_of(value));
    return value.get<double>();
  }

  int as_int(const json& value, const std::string& at) const {
    if (!value.is_number_integer()) fail(at, "expected an integer, found " + describe(value));
    if (value.is_number_unsigned()) {
      const auto number = value.get<std::uint64_t>();
      if (number > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
        fail(at, "integer " + describe(value) + " out of range");
      }
      return static_cast<int>(number);
    }
    const auto number = value.get<std::int64_t>();
    if (number < std::numeric_limits<int>::min() || number > std::numeric_limits<int>::max()) {
      fail(at, "integer " + describe(value) + " out of range");
    }
    return static_cast<int>(number);
  }

  static std::string describe(const json& value) {
    return value.is_number() ? detail::json_excerpt(value) : type_of(value);
  }

  const json& object_;
  std::string where_;
  const std::string& file_;
};

/// Reads the curves of `fields` from one layer into `layer`. A curve that a file of this
/// schema_version predates (version < its `since`) may be absent: it is left at its default and
/// added to `absent` (once). Every other curve is required.
void read_curves(const FieldReader& reader, std::span<const CurveField> fields, int version,
                 LayerMetrics& layer, std::vector<Curve>& absent);
/// The "summary" object: the mean of each summarised curve of `fields` (NaN for one the file's
/// version predates and lacks), and no other key.
Summary read_summary(const FieldReader& reader, std::span<const CurveField> fields, int version);

}  // namespace kvrank::report_detail

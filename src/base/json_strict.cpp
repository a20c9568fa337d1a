#include "base/json_strict.hpp"

#include <set>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"

namespace kvrank::detail {
namespace {

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest is the useful part.
std::string strip_exception_id(const std::string& message) {
  std::size_t end = message.find("] ");
  return message.starts_with("[json.exception.") && end != std::string::npos
             ? message.substr(end + 2)
             : message;
}

// Whether byte `c` continues a UTF-8 sequence (10xxxxxx).

// A SAX pass over the text that builds nothing: it refuses nesting deeper than kMaxJsonDepth and
// a key seen twice in one object, and records the top-level keys in order.
class StrictChecker {
 public:
  using Json = nlohmann::json;
  StrictChecker(const std::string& file_name, std::string_view what,
                std::vector<std::string>* top_level_keys)
      : file_(file_name), what_(what), top_level_keys_(top_level_keys) {}

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(Json::number_integer_t) { return true; }
  bool number_unsigned(Json::number_unsigned_t) { return true; }
  bool number_float(Json::number_float_t, const Json::string_t&) { return true; }
  bool string(Json::string_t&) { return true; }
  bool binary(Json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    open(true);
    return true;
  }
  bool end_object() {
    close();
    return true;
  }
  bool start_array(std::size_t) {
    open(false);
    return true;
  }
  bool end_array() {
    close();
    return true;
  }

  bool key(Json::string_t& key) {
    if (!object_keys_.back().insert(key).second) {
      if (containers_.size() == 1)
        throw Error(file_, key, "appears more than once in the " + what_);
      throw Error(file_, "duplicate key \"" + key + "\" in the " + what_);
    }
    if (top_level_keys_ && containers_.size() == 1) top_level_keys_->push_back(key);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    throw Error(file_, what_ + " is not valid JSON: " + strip_exception_id(error.what()));
  }

 private:
  void open(bool is_object) {
    if (containers_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
      throw Error(file_, what_ + " nests deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels of objects and arrays");
    }
    containers_.push_back(is_object);
    if (is_object) object_keys_.emplace_back();
  }
  void close() {
    if (containers_.back()) object_keys_.pop_back();
    containers_.pop_back();
  }

  const std::string& file_;
  std::string what_;
  std::vector<std::string>* top_level_keys_;
  std::vector<bool> containers_;                    // open containers, innermost last: object?
  std::vector<std::set<std::string>> object_keys_;  // keys of each open object
};

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) noexcept {
  for (std::size_t at = 0; at < text.size();) {
    const Utf8Char c = decode_utf8(text, at);
    if (!c.valid) return at;
    at += c.length;
  }
  return std::nullopt;
}

std::string json_kind(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::object:
      return "object";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::null:
      return "null";
    default:
      return "number";
  }
}

std::string json_excerpt(const nlohmann::json& value, std::size_t limit) {
  // A string is cut before it is quoted, not dumped whole first (an 8 MB string would be copied).
  // Parsed values are at most kMaxJsonDepth deep, so dump() neither throws nor recurses far.
  if (value.is_string()) return '"' + excerpt(value.get_ref<const std::string&>(), limit) + '"';
  return excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), limit);
}

nlohmann::json parse_json_strict(std::string_view text, const std::string& file_name,
                                 std::string_view what, std::vector<std::string>* top_level_keys) {
  using Json = nlohmann::json;
  if (auto bad = first_invalid_utf8(text)) {
    throw Error(file_name, std::string(what) + " is not valid UTF-8 (byte " + std::to_string(*bad) +
                               " of the " + std::string(what) + ")");
  }
  // Two linear passes. nlohmann's callback parser would do the checks in one, but it rescans the
  // enclosing object at every object end: quadratic, minutes for a header of 300,000 tensors.
  StrictChecker checker(file_name, what, top_level_keys);
  try {
    Json::sax_parse(text.begin(), text.end(), &checker);
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& error) {
    throw Error(file_name,
                std::string(what) + " is not valid JSON: " + strip_exception_id(error.what()));
  }
}

}  // namespace kvrank::detail

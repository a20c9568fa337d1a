#include "io/json_strict.hpp"

#include <set>
#include <vector>

#include "kvrank/error.hpp"

namespace kvrank::detail {
namespace {

// Length of the UTF-8 sequence starting at text[i], or 0 when it is malformed (RFC 3629 table).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) noexcept {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  auto continuation = [&](std::size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return k < text.size() && byte(k) >= lo && byte(k) <= hi;
  };
  const unsigned lead = byte(i);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return continuation(i + 1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    const unsigned lo = lead == 0xE0 ? 0xA0 : 0x80;  // no overlongs
    const unsigned hi = lead == 0xED ? 0x9F : 0xBF;  // no surrogates
    return continuation(i + 1, lo, hi) && continuation(i + 2) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    const unsigned lo = lead == 0xF0 ? 0x90 : 0x80;  // no overlongs
    const unsigned hi = lead == 0xF4 ? 0x8F : 0xBF;  // nothing above U+10FFFF
    return continuation(i + 1, lo, hi) && continuation(i + 2) && continuation(i + 3) ? 4 : 0;
  }
  return 0;
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the rest is the useful part.
std::string strip_exception_id(const std::string& message) {
  std::size_t end = message.find("] ");
  return message.starts_with("[json.exception.") && end != std::string::npos
             ? message.substr(end + 2)
             : message;
}

template <typename Json>
std::string kind_of(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::null:
      return "null";
    default:
      return "number";
  }
}

}  // namespace

std::optional<std::size_t> first_invalid_utf8(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t length = utf8_sequence_length(text, i);
    if (length == 0) return i;
    i += length;
  }
  return std::nullopt;
}

std::string json_kind(const nlohmann::ordered_json& value) { return kind_of(value); }
std::string json_kind(const nlohmann::json& value) { return kind_of(value); }

template <typename Json>
Json parse_json_strict(std::string_view text, const std::string& file_name, std::string_view what) {
  if (auto bad = first_invalid_utf8(text)) {
    throw Error(file_name, std::string(what) + " is not valid UTF-8 (byte " + std::to_string(*bad) +
                               " of the " + std::string(what) + ")");
  }
  // One set of keys per open object; a key seen twice in the same object is an error.
  std::vector<std::set<std::string>> open_objects;
  auto track_keys = [&](int /*depth*/, nlohmann::detail::parse_event_t event, Json& parsed) {
    using Event = nlohmann::detail::parse_event_t;
    if (event == Event::object_start) {
      open_objects.emplace_back();
    } else if (event == Event::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == Event::key && !open_objects.empty()) {
      const std::string& key = parsed.template get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second) {
        if (open_objects.size() == 1) {
          throw Error(file_name, key, "appears more than once in the " + std::string(what));
        }
        throw Error(file_name, "duplicate key \"" + key + "\" in the " + std::string(what));
      }
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), track_keys);
  } catch (const typename Json::exception& error) {
    throw Error(file_name,
                std::string(what) + " is not valid JSON: " + strip_exception_id(error.what()));
  }
}

template nlohmann::json parse_json_strict<nlohmann::json>(std::string_view, const std::string&,
                                                          std::string_view);
template nlohmann::ordered_json parse_json_strict<nlohmann::ordered_json>(std::string_view,
                                                                          const std::string&,
                                                                          std::string_view);

}  // namespace kvrank::detail

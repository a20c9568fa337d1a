// libFuzzer target: the strict JSON reader every JSON input goes through (UTF-8, duplicate keys,
// nesting depth), then what error messages do with a parsed value (json_excerpt, json_kind).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    std::vector<std::string> keys;
    const nlohmann::json value =
        kvrank::detail::parse_json_strict(text, "fuzz.json", "file", &keys);
    const std::string excerpt = kvrank::detail::json_excerpt(value);
    // An excerpt stays short (60 bytes, then "... (N bytes)") and valid UTF-8, whatever was parsed.
    if (excerpt.size() > 96 || kvrank::detail::first_invalid_utf8(excerpt)) __builtin_trap();
    if (value.is_object() && keys.size() != value.size()) __builtin_trap();
    (void)kvrank::detail::json_kind(value);
  } catch (const kvrank::Error&) {
  }
  return 0;
}

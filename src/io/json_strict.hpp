// Strict JSON parsing for file headers and config files (private to the readers).
//
// nlohmann::json accepts duplicate object keys (keeping the last) and reports invalid UTF-8 in
// terms of its lexer; the safetensors rules and a clear message need more: this parser rejects
// invalid UTF-8 (with the byte offset) and duplicate keys at any depth, and turns every failure
// into a kvrank::Error naming the file.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kvrank::detail {

/// Offset of the first byte that is not part of well-formed UTF-8 (no overlongs, surrogates or
/// code points above U+10FFFF), or nullopt when `text` is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text) noexcept;

/// Parses `text` as JSON. `what` names the text in messages ("header", "file"). Throws
/// kvrank::Error(file_name, ...): "<what> is not valid UTF-8 (byte N)", "<what> is not valid JSON:
/// ...", or "duplicate key \"k\" in <what>" (for a key of the top-level object, the error names the
/// key as the tensor: Error(file, key, "appears more than once in the <what>")).
/// Json is nlohmann::json or nlohmann::ordered_json (keeps the order of the text).
template <typename Json>
Json parse_json_strict(std::string_view text, const std::string& file_name, std::string_view what);

/// "object", "array", "string", "number", "boolean" or "null".
std::string json_kind(const nlohmann::ordered_json& value);
std::string json_kind(const nlohmann::json& value);

}  // namespace kvrank::detail

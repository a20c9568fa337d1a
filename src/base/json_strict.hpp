// Strict JSON parsing for file headers and config files (private to the readers).
//
// nlohmann::json accepts duplicate object keys (keeping the last) and reports invalid UTF-8 in
// terms of its lexer; the safetensors rules and a clear message need more: this parser rejects
// invalid UTF-8 (with the byte offset), duplicate keys at any depth and nesting deeper than
// kMaxJsonDepth (printing or destroying a value nested 100,000 levels deep overflows the stack),
// and turns every failure into a kvrank::Error naming the file. Every JSON input of kvrank goes
// through it: safetensors headers here, files through read_json_object().
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrank/base/text.hpp"

namespace kvrank::detail {

/// Offset of the first byte that is not part of well-formed UTF-8 (no overlongs, surrogates or
/// code points above U+10FFFF: decode_utf8() of kvrank/base/text.hpp decides), or nullopt when
/// `text` is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text) noexcept;

/// Containers (objects and arrays) may nest this deep; kvrank's own files need 6 levels.
inline constexpr int kMaxJsonDepth = 64;

/// Parses `text` as JSON. `what` names the text in messages ("header", "file"). Throws
/// kvrank::Error(file_name, ...): "<what> is not valid UTF-8 (byte N)", "<what> is not valid JSON:
/// ...", "<what> nests deeper than 64 levels", or "duplicate key \"k\" in <what>" (for a key of the
/// top-level object, the error names the key as the tensor: Error(file, key, "appears more than
/// once in the <what>")). When `top_level_keys` is given, it receives the keys of the top-level
/// object in the order of the text (nlohmann::ordered_json would keep it too, but its lookups are
/// linear: a header of 300,000 tensors took minutes).
nlohmann::json parse_json_strict(std::string_view text, const std::string& file_name,
                                 std::string_view what,
                                 std::vector<std::string>* top_level_keys = nullptr);

/// "object", "array", "string", "number", "boolean" or "null".
std::string json_kind(const nlohmann::json& value);

/// The value as compact JSON for an error message, cut by excerpt() ("[1,2,... (N bytes)").
std::string json_excerpt(const nlohmann::json& value, std::size_t limit = kExcerptBytes);

}  // namespace kvrank::detail

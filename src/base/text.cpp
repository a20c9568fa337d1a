#include "kvrank/base/text.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "kvrank/base/error.hpp"

namespace kvrank {
namespace {

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Characters a terminal or text viewer acts on rather than shows.
bool is_control(char32_t c) {
  return c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) ||  // C0, DEL, C1
         c == 0x061C || c == 0x200E || c == 0x200F ||          // bidi marks
         c == 0x2028 || c == 0x2029 ||                         // line / paragraph separator
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);  // bidi embeddings
}

std::string escape_control(char32_t c) {
  switch (c) {
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  char buffer[16];
  if (c < 0x80) {
    std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(c));
  } else {
    std::snprintf(buffer, sizeof buffer, "\\u{%04x}", static_cast<unsigned>(c));
  }
  return buffer;
}

}  // namespace

Utf8Char decode_utf8(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  const Utf8Char invalid{lead, 1, false};
  if (lead < 0x80) return {lead, 1, true};
  std::size_t length = 0;
  char32_t code_point = 0;
  unsigned char second_low = 0x80, second_high = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code_point = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code_point = lead & 0x0Fu;
    if (lead == 0xE0) second_low = 0xA0;   // no overlong forms
    if (lead == 0xED) second_high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code_point = lead & 0x07u;
    if (lead == 0xF0) second_low = 0x90;   // no overlong forms
    if (lead == 0xF4) second_high = 0x8F;  // nothing above U+10FFFF
  } else {
    return invalid;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (text.size() - at < length) return invalid;
  if (byte(1) < second_low || byte(1) > second_high) return invalid;
  for (std::size_t i = 1; i < length; ++i) {
    if (!is_continuation(byte(i))) return invalid;
    code_point = (code_point << 6) | (byte(i) & 0x3Fu);
  }
  return {code_point, length, true};
}

namespace {

// The shown form of the character at `at`: itself, or an escape when a terminal would act on it.
// Returns how many bytes of `text` it stood for.
std::size_t shown_character(std::string_view text, std::size_t at, std::string& shown) {
  const Utf8Char c = decode_utf8(text, at);
  if (!c.valid) {
    char buffer[8];
    std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(c.code_point));
    shown = buffer;
  } else if (is_control(c.code_point)) {
    shown = escape_control(c.code_point);
  } else {
    shown.assign(text, at, c.length);
  }
  return c.length;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out, shown;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    at += shown_character(text, at, shown);
    out += shown;
  }
  return out;
}

std::string excerpt(std::string_view text, std::size_t limit) {
  // The limit bounds what is shown, escapes included: 60 DEL bytes show as 240 characters.
  std::string out, shown;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = shown_character(text, at, shown);
    if (out.size() + shown.size() > limit) {
      return out + "... (" + std::to_string(text.size()) + " bytes)";
    }
    out += shown;
    at += length;
  }
  return out;
}

std::string ascii_lower(std::string text) {
  for (char& c : text)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return text;
}

std::optional<std::int64_t> decimal_value(std::string_view digits) noexcept {
  if (digits.empty()) return std::nullopt;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (value > (kMax - digit) / 10) return std::nullopt;  // the next step would pass INT64_MAX
    value = value * 10 + digit;
  }
  return value;
}

std::int64_t parse_integer(std::string_view option, std::string_view text, std::int64_t min,
                           std::int64_t max) {
  const bool negative = !text.empty() && text.front() == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  const bool well_formed =
      !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
  if (!well_formed)
    throw Error(
        "", std::string(option) + ": expected a decimal integer, found \"" + excerpt(text) + "\"");
  const std::optional<std::int64_t> magnitude = decimal_value(digits);
  const std::optional<std::int64_t> value =
      magnitude ? std::optional(negative ? -*magnitude : *magnitude) : std::nullopt;
  const bool too_small = value ? *value < min : negative;
  if (too_small)
    throw Error("", std::string(option) + ": " + excerpt(text) + " is out of range (at least " +
                        std::to_string(min) + ")");
  if (!value || *value > max)
    throw Error("", std::string(option) + ": " + excerpt(text) + " is out of range (at most " +
                        std::to_string(max) + ")");
  return *value;
}

namespace {

/// Edits between `a` and `b`: insertions, deletions, substitutions and swaps of neighbours
/// (optimal string alignment distance).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> nearest_name(std::string_view name,
                                        const std::vector<std::string>& candidates) {
  // Long names are refused unread: a typo is short, and the table is quadratic in the length.
  constexpr std::size_t kLongestTypo = 256;
  if (name.size() > kLongestTypo) return std::nullopt;
  const std::size_t allowed = name.size() <= 4 ? 1 : name.size() <= 8 ? 2 : 3;
  std::optional<std::string> best;
  std::size_t best_distance = allowed + 1;
  for (const std::string& candidate : candidates) {
    if (candidate.size() > kLongestTypo) continue;
    const std::size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace kvrank

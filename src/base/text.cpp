#include "kvrank/base/text.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

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

}  // namespace kvrank

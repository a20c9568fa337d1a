// Text that came from outside (file names, tensor names, labels) made safe for where it goes.
//
// Names in checkpoints and result files are arbitrary bytes. Printed raw they can move the cursor,
// recolour or clear a terminal, forge extra log lines (a newline), or reverse what follows (Unicode
// bidi controls); written into SVG or JSON they can make the document invalid. Every message, log
// line and terminal table passes through printable(); the SVG writer uses decode_utf8() to keep
// only characters XML 1.0 allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvrank {

/// One character of a UTF-8 text, as decoded by decode_utf8.
struct Utf8Char {
  char32_t code_point = 0;  ///< the character; for an invalid byte, the byte's value
  std::size_t length = 1;   ///< bytes it takes (1 for an invalid byte)
  bool valid = true;        ///< false: the byte at `at` does not start a well-formed character
};

/// Decodes the character starting at text[at] (precondition: at < text.size()). Strict RFC 3629:
/// overlong forms, surrogates (U+D800–U+DFFF), code points above U+10FFFF and truncated sequences
/// are invalid, one byte at a time.
Utf8Char decode_utf8(std::string_view text, std::size_t at);

/// `text` with everything a terminal would act on made visible: \n, \r, \t, other C0 controls and
/// DEL as \xNN, invalid UTF-8 bytes as \xNN, C1 controls, line/paragraph separators and bidi
/// controls as \u{NNNN}. Valid printable UTF-8 is kept as is, and so is the backslash, which makes
/// the function idempotent: a message escaped twice (an Error rethrown with another's what())
/// reads the same.
///   printable("a\nb\x1b[31m") == "a\\nb\\x1b[31m"
std::string printable(std::string_view text);

/// The bytes kvrank quotes of a value in a message (docs/input-limits.md): a wrong 10 MB value must
/// not become a 10 MB error line.
inline constexpr std::size_t kExcerptBytes = 60;

/// printable() of `text`, cut at a character boundary so that at most `limit` bytes are shown
/// (escapes count as shown: sixty DEL bytes show as fifteen "\x7f"), with "... (N bytes)" when it
/// was cut. Every value quoted in a message goes through it.
///   excerpt(std::string(1000, 'a')) == std::string(60, 'a') + "... (1000 bytes)"
std::string excerpt(std::string_view text, std::size_t limit = kExcerptBytes);

/// `text` with ASCII letters in lower case (file extensions: ".JSON" names JSON too).
std::string ascii_lower(std::string text);

/// The value of `digits` read as a decimal number: one or more ASCII digits and nothing else, any
/// leading zeros ("000500" is 500). nullopt for anything else, or when the value exceeds INT64_MAX.
/// The one reading of a non-negative decimal number, shared by parse_integer and the training
/// step in a `checkpoint-N` folder name, so that `--step 000500` and `checkpoint-000500` agree.
std::optional<std::int64_t> decimal_value(std::string_view digits) noexcept;

/// The integer given for `option` (named in messages, e.g. "--step"): decimal only — an optional
/// '-' then digits; "0x10", "1e3", "+5", " 5" are refused — and within [min, max], checked, never
/// clamped. Throws kvrank::Error "OPTION: expected a decimal integer, found "TEXT"" or
/// "OPTION: TEXT is out of range (at most MAX)" (or "at least MIN").
///   parse_integer("--step", "000500", 0, INT64_MAX) == 500
std::int64_t parse_integer(std::string_view option, std::string_view text, std::int64_t min,
                           std::int64_t max);

/// The name of `candidates` nearest to `name` by edit distance (insertions, deletions,
/// substitutions, and swaps of two neighbouring characters each count 1), when it is near enough
/// to be a typo of it: at most 1 edit for names of up to 4 characters, 2 up to 8, else 3. nullopt
/// when none is. `kvrank analyse` → "analyze", `--fromat` → "--format", `--layer` → "--layers".
std::optional<std::string> nearest_name(std::string_view name,
                                        const std::vector<std::string>& candidates);

}  // namespace kvrank

// Figures as SVG: the small SVG vocabulary the figures share (svg_detail.hpp).
//
// The look follows a matplotlib paper figure: light grid, boxed axes, a dashed grey "Fully
// redundant" line, DejaVu Sans / sans-serif text, colour-blind-safe colours and a marker shape per
// series. A series keeps its look in every panel (styles are assigned by label), so one legend
// serves them all.
//
// Structure (what tests and scripts can rely on): each panel is a <g class="panel"
// data-title=…>; each series a <g class="model" data-label=…> holding ONE <path class="series">
// and one <path class="marker" data-shape=… data-x=… data-y=…> per point (x, y: its centre); the
// fully-redundant line is a <path class="baseline">; legend entries are <g class="legend-entry">;
// heatmap cells are <rect class="cell" data-value=…>. Width and height are in inches.
#include "kvrank/plot/svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <optional>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank {

namespace {

// XML 1.0 § 2.2 Char. decode_utf8 already excludes surrogates and anything above U+10FFFF.
bool allowed_in_xml(char32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || c >= 0x10000;
}

const char* xml_entity(char32_t c) {
  switch (c) {
    case '&':
      return "&amp;";
    case '<':
      return "&lt;";
    case '>':
      return "&gt;";
    case '"':
      return "&quot;";
    case '\'':
      return "&apos;";
    case '\t':
      return "&#9;";
    case '\n':
      return "&#10;";
    case '\r':
      return "&#13;";
    default:
      return nullptr;
  }
}

}  // namespace

std::string xml_escape(std::string_view text) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const Utf8Char c = decode_utf8(text, at);
    if (!c.valid || !allowed_in_xml(c.code_point)) {
      out += kReplacement;
    } else if (const char* entity = xml_entity(c.code_point)) {
      out += entity;
    } else {
      out.append(text, at, c.length);
    }
    at += c.length;
  }
  return out;
}

namespace plot_detail {

// ---------------------------------------------------------------------------------------------
// Small SVG vocabulary
// ---------------------------------------------------------------------------------------------

/// A coordinate or length, with at most two decimals and no trailing zeros.
std::string num(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text = buffer;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

std::string attr(const char* name, const std::string& value) {
  return std::string(" ") + name + "=\"" + value + "\"";
}
std::string attr(const char* name, double value) { return attr(name, num(value)); }

std::string line(double x1, double y1, double x2, double y2, const std::string& style) {
  return "<line" + attr("x1", x1) + attr("y1", y1) + attr("x2", x2) + attr("y2", y2) + style +
         "/>\n";
}

std::string text(double x, double y, const std::string& content, double size, Anchor anchor,
                 const std::string& extra) {
  static const char* const kAnchors[] = {"start", "middle", "end"};
  return "<text" + attr("x", x) + attr("y", y) + attr("font-size", size) +
         attr("text-anchor", kAnchors[static_cast<int>(anchor)]) + extra + ">" +
         xml_escape(content) + "</text>\n";
}

std::string document_open(double width, double height) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\"" +
         attr("width", num(width / kUnitsPerInch) + "in") +
         attr("height", num(height / kUnitsPerInch) + "in") +
         attr("viewBox", "0 0 " + num(width) + " " + num(height)) + attr("font-family", kFont) +
         attr("fill", kTextColour) + ">\n" + "<rect" + attr("width", width) +
         attr("height", height) + attr("fill", "white") + "/>\n";
}

namespace {

// DejaVu Sans's advance widths of ' ' … '~' in thousandths of an em (read from DejaVuSans.ttf's
// hmtx table); bold (DejaVuSans-Bold.ttf) is at most 1.13 times as wide, about 1.1 on average.
constexpr std::array<short, 95> kAsciiWidths = {
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361,  318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635,  611, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 352,  635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592,  525, 636, 337, 636, 838};

double em_width(char32_t c) {
  if (c >= 0x20 && c <= 0x7E) return kAsciiWidths[c - 0x20] / 1000.0;
  if (c >= 0x2000) return 1.0;  // punctuation ("…", "—"), symbols, East Asian scripts: full width
  return 0.75;                  // accented, Greek and Cyrillic letters: at most this
}

}  // namespace

double text_width(const std::string& content, double size, bool bold) {
  double ems = 0;
  for (std::size_t at = 0; at < content.size();) {
    const Utf8Char c = decode_utf8(content, at);
    ems += c.valid ? em_width(c.code_point) : 1.0;  // U+FFFD, as xml_escape writes it
    at += c.length;
  }
  return ems * size * (bold ? 1.13 : 1.0);
}

namespace {

/// The longest start of `text` no wider than `width` at `size` (whole characters), with "…"
/// when it was cut.
std::string cut_to_width(const std::string& text, double size, double width) {
  if (text_width(text, size) <= width) return text;
  const std::string ellipsis = "\u2026";
  double used = text_width(ellipsis, size);
  std::size_t end = 0;
  while (end < text.size()) {
    const Utf8Char c = decode_utf8(text, end);
    used += text_width(text.substr(end, c.length), size);
    if (used > width) break;
    end += c.length;
  }
  return text.substr(0, end) + ellipsis;
}

/// A place a title may break: line one ends at `end`, line two starts at `next` (a space is
/// dropped; '-', '_' and '/' stay on line one).
struct Break {
  std::size_t end, next;
};

std::vector<Break> title_breaks(const std::string& title) {
  std::vector<Break> breaks;
  for (std::size_t i = 1; i + 1 < title.size(); ++i) {
    if (title[i] == ' ') breaks.push_back({i, i + 1});
    if (title[i] == '-' || title[i] == '_' || title[i] == '/') breaks.push_back({i + 1, i + 1});
  }
  return breaks;
}

/// widths[i]: the width of title[0, i) at `size` (prefix sums: any line's width in O(1), so that
/// a long title costs linear time).
std::vector<double> prefix_widths(const std::string& title, double size) {
  std::vector<double> widths(title.size() + 1, 0.0);
  for (std::size_t at = 0; at < title.size();) {
    const Utf8Char c = decode_utf8(title, at);
    const double width = text_width(title.substr(at, c.length), size);
    for (std::size_t k = 1; k <= c.length; ++k) widths[at + k] = widths[at] + width;
    at += c.length;
  }
  return widths;
}

}  // namespace

TitleLayout fit_title(const std::string& title, double size, double min_size, double width) {
  if (title.empty()) return {};
  const std::vector<double> at = prefix_widths(title, size);
  if (at.back() <= width) return {{title}, size};
  // The break that leaves the narrower two lines.
  const std::vector<Break> breaks = title_breaks(title);
  std::optional<Break> best;
  double widest = at.back();
  for (const Break& candidate : breaks) {
    const double two_lines = std::max(at[candidate.end], at.back() - at[candidate.next]);
    if (two_lines < widest) {
      widest = two_lines;
      best = candidate;
    }
  }
  std::vector<std::string> lines = {title};
  if (best) lines = {title.substr(0, best->end), title.substr(best->next)};
  const double shrunk = std::floor(100 * size * width / widest) / 100;
  if (shrunk >= size) return {lines, size};
  if (shrunk >= min_size) return {lines, shrunk};
  // Too long even small: as many whole words as fit on line one, the rest cut with "…".
  std::optional<Break> fill;
  for (const Break& candidate : breaks) {
    if (at[candidate.end] * min_size / size > width) break;
    fill = candidate;
  }
  if (!fill) return {{cut_to_width(title, min_size, width)}, min_size};
  return {{title.substr(0, fill->end), cut_to_width(title.substr(fill->next), min_size, width)},
          min_size};
}

std::string quoted_list(const std::vector<std::string>& names, std::size_t most) {
  std::string list;
  for (std::size_t i = 0; i < names.size() && i < most; ++i) {
    list += (i == 0 ? "\"" : ", \"") + excerpt(names[i], 40) + "\"";
  }
  if (names.size() > most) list += " and " + std::to_string(names.size() - most) + " more";
  return list;
}

}  // namespace plot_detail
}  // namespace kvrank

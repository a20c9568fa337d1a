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

/// Rough width of a text in a sans-serif font (no font metrics here): 0.55 em per character.
double text_width(const std::string& content, double size) {
  std::size_t characters = 0;
  for (unsigned char c : content) characters += (c & 0xC0) != 0x80;  // count UTF-8 code points
  return 0.55 * size * static_cast<double>(characters);
}

}  // namespace plot_detail
}  // namespace kvrank

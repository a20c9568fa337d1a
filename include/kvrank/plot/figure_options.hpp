// What a figure looks like, as a paper needs it: its size, fonts, panel grid, y range, legend
// place, and the look of each series (a style file keeps a model's look across every figure).
//
//   PlotOptions options;
//   apply_size_preset(options, "column");                     // 3.5 in wide, 8 pt text
//   options.ylim = parse_ylim("1,8");
//   options.styles = parse_style_file(read_json_object("paper-style.json"), "paper-style.json");
//   std::string svg = plot_curves_svg(panels, options);        // svg.hpp
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvrank/report/result_model.hpp"

namespace kvrank {

/// The look of one series. Empty fields take the defaults: a colour-blind-safe palette (Okabe &
/// Ito) in the paper's order by variant, a distinct marker per series, a solid line.
struct SeriesStyle {
  std::string colour;  ///< "#rrggbb" or "#rgb"
  std::string marker;  ///< one of marker_names()
  std::string dash;    ///< "solid", "dashed", "dotted", "dashdot", or an SVG dash list "6 3"
};

enum class LegendPlace { below, right, inside, none };

/// Where `--legend inside` puts the legend in its panel.
enum class LegendCorner { top_right, top_left, bottom_left, bottom_right };

/// The colour maps of the heatmaps: viridis (sequential, dark to light, colour-blind-safe and
/// monotonic in grey), rdbu (ColorBrewer's diverging red–blue, white in the middle), greys
/// (white to black, for grey print).
enum class ColourMap { viridis, rdbu, greys };

struct PlotOptions {
  Curve metric = Curve::erank;  ///< the y axis (result_model.hpp)
  std::string title;            ///< figure title (optional)
  double width_in = 0;          ///< figure width in inches; 0: from the panels
  double height_in = 0;         ///< figure height in inches; 0: from the width
  double font_pt = 10;          ///< axis-label size in points (ticks and legend a little smaller)
  int columns = 0;              ///< panels per row; 0: all in one row
  bool share_y = false;         ///< one y range for every panel
  std::optional<std::pair<double, double>> ylim{};  ///< fixed y range (low < high)
  LegendPlace legend = LegendPlace::below;
  std::optional<LegendCorner> legend_corner{};  ///< inside: this corner; empty: the freest one
  std::optional<ColourMap> colour_map{};        ///< heatmaps; empty: the map of the heatmap's kind
  /// Similarity heatmaps: heads in index order, or clustered (similar heads side by side).
  bool cluster_heads = false;
  std::map<std::string, SeriesStyle> styles{};  ///< by series label (model label, "Layer 3", run)
};

/// The figure options as `kvrank plot` takes them, text and numbers as given; plot_options()
/// checks them and makes the PlotOptions. The command line and the Python module's plot() both
/// go through it, so that the same options draw the same figure.
struct FigureSettings {
  std::string metric = "erank";     ///< a curve name (result_model.hpp)
  std::string title;                ///< figure title
  std::string size;                 ///< "column", "page", or empty
  std::optional<double> width;      ///< inches
  std::optional<double> height;     ///< inches
  std::optional<double> font_size;  ///< points
  std::optional<int> dpi;           ///< PNG pixels per inch; empty: kDefaultPngDpi
  std::optional<int> columns;       ///< panels per row; empty: all in one row
  bool share_y = false;             ///< one y range for every panel
  std::string ylim;                 ///< "LOW,HIGH", or empty
  std::string legend = "below";     ///< below, right, inside[:CORNER] or none
  std::string colour_map;           ///< viridis, rdbu or greys; empty: the heatmap kind's own
  std::string head_order;           ///< --head-order: index or cluster; empty: index
  std::string style_file;           ///< a style file's path (parse_style_file), or empty
};

/// The ranges plot_options() and png_dpi() accept (the command line's parser checks them first).
inline constexpr double kMinFigureInches = 0.5;
inline constexpr double kMaxFigureInches = 100;
inline constexpr double kMinFontPoints = 4;
inline constexpr double kMaxFontPoints = 48;
inline constexpr int kMaxPanelColumns = 1000;
inline constexpr int kMinPngDpi = 10;
inline constexpr int kMaxPngDpi = 2400;
/// The resolution of PNG figures unless told otherwise: print quality.
inline constexpr int kDefaultPngDpi = 300;

/// The PlotOptions of `settings` (reading the style file). Throws kvrank::Error naming the
/// option (as --width, --ylim …) for a value out of range or not understood.
PlotOptions plot_options(const FigureSettings& settings);

/// settings.dpi, checked, or kDefaultPngDpi.
int png_dpi(const FigureSettings& settings);

/// The figure file formats, chosen by the output's extension (any case).
enum class FigureFormat { svg, png, pdf };

/// ".svg", ".png" or ".pdf" in any case; throws kvrank::Error naming `path` otherwise.
FigureFormat figure_format(const std::string& path);

/// "column" (3.5 in wide, 8 pt: one column of a two-column paper) or "page" (7 in, 9 pt: the full
/// text width); sets width_in and font_pt. Throws kvrank::Error for any other name.
void apply_size_preset(PlotOptions& options, std::string_view preset);

/// "LOW,HIGH" with LOW < HIGH, both finite, HIGH − LOW finite (a wider range has no coordinates
/// in a double) and at least 1e-9 of their size (closer limits have no distinct ticks); throws
/// kvrank::Error otherwise.
std::pair<double, double> parse_ylim(std::string_view text);

/// `--legend`: below, right, none, inside (the corner chosen from the data) or inside:CORNER, a
/// CORNER of legend_corner_name(). Throws kvrank::Error listing them for anything else.
struct LegendChoice {
  LegendPlace place = LegendPlace::below;
  std::optional<LegendCorner> corner{};
};
LegendChoice parse_legend(std::string_view text);
/// parse_legend(text).place.
LegendPlace parse_legend_place(std::string_view text);
/// "top-right", "top-left", "bottom-left", "bottom-right".
const char* legend_corner_name(LegendCorner corner);

/// "viridis", "rdbu" or "greys"; throws kvrank::Error naming --colour-map otherwise.
ColourMap parse_colour_map(std::string_view text);
const char* colour_map_name(ColourMap map);

/// A style file: a JSON object, label → {"colour": "#0072b2", "marker": "square", "dash":
/// "dashed"} (each key optional; "color" is accepted too). Throws kvrank::Error naming `file`, the
/// label and the field for an unknown key, colour, marker or dash.
std::map<std::string, SeriesStyle> parse_style_file(const nlohmann::json& document,
                                                    const std::string& file);

/// "index", "cluster": --head-order's names.
std::vector<std::string> head_order_names();

/// "circle", "square", "triangle", "diamond", "triangle-down", "pentagon", "hexagon", "star",
/// "plus", "cross": the default markers, in the order series get them.
const std::vector<std::string>& marker_names();

}  // namespace kvrank

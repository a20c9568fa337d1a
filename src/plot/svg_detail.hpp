// Private: the pieces the figures of svg.hpp share — the small SVG vocabulary (svg.cpp), the axes
// (axes.cpp), series styles and markers (styles.cpp) and the multi-panel line figure
// (figure.cpp); the rank curves live in curves.cpp, the training trajectories in steps.cpp, the
// similarity heatmaps in heatmap.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvrank/plot/svg.hpp"

namespace kvrank::plot_detail {

constexpr const char* kFont = "DejaVu Sans, Helvetica, Arial, sans-serif";
constexpr const char* kTextColour = "#262626";
constexpr const char* kBaselineColour = "#7f7f7f";
constexpr const char* kBaselineLabel = "Fully redundant";
/// SVG user units per inch: the CSS pixel, as every SVG renderer reads unitless lengths.
constexpr double kUnitsPerInch = 96;

// ---------------------------------------------------------------------------------------------
// Small SVG vocabulary (svg.cpp)
// ---------------------------------------------------------------------------------------------

/// A coordinate or length, with at most two decimals and no trailing zeros.
std::string num(double value);
std::string attr(const char* name, const std::string& value);
std::string attr(const char* name, double value);
std::string line(double x1, double y1, double x2, double y2, const std::string& style);

enum class Anchor { kStart, kMiddle, kEnd };

std::string text(double x, double y, const std::string& content, double size, Anchor anchor,
                 const std::string& extra = "");
/// The <svg> element of a width × height (user units) figure, its physical size in inches
/// (kUnitsPerInch), so that PNG and PDF renderers give it its size at any resolution.
std::string document_open(double width, double height);
/// The width of a text in DejaVu Sans (the figures' first font, and the widest of the list): the
/// font's advance widths for ASCII, a little more than its widest letters for the rest (1 em for
/// the wide East Asian characters). Bold text is about 10 % wider.
double text_width(const std::string& content, double size, bool bold = false);

/// The most labels a message lists (quoted_list).
inline constexpr std::size_t kListedLabels = 8;
/// "\"a\", \"b\"", each name an excerpt, at most `most` of them and then "and N more".
std::string quoted_list(const std::vector<std::string>& names, std::size_t most);

// ---------------------------------------------------------------------------------------------
// Axes (axes.cpp)
// ---------------------------------------------------------------------------------------------

struct Axis {
  double low = 0;
  double high = 1;
  std::vector<double> ticks;
  int decimals = 0;                      ///< of fixed-point tick labels
  std::optional<int> scientific_digits;  ///< set: labels like 1.5e-7, with this many decimals
  std::vector<std::string> labels;       ///< integer axes: each tick's exact label

  double fraction(double value) const { return (value - low) / (high - low); }
  /// The label of ticks[i].
  std::string label(std::size_t i) const;
};

/// Matplotlib-like limits (data ± 5 %) and "nice" ticks (1, 2, 2.5, 5 × 10^k) inside them.
Axis value_axis(double data_min, double data_max, int target_ticks);
/// Limits exactly low and high (low < high), nice ticks inside them.
Axis exact_axis(double low, double high, int target_ticks);
/// Integer axis (layers, steps): limits 5 % beyond the first and last value, at most `most_ticks`
/// integer ticks (2 to 10). Values a double cannot tell apart (steps near 2^63) get one tick.
Axis integer_axis(std::int64_t first, std::int64_t last, int most_ticks = 10);
std::string tick_label(double value, int decimals);

// ---------------------------------------------------------------------------------------------
// Series styles and markers (styles.cpp)
// ---------------------------------------------------------------------------------------------

/// What the default style of a series depends on: its label and, for models, the variant (the
/// paper's variants keep the paper's colour order).
struct SeriesKey {
  std::string label;
  std::string variant;
  std::optional<int> lrkv_rank;
};

/// Styles of `keys` (in order, labels distinct, no baseline): the user's style file first, then a
/// colour-blind-safe palette in the paper's order by variant (MHA blue, the smaller LRKV rank
/// orange, the larger green, MQA vermillion, MLA purple, GQA brown), others in order of
/// appearance; a distinct marker per palette colour; never the baseline's grey.
std::map<std::string, SeriesStyle> model_styles(const std::vector<SeriesKey>& keys,
                                                const PlotOptions& options);
/// Styles of ordered series (layers 0…L-1): viridis colours from dark to light, distinct markers.
std::map<std::string, SeriesStyle> sequential_styles(const std::vector<std::string>& labels,
                                                     const PlotOptions& options);
/// A marker of `shape` (marker_names()) centred at (x, y): <path class="marker" data-shape=…>.
std::string marker_svg(const std::string& shape, double x, double y, double radius,
                       const std::string& colour);
/// The stroke-dasharray attribute of a dash style ("" for solid).
std::string dash_attribute(const std::string& dash);

/// A heatmap's colours: `map` over [low, high], values outside in the end colours
/// (colour_maps.cpp).
struct ColourScale {
  ColourMap map = ColourMap::viridis;
  double low = 0, high = 1;

  std::string colour(double value) const;  ///< "#rrggbb"
  bool dark(double value) const;           ///< white text reads better on it than black
  /// A bottom-to-top <linearGradient id=…> of the map, for a colour bar.
  std::string gradient(const std::string& id) const;
};

/// Viridis, t in [0, 1] → "#rrggbb".
std::string viridis(double t);

/// The colours of every similarity heatmap (heatmap.cpp; diff_heatmap.cpp): `map` (empty: rdbu)
/// over [-1, 1] for rdbu; viridis and greys over [0, 1], where negative cosines take 0's colour.
ColourScale similarity_scale(std::optional<ColourMap> map);

/// A similarity heatmap's vertical colour bar of `scale` at (left, top), `height` tall, five ticks
/// and `label` beside it; the lowest tick reads "≤ …" when some value was `clipped` to it. `size`
/// scales its width and text (1: 11-unit ticks, as at the default --font-size).
std::string similarity_colour_bar(const ColourScale& scale, bool clipped, double left, double top,
                                  double height, const std::string& label, double size = 1);

// ---------------------------------------------------------------------------------------------
// Multi-panel line figure (figure.cpp, grid.cpp)
// ---------------------------------------------------------------------------------------------

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  ///< (x, y); a non-finite y breaks the line
  SeriesStyle style;                              ///< resolved; unused for the baseline
  bool baseline = false;                          ///< drawn dashed grey, legend entry last
};

struct LinePanel {
  std::string title;
  std::string source;  ///< named in errors
  std::vector<Series> series;
  std::string x_label;
  std::string y_label;
  std::string y_name;        ///< the metric's name, in errors
  bool line_at_one = false;  ///< draw the fully-redundant line when no baseline series is drawn
};

struct Fonts {
  double label, tick, title, legend, figure_title;
};
Fonts fonts_for(const PlotOptions& options);
/// The width of series lines for these fonts.
double line_width(const Fonts& fonts);

/// A panel's plot area and axes, mapping values to SVG units.
struct Frame {
  double left = 0, top = 0, width = 0, height = 0;
  Axis x, y;

  double px(double value) const { return left + x.fraction(value) * width; }
  double py(double value) const { return top + (1 - y.fraction(value)) * height; }
};

/// A panel title fitted to the width over its panel (fit_title): its lines and font size.
struct TitleLayout {
  std::vector<std::string> lines;  ///< none for an empty title
  double size = 0;
};

/// `title` no wider than `width`: one line at `size` when it fits; else two lines broken at the
/// space (or after a '-', '_' or '/') that balances them, at `size` or as much smaller as they
/// need, down to `min_size`; else cut with "…" at `min_size`. Never wider than `width`.
TitleLayout fit_title(const std::string& title, double size, double min_size, double width);
/// Panel titles fitted to `width` (fit_title, down to 0.75 of the title font) (grid.cpp).
std::vector<TitleLayout> fit_titles(const std::vector<std::string>& titles, const Fonts& fonts,
                                    double width);
/// The room above the plots that the titles need (a little for the top tick label when none).
double title_room(const std::vector<TitleLayout>& titles, const Fonts& fonts);
/// <text class="panel-title"> per line, centred on `centre`, the last line just above the frame.
std::string title_svg(const TitleLayout& title, double centre, double frame_top,
                      const Fonts& fonts);

// ---------------------------------------------------------------------------------------------
// Legend (legend.cpp)
// ---------------------------------------------------------------------------------------------

struct LegendEntry {
  std::string label;
  SeriesStyle style;
  bool baseline = false;
};

/// Every series label of the panels once, in order of appearance; the fully-redundant entry last.
std::vector<LegendEntry> legend_entries(const std::vector<LinePanel>& panels);

struct LegendBox {
  int columns = 1;
  double column_width = 0, row_height = 0, width = 0, height = 0;
};

/// The legend's size: as many columns as fit `available` units, or one.
LegendBox legend_box(const std::vector<LegendEntry>& entries, const Fonts& fonts, double available,
                     bool one_column);
/// <g class="legend" `extra`> with its box at (left, top) and one <g class="legend-entry"> each.
std::string legend_svg(const std::vector<LegendEntry>& entries, const LegendBox& box, double left,
                       double top, const Fonts& fonts, const std::string& extra = "");

/// Where `--legend inside` goes: a panel, a corner of it, the box's top-left point, and how many
/// drawn points it covers.
struct InsideLegend {
  std::size_t panel = 0;
  LegendCorner corner = LegendCorner::top_right;
  double left = 0, top = 0;
  std::size_t covered = 0;
};

/// `corner` of the first panel when given; else the corner (of the first panel that has one free,
/// else of any) covering the fewest of the `drawn` points of its panel (SVG units; within
/// `margin` of the box counts), ties in matplotlib's order: top-right, top-left, bottom-left,
/// bottom-right. `inset`: the gap between the box and the frame.
InsideLegend place_inside_legend(const std::vector<Frame>& frames,
                                 const std::vector<std::vector<std::pair<double, double>>>& drawn,
                                 const LegendBox& box, std::optional<LegendCorner> corner,
                                 double inset, double margin);

/// The title of the panels of a figure's only file: its own, or none under a figure title when it
/// is the file's name (the figure's title names it then, not its file name once more) (grid.cpp).
std::string file_title(const Panel& panel, const PlotOptions& options);
/// "NAME (repr)", or the representation alone when there is no name.
std::string with_repr(const std::string& name, const std::string& repr);

/// Panels in a row or grid, one legend for all: the curves and trajectory figures.
std::string line_figure_svg(const std::vector<LinePanel>& panels, const PlotOptions& options);

/// A figure's size from options: what is given in inches, the rest from the content.
struct PanelGrid {
  int columns = 1, rows = 1;
  double pad = 8, title_band = 0;
  double margin_left = 0, margin_right = 0, margin_top = 0, margin_bottom = 0;
  /// Left of the panels after the first column; negative: margin_left (shared y axes need room
  /// for tick labels in the first column only).
  double inner_margin_left = -1;
  double plot_width = 0, plot_height = 0;
  double right_band = 0;   ///< legend or colour bar right of the panels
  double bottom_band = 0;  ///< legend below the panels
  double width = 0, height = 0;

  double panel_left(std::size_t i) const;
  double panel_top(std::size_t i) const;
  double inner_left() const { return inner_margin_left < 0 ? margin_left : inner_margin_left; }
};

/// Fills in columns, rows, plot_width, plot_height, bottom_band, width and height from the
/// margins and right band already set, the options' size (inches) and `default_plot_width`
/// (units) when no width is given; `bottom_band_for` gives the band below the panels for a figure
/// width. Throws kvrank::Error when a given size leaves a panel smaller than 30 units.
void size_grid(PanelGrid& grid, std::size_t panels, const PlotOptions& options,
               double default_plot_width, const std::function<double(double)>& bottom_band_for);

/// The whole document of a figure: the <svg> element of the grid's size, the figure title (if
/// any) in the grid's title band, then `body`.
std::string figure_document(const PanelGrid& grid, const PlotOptions& options, const Fonts& fonts,
                            const std::string& body);

}  // namespace kvrank::plot_detail

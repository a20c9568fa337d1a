// The panel grid of the figures (svg_detail.hpp): fonts, the figure's size from its panels or its
// panels' size from the figure, the figure title, and panel titles fitted over their panels.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "kvrank/base/error.hpp"
#include "plot/svg_detail.hpp"

namespace kvrank::plot_detail {

Fonts fonts_for(const PlotOptions& options) {
  const double size = options.font_pt * kUnitsPerInch / 72;  // points → user units
  return {size, 0.85 * size, 1.05 * size, 0.9 * size, 1.2 * size};
}

double line_width(const Fonts& fonts) { return std::max(1.0, 1.8 * fonts.label / 13.33); }

double PanelGrid::panel_left(std::size_t i) const {
  const auto column = static_cast<double>(i % static_cast<std::size_t>(columns));
  return pad + margin_left + column * (plot_width + margin_right + inner_left());
}

double PanelGrid::panel_top(std::size_t i) const {
  const auto row = static_cast<double>(i / static_cast<std::size_t>(columns));
  return title_band + pad + row * (margin_top + plot_height + margin_bottom) + margin_top;
}

void size_grid(PanelGrid& grid, std::size_t panels, const PlotOptions& options,
               double default_plot_width, const std::function<double(double)>& bottom_band_for) {
  const std::size_t wanted =
      options.columns > 0 ? static_cast<std::size_t>(options.columns) : panels;
  grid.columns =
      static_cast<int>(std::clamp<std::size_t>(wanted, 1, std::max<std::size_t>(panels, 1)));
  grid.rows = static_cast<int>((panels + static_cast<std::size_t>(grid.columns) - 1) /
                               static_cast<std::size_t>(grid.columns));
  const auto columns = static_cast<double>(grid.columns);
  const auto rows = static_cast<double>(grid.rows);
  // Everything across but the plots: the first column's margin, the others', the right margins.
  const double margins = grid.margin_left + (columns - 1) * grid.inner_left() +
                         columns * grid.margin_right + 2 * grid.pad + grid.right_band;
  if (options.width_in > 0) {
    grid.width = options.width_in * kUnitsPerInch;
    grid.plot_width = (grid.width - margins) / columns;
  } else {
    grid.plot_width = default_plot_width;
    grid.width = margins + columns * grid.plot_width;
  }
  grid.bottom_band = bottom_band_for(grid.width);
  const double vertical = grid.margin_top + grid.margin_bottom;
  if (options.height_in > 0) {
    grid.height = options.height_in * kUnitsPerInch;
    grid.plot_height =
        (grid.height - grid.title_band - grid.bottom_band - 2 * grid.pad) / rows - vertical;
  } else {
    grid.plot_height =
        options.width_in > 0 ? std::clamp(0.72 * grid.plot_width, 60.0, 420.0) : 300.0;
    grid.height =
        grid.title_band + 2 * grid.pad + rows * (vertical + grid.plot_height) + grid.bottom_band;
  }
  if (grid.plot_width < 30 || grid.plot_height < 30) {
    char size[160];
    std::snprintf(size, sizeof size,
                  "a %.2f × %.2f in figure leaves %.2f × %.2f in per plot for %zu panel(s) in "
                  "%d row(s): give a larger --width/--height, a smaller --font-size or --cols",
                  grid.width / kUnitsPerInch, grid.height / kUnitsPerInch,
                  std::max(0.0, grid.plot_width) / kUnitsPerInch,
                  std::max(0.0, grid.plot_height) / kUnitsPerInch, panels, grid.rows);
    throw Error("", size);
  }
}

std::string figure_document(const PanelGrid& grid, const PlotOptions& options, const Fonts& fonts,
                            const std::string& body) {
  std::string out = document_open(grid.width, grid.height);
  if (!options.title.empty()) {
    // A title wider than the figure shrinks to fit (to 0.6 of its size, no further).
    const double available = grid.width - 2 * grid.pad;
    const double natural = text_width(options.title, fonts.figure_title, true);
    const double size =
        fonts.figure_title * std::clamp(available / std::max(natural, 1.0), 0.6, 1.0);
    out += text(grid.width / 2, grid.pad + 1.3 * fonts.figure_title, options.title, size,
                Anchor::kMiddle, attr("class", "figure-title") + attr("font-weight", "bold"));
  }
  return out + body + "</svg>\n";
}

// ---------------------------------------------------------------------------------------------
// Panel titles
// ---------------------------------------------------------------------------------------------

std::string file_title(const Panel& panel, const PlotOptions& options) {
  const bool file_name = panel.title == std::filesystem::path(panel.source).stem().string();
  return !options.title.empty() && file_name ? "" : panel.title;
}

std::string with_repr(const std::string& name, const std::string& repr) {
  return name.empty() ? repr : name + " (" + repr + ")";
}

std::vector<TitleLayout> fit_titles(const std::vector<std::string>& titles, const Fonts& fonts,
                                    double width) {
  const double smallest = 0.75 * fonts.title;
  double size = fonts.title;
  for (const std::string& title : titles) {
    if (!title.empty()) size = std::min(size, fit_title(title, fonts.title, smallest, width).size);
  }
  // One size for all, as a paper sets them: the size the longest title needed.
  std::vector<TitleLayout> layouts;
  for (const std::string& title : titles)
    layouts.push_back(fit_title(title, size, smallest, width));
  return layouts;
}

double title_room(const std::vector<TitleLayout>& titles, const Fonts& fonts) {
  double room = 0.9 * fonts.tick;  // no title: the upper half of the top tick label
  for (const TitleLayout& title : titles) {
    if (title.lines.empty()) continue;
    const auto extra_lines = static_cast<double>(title.lines.size() - 1);
    room = std::max(room, 0.75 * fonts.title + (extra_lines * 1.2 + 1.15) * title.size);
  }
  return room;
}

std::string title_svg(const TitleLayout& title, double centre, double frame_top,
                      const Fonts& fonts) {
  std::string out;
  const std::size_t lines = title.lines.size();
  for (std::size_t i = 0; i < lines; ++i) {
    const double baseline =
        frame_top - 0.75 * fonts.title - static_cast<double>(lines - 1 - i) * 1.2 * title.size;
    out += text(centre, baseline, title.lines[i], title.size, Anchor::kMiddle,
                attr("class", "panel-title"));
  }
  return out;
}

}  // namespace kvrank::plot_detail

// PNG and PDF figures: the SVG rendered by rsvg-convert (librsvg2-bin), the renderer matplotlib
// users know from Inkscape/GNOME, run as a child process.
#pragma once

#include <string>

#include "kvrank/base/atomic_file.hpp"
#include "kvrank/plot/figure_options.hpp"

namespace kvrank {

/// Renders `svg` as PNG (at `dpi` pixels per inch of the figure's size) or PDF (a page of the
/// figure's size) into `output`; `format` must not be FigureFormat::svg. rsvg-convert is spawned
/// with a fixed argument vector, never through a shell, and sees no file name: the SVG comes in
/// on its standard input from an unnamed temporary file, the figure goes out on its standard
/// output straight into `output` (so no intermediate `.svg` is written, and none is overwritten).
/// Throws kvrank::Error naming the output when rsvg-convert is missing or fails (with the first
/// line it printed).
void render_figure(const std::string& svg, FigureFormat format, int dpi, OutputFile& output);

}  // namespace kvrank

// Figures as SVG, written by a small SVG writer of our own (no plotting dependency).
//
// plot_curves_svg: one panel per input file and representation (a file holding `--repr qk,k`
// gives a "(qk)" and a "(k)" panel), in one row or a grid of `columns`; in each, x = layer,
// y = the metric, one line per model with its own colour, marker and dash, a legend, ticks and
// axis labels, and the fully-redundant baseline as a dashed grey line at 1.0 (like the seed
// figure). plot_steps_svg: from one result over training checkpoints, the metric against the
// training step — one line per layer, or per run for the mean over layers — or a layers × steps
// heatmap. plot_heatmap_svg: one layer's H×H similarity matrix with a colour bar. The look
// (size, fonts, grid, y range, legend, series styles) is figure_options.hpp's. All text is
// XML-escaped.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvrank/plot/figure_options.hpp"
#include "kvrank/report/result_model.hpp"

namespace kvrank {

struct Panel {
  std::string title;  ///< e.g. the input file name
  std::vector<ModelReport> models;
  std::string source;  ///< the file the models came from, named in errors
};

/// `--panel-title`: titles[i] replaces the title of panels[i]. Throws kvrank::Error unless there
/// are none or one per panel.
void apply_panel_titles(std::vector<Panel>& panels, const std::vector<std::string>& titles);

/// One panel per input and representation. Under options.title, a single input titled by its
/// file name (the stem of its source) gives up that title to the figure's. A file holding one
/// label and representation at several training steps draws one series per step, "LABEL (step
/// N)". Throws kvrank::Error naming the panel's source for two models of one label,
/// representation and step, and for values too far apart to draw; and for a figure size too
/// small for its panels. Any finite values and layer indices give a bounded figure.
std::string plot_curves_svg(const std::vector<Panel>& panels, const PlotOptions& options);

/// What plot_steps_svg draws: `layers`, one panel per run and representation with one line per
/// layer; `mean`, one panel per representation with one line per run (the mean over layers);
/// `heatmap`, one layers × steps map per run and representation.
enum class StepPlot { layers, mean, heatmap };

StepPlot parse_step_plot(std::string_view text);
/// The kinds' names, in the enum's order (--over-steps' choices).
std::vector<std::string> step_plot_names();

/// The figures over training steps draw one result (its runs told apart by their labels): throws
/// the usage error for `inputs` other than 1.
void check_step_plot_inputs(std::size_t inputs);

/// The models of `panel` grouped into runs (report/training_run.hpp) and ordered by step. Throws
/// kvrank::Error naming the source when a model has no step (analyze it with --step, or from
/// checkpoint-N folders) or a run holds two checkpoints of one step.
std::string plot_steps_svg(const Panel& panel, StepPlot kind, const PlotOptions& options);

/// The model `--model LABEL` names: the first with that label (the first of all when `label` is
/// empty). Throws kvrank::Error naming `file` and listing the labels it holds (the first 8, each
/// an excerpt) when there is none.
const ModelReport& heatmap_model(const std::vector<ModelReport>& models, const std::string& label,
                                 const std::string& file);

/// One layer's H × H similarity matrix with a colour bar: options.title (default: label, layer
/// and representation) and options.colour_map (default rdbu over [-1, 1] for every model and
/// representation; viridis or greys over [0, 1], negative cosines in 0's colour and the colour
/// bar's lowest label "≤ 0.00"). Throws kvrank::Error
/// when the model has no such layer (listing the layers it has) or the layer has no similarity
/// matrix (analyze with --similarity).
std::string plot_heatmap_svg(const ModelReport& model, int layer, const PlotOptions& options);
/// The same with default options but the title.
std::string plot_heatmap_svg(const ModelReport& model, int layer, const std::string& title);

/// Escapes &, <, >, " and ' for XML text and attributes, tab and line breaks as character
/// references (so attributes keep them); characters XML 1.0 does not allow (C0 controls, U+FFFE,
/// U+FFFF) and bytes that are not UTF-8 become U+FFFD, so the document is always well-formed.
std::string xml_escape(std::string_view text);

}  // namespace kvrank

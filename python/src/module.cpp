// kvrank._kvrank: the C++ library for Python (docs/python.md), a thin adapter over the application
// layer (kvrank/app/): Python arguments converted to a request, the request run, the result handed
// back as the JSON/CSV/SVG text that python/kvrank/ turns into dicts, DataFrames and figures. The
// work, and every check of the inputs, is the application layer's or the library's below it.
//
// The GIL is released while the library computes; between layers it is taken back briefly to let
// Python see Ctrl-C (PyErr_CheckSignals) and to call a progress callback.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvrank/app/commands.hpp"
#include "kvrank/app/requests.hpp"
#include "kvrank/base/error.hpp"    // kvrank::Error, registered as kvrank.Error
#include "kvrank/base/version.hpp"  // __version__
#include "memory_tensors.hpp"

namespace py = pybind11;

namespace {

using kvrank::app::kInMemory;
using kvrank_python::MemoryTensor;

/// What an analysis returns: its ModelReports and whether the JSON carries the similarities.
struct Results {
  std::vector<kvrank::ModelReport> models;
  bool similarity = false;

  std::string text(kvrank::app::ResultFormat format, bool summary = false) const {
    return kvrank::app::format_results(models, format, similarity, summary);
  }
};

/// The options `analyze` and `inspect` share with the command line's --family … --activations:
/// the application layer's (kvrank/app/requests.hpp), field for field.
using Layout = kvrank::app::LayoutRequest;

using Progress = std::function<void(const std::string& label, int done, int total)>;

/// Raises KeyboardInterrupt (through the library, which returns nothing half-done) after Ctrl-C.
void check_signals() {
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

/// The options of the command line's analyze that select what is measured (--repr …
/// --layer-shard), as the module takes them.
struct Selection {
  std::string reprs;  ///< a comma list, as --repr takes it
  std::optional<std::string> layers;
  std::optional<std::string> layer_shard;
  std::optional<std::string> attention;  ///< unset: the request's (all)
};

/// The command line's analyze request, from the module's arguments (the results keep each
/// head's own rank, as the JSON result does); an option left unset keeps the request's default.
kvrank::app::AnalyzeRequest analyze_request(const Selection& selection, const Layout& layout,
                                            bool similarity, std::optional<int> threads) {
  kvrank::app::AnalyzeRequest request;
  request.reprs = kvrank::app::parse_repr_list(selection.reprs);
  if (selection.attention) request.attention = kvrank::parse_attention_choice(*selection.attention);
  if (selection.layers) request.layers = kvrank::parse_layer_list(*selection.layers);
  if (selection.layer_shard) request.shard = kvrank::parse_layer_shard(*selection.layer_shard);
  request.format = kvrank::app::ResultFormat::json;
  request.similarity = similarity;
  if (threads) request.threads = *threads;
  request.layout = layout;
  return request;
}

using Note = std::function<void(const std::string&)>;

/// Runs `work` without the GIL, with hooks that collect the notes (handed to `note` once the GIL
/// is back), let Ctrl-C through, and report each layer to `progress` (with the GIL) under the
/// label of the model being analysed.
std::vector<kvrank::ModelReport> run_analysis(
    const Progress& progress, const Note& note,
    const std::function<std::vector<kvrank::ModelReport>(const kvrank::app::Hooks&)>& work) {
  std::vector<std::string> notes;
  kvrank::app::Hooks hooks;
  hooks.info = [&notes](const std::string& message) { notes.push_back(message); };
  hooks.check_cancelled = check_signals;
  std::string label;  // of the model being analysed
  hooks.model_started = [&label](std::size_t, std::size_t, const std::string& started) {
    label = started;
  };
  if (progress)
    hooks.layers_done = [&](int done, int total) {
      py::gil_scoped_acquire gil;
      progress(label, done, total);
    };
  std::vector<kvrank::ModelReport> models;
  {
    py::gil_scoped_release released;
    models = work(hooks);
  }
  if (note)
    for (const std::string& message : notes) note(message);
  return models;
}

Results analyze(const std::vector<std::string>& arguments, const std::vector<std::string>& labels,
                const std::vector<std::int64_t>& steps, const std::vector<std::string>& runs,
                const Selection& selection, bool similarity, bool with_baseline,
                std::optional<int> threads, const Layout& layout, const Progress& progress,
                const Note& note) {
  kvrank::app::AnalyzeRequest request = analyze_request(selection, layout, similarity, threads);
  request.inputs = arguments;
  request.labels = labels;
  request.steps = steps;
  request.runs = runs;
  request.with_baseline = with_baseline;
  request.validate();  // before any input is read
  return {run_analysis(progress, note,
                       [&](const kvrank::app::Hooks& hooks) {
                         return kvrank::app::analyze(request, hooks).models;
                       }),
          similarity};
}

Results analyze_state_dict(const std::vector<MemoryTensor>& tensors,
                           const std::optional<std::string>& config_json, const std::string& label,
                           std::optional<std::int64_t> step, const std::optional<std::string>& run,
                           const Selection& selection, bool similarity, std::optional<int> threads,
                           const Layout& layout, const Progress& progress, const Note& note) {
  kvrank::app::AnalyzeRequest request = analyze_request(selection, layout, similarity, threads);
  request.inputs = {kInMemory};
  request.labels = {label};
  if (step) request.steps = {*step};
  if (run) request.runs = {*run};
  request.validate();                    // before a tensor is looked at
  std::vector<py::buffer_info> buffers;  // hold the caller's buffers until the views are done
  std::vector<kvrank::TensorView> views = kvrank_python::memory_views(tensors, buffers);
  return {run_analysis(progress, note,
                       [&](const kvrank::app::Hooks& hooks) {
                         return kvrank::app::analyze_in_memory(request, std::move(views),
                                                               config_json, hooks);
                       }),
          similarity};
}

std::string inspect_json(const std::vector<std::string>& arguments, const Layout& layout) {
  const kvrank::app::InspectRequest request{arguments, true, layout};
  py::gil_scoped_release released;
  return kvrank::app::inspect_text(request);
}

/// `check`: the violations, each as (label, repr, layer, metric, golden, current), and their table
/// (metrics and abs_tol unset: the request's defaults).
py::tuple check(const Results& current, const Results& golden,
                const std::optional<std::string>& metrics, std::optional<double> abs_tol,
                std::optional<double> rel_tol, const std::string& current_name,
                const std::string& golden_name) {
  kvrank::app::CheckRequest request;
  request.current = current_name;
  request.golden = golden_name;
  if (metrics) request.options.metrics = kvrank::app::parse_metric_list(*metrics);
  if (abs_tol) request.options.abs_tol = *abs_tol;
  request.options.rel_tol = rel_tol;
  const kvrank::app::CheckOutcome outcome =
      kvrank::app::check(request, current.models, golden.models);
  py::list rows;
  for (const kvrank::Violation& v : outcome.violations)
    rows.append(py::make_tuple(v.label, v.repr, v.layer, std::string(kvrank::curve_name(v.metric)),
                               v.golden, v.current));
  return py::make_tuple(rows, outcome.table);
}

/// `kvrank plot`'s figure as SVG: `panels` are (title, results) pairs, the title also naming the
/// source in errors.
std::string plot_svg(const std::vector<std::pair<std::string, Results>>& panels,
                     const std::vector<std::string>& panel_titles,
                     const kvrank::FigureSettings& settings, const std::string& over_steps,
                     std::optional<int> heatmap_layer, const std::string& heatmap_model) {
  kvrank::app::PlotRequest request;
  for (const auto& [name, results] : panels) request.panels.push_back({name, results.models, name});
  request.panel_titles = panel_titles;
  request.figure = settings;
  request.over_steps = over_steps;
  request.heatmap_layer = heatmap_layer;
  request.heatmap_model = heatmap_model;
  return kvrank::app::plot_svg(request);
}

/// `kvrank diff A B --format json` (and with `figure`, its heatmap written there); top unset: the
/// request's default.
std::string diff_json(const std::string& a, const std::string& b,
                      const std::vector<std::string>& labels, const Selection& selection,
                      std::optional<int> top, const Layout& layout, const std::string& figure,
                      const std::string& colour_map) {
  const kvrank::app::AnalyzeRequest analyze =
      analyze_request(selection, layout, false, std::nullopt);
  kvrank::app::DiffRequest request;
  request.a = a;
  request.b = b;
  request.labels = labels;
  request.reprs = analyze.reprs;
  request.attention = analyze.attention;
  request.layers = analyze.layers;
  request.format = kvrank::app::ResultFormat::json;
  if (top) request.top = *top;
  request.figure = figure;
  request.colour_map = colour_map;
  request.layout = layout;
  py::gil_scoped_release released;
  return kvrank::app::diff_text(request, {});
}

}  // namespace

namespace kvrank::python {
void add_plan_bindings(py::module_& m);  // plan_binding.cpp
}

PYBIND11_MODULE(_kvrank, m) {
  m.doc() = "kvrank's C++ library (use the kvrank package, not this module)";
  m.attr("__version__") = std::string(kvrank::version());
  py::register_exception<kvrank::Error>(m, "Error");
  kvrank::python::add_plan_bindings(m);

  py::class_<Results>(m, "Results")
      .def(py::init<>())  // none yet (a Tracker before its first measurement)
      .def(py::init([](const Results& a, const Results& b) {
        Results joined = a;
        joined.models.insert(joined.models.end(), b.models.begin(), b.models.end());
        joined.similarity = a.similarity && b.similarity;
        return joined;
      }))
      .def_static("read",
                  [](const std::string& path) {
                    return Results{kvrank::app::read_results(path), true};
                  })
      .def("json_text", [](const Results& r) { return r.text(kvrank::app::ResultFormat::json); })
      .def(
          "csv_text",
          [](const Results& r, bool summary, bool tabs) {
            return r.text(tabs ? kvrank::app::ResultFormat::tsv : kvrank::app::ResultFormat::csv,
                          summary);
          },
          py::arg("summary"), py::arg("tabs"))
      .def("table_text", [](const Results& r) { return r.text(kvrank::app::ResultFormat::table); })
      .def("labels", [](const Results& r) {
        std::vector<std::string> labels;
        for (const auto& model : r.models) labels.push_back(model.label);
        return labels;
      });

  py::class_<Layout>(m, "Layout")
      .def(py::init<>())
      .def_readwrite("family", &Layout::family)
      .def_readwrite("heads", &Layout::heads)
      .def_readwrite("kv_heads", &Layout::kv_heads)
      .def_readwrite("head_dim", &Layout::head_dim)
      .def_readwrite("map_file", &Layout::map_file)
      .def_readwrite("npy_bf16", &Layout::npy_bf16)
      .def_readwrite("activations", &Layout::activations)
      .def_readwrite("fold_input_norm", &Layout::fold_input_norm);

  py::class_<Selection>(m, "Selection")
      .def(py::init<>())
      .def_readwrite("reprs", &Selection::reprs)
      .def_readwrite("layers", &Selection::layers)
      .def_readwrite("layer_shard", &Selection::layer_shard)
      .def_readwrite("attention", &Selection::attention);

  py::class_<kvrank::FigureSettings>(m, "FigureSettings")
      .def(py::init<>())
      .def_readwrite("metric", &kvrank::FigureSettings::metric)
      .def_readwrite("title", &kvrank::FigureSettings::title)
      .def_readwrite("size", &kvrank::FigureSettings::size)
      .def_readwrite("width", &kvrank::FigureSettings::width)
      .def_readwrite("height", &kvrank::FigureSettings::height)
      .def_readwrite("font_size", &kvrank::FigureSettings::font_size)
      .def_readwrite("dpi", &kvrank::FigureSettings::dpi)
      .def_readwrite("columns", &kvrank::FigureSettings::columns)
      .def_readwrite("share_y", &kvrank::FigureSettings::share_y)
      .def_readwrite("ylim", &kvrank::FigureSettings::ylim)
      .def_readwrite("legend", &kvrank::FigureSettings::legend)
      .def_readwrite("style_file", &kvrank::FigureSettings::style_file)
      .def_readwrite("colour_map", &kvrank::FigureSettings::colour_map)
      .def_readwrite("head_order", &kvrank::FigureSettings::head_order);

  m.def("analyze", &analyze, py::arg("arguments"), py::arg("labels"), py::arg("steps"),
        py::arg("runs"), py::arg("selection"), py::arg("similarity"), py::arg("with_baseline"),
        py::arg("threads"), py::arg("layout"), py::arg("progress"), py::arg("note"));
  m.def("analyze_state_dict", &analyze_state_dict, py::arg("tensors"), py::arg("config_json"),
        py::arg("label"), py::arg("step"), py::arg("run"), py::arg("selection"),
        py::arg("similarity"), py::arg("threads"), py::arg("layout"), py::arg("progress"),
        py::arg("note"));
  m.def("inspect_json", &inspect_json, py::arg("arguments"), py::arg("layout"));
  m.def("diff", &diff_json, py::arg("a"), py::arg("b"), py::arg("labels"), py::arg("selection"),
        py::arg("top"), py::arg("layout"), py::arg("figure"), py::arg("colour_map"));
  m.def("check", &check, py::arg("current"), py::arg("golden"), py::arg("metrics"),
        py::arg("abs_tol"), py::arg("rel_tol"), py::arg("current_name"), py::arg("golden_name"));
  m.def("plot_svg", &plot_svg, py::arg("panels"), py::arg("panel_titles"), py::arg("settings"),
        py::arg("over_steps"), py::arg("heatmap_layer"), py::arg("heatmap_model"));
  m.def(
      "save_figure",
      [](const std::string& svg, const std::string& output,
         const kvrank::FigureSettings& settings) {
        py::gil_scoped_release released;
        kvrank::app::save_figure(svg, output, settings);
      },
      py::arg("svg"), py::arg("output"), py::arg("settings"));
  m.def(
      "write_text",
      [](const std::string& content, const std::string& output) {
        py::gil_scoped_release released;
        kvrank::app::write_text(output, content);
      },
      py::arg("content"), py::arg("output"));
}

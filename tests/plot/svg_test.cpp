// Tests of svg.hpp. The SVG is parsed by Python's xml.etree (an independent XML parser), which
// reports the structure as JSON; the tests then check counts, labels and geometry.
#include "kvrank/plot/svg.hpp"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using nlohmann::json;

constexpr const char* kSummaryScript = R"PY(
import json, sys, xml.etree.ElementTree as ET
NS = '{http://www.w3.org/2000/svg}'
root = ET.parse(sys.argv[1]).getroot()   # raises on malformed XML
assert root.tag == NS + 'svg', root.tag
def cls(e): return e.get('class', '')
out = {'series': [], 'baselines': [], 'legend': [], 'panels': [], 'cells': [], 'texts': []}
for g in root.iter(NS + 'g'):
    if cls(g) == 'model':
        paths = [p for p in g.iter(NS + 'path') if cls(p) == 'series']
        markers = [[float(c.get('data-x')), float(c.get('data-y'))] for c in g.iter(NS + 'path')
                   if cls(c) == 'marker']
        out['series'].append({'label': g.get('data-label'), 'paths': len(paths),
                              'path_label': paths[0].get('data-label') if paths else None,
                              'd': paths[0].get('d') if paths else '', 'markers': markers})
    elif cls(g) == 'legend-entry':
        out['legend'].append(''.join(t.text or '' for t in g.iter(NS + 'text')))
    elif cls(g) == 'panel':
        out['panels'].append(g.get('data-title'))
for p in root.iter(NS + 'path'):
    if cls(p) == 'baseline':
        out['baselines'].append({'label': p.get('data-label'), 'd': p.get('d'),
                                 'dash': p.get('stroke-dasharray')})
for r in root.iter(NS + 'rect'):
    if cls(r) == 'cell':
        out['cells'].append({'x': float(r.get('x')), 'y': float(r.get('y')),
                             'fill': r.get('fill'), 'value': float(r.get('data-value'))})
out['texts'] = [t.text for t in root.iter(NS + 'text')]
out['all_series_paths'] = sum(1 for p in root.iter(NS + 'path') if cls(p) == 'series')
out['all_markers'] = sum(1 for g in root.iter(NS + 'g') if cls(g) == 'model'
                        for c in g.iter(NS + 'path') if cls(c) == 'marker')
json.dump(out, sys.stdout)
)PY";

/// Parses `svg` with xml.etree and returns the structure summary (fails the test on bad XML).
json parse_svg(const std::string& svg) {
  test::TempDir dir;
  test::write_file(dir / "figure.svg", svg);
  test::write_file(dir / "summary.py", kSummaryScript);
  const auto result =
      test::run_command(std::string(KVRANK_PYTHON) + " " + (dir / "summary.py").string() + " " +
                        (dir / "figure.svg").string());
  REQUIRE(result.exit_code == 0);
  return json::parse(result.out);
}

ModelReport model(const std::string& label, const std::string& variant, int layers, double start,
                  double slope) {
  ModelReport report;
  report.label = label;
  report.variant = variant;
  report.geometry.heads = 8;
  for (int i = 0; i < layers; ++i) {
    LayerMetrics layer;
    layer.layer = i;
    layer.heads = 8;
    layer.erank = variant == "baseline" ? 1.0 : start + slope * i;
    layer.erank_centered = layer.erank / 2;
    layer.erank_pct = 100 * layer.erank / 8;
    layer.erank_centered_pct = 100 * layer.erank_centered / 8;
    report.layers.push_back(layer);
  }
  return report;
}

const json& series_named(const json& summary, const std::string& label) {
  for (const json& series : summary["series"]) {
    if (series["label"] == label) return series;
  }
  FAIL("no series labelled " << label);
  throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("xml_escape escapes the five XML specials", "[svg]") {
  CHECK(xml_escape("a<b>&\"c\"'d'") == "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;");
  CHECK(xml_escape("plain — ü") == "plain — ü");
}

TEST_CASE("curves: one series path per model, markers per layer, baseline and legend", "[svg]") {
  const std::string tricky = "LRKV <r=16> & \"friends\" 'x'";
  Panel panel{"128M <scale>",
              {model("Standard MHA", "mha", 12, 4.0, -0.05), model(tricky, "lrkv", 12, 2.0, 0.3),
               model("MQA", "mqa", 5, 3.0, 0.1), model("Fully redundant", "baseline", 12, 1.0, 0)},
              ""};
  const json svg = parse_svg(plot_curves_svg({panel}, {}));
  CHECK(svg["all_series_paths"] == 3);
  CHECK(svg["all_markers"] == 12 + 12 + 5);
  REQUIRE(svg["series"].size() == 3);
  for (const json& series : svg["series"]) {
    CHECK(series["paths"] == 1);
    CHECK(series["path_label"] == series["label"]);
  }
  CHECK(series_named(svg, tricky)["markers"].size() == 12);
  CHECK(series_named(svg, "MQA")["markers"].size() == 5);
  // The baseline model is drawn as the dashed line, not as a coloured series.
  REQUIRE(svg["baselines"].size() == 1);
  CHECK(svg["baselines"][0]["label"] == "Fully redundant");
  CHECK(svg["baselines"][0]["dash"].is_string());
  CHECK(svg["legend"] == json::array({"Standard MHA", tricky, "MQA", "Fully redundant"}));
  CHECK(svg["panels"] == json::array({"128M <scale>"}));
  const auto& texts = svg["texts"];
  CHECK(std::find(texts.begin(), texts.end(), "Effective rank") != texts.end());
  CHECK(std::find(texts.begin(), texts.end(), "Layer") != texts.end());
}

TEST_CASE("curves: marker positions are a linear map of layer and value", "[svg]") {
  const ModelReport rising = model("rising", "mha", 12, 2.0, 0.25);
  const ModelReport falling = model("falling", "mha", 12, 5.0, -0.2);
  const json svg = parse_svg(plot_curves_svg({{"p", {rising, falling}, ""}}, {}));
  // Fit y = a + b·value on two markers of one model, then predict all markers of both.
  // Copies: GCC 14's -Wdangling-reference cannot see that the reference is into `svg`.
  const json r = series_named(svg, "rising")["markers"];
  const double b = (r[11][1].get<double>() - r[0][1].get<double>()) /
                   (rising.layers[11].erank - rising.layers[0].erank);
  const double a = r[0][1].get<double>() - b * rising.layers[0].erank;
  const double dx = r[1][0].get<double>() - r[0][0].get<double>();
  CHECK(b < 0);  // SVG y grows downwards: a larger rank is higher up
  CHECK(dx > 0);
  for (const auto& [report, name] : {std::pair{rising, "rising"}, std::pair{falling, "falling"}}) {
    const json markers = series_named(svg, name)["markers"];
    for (int i = 0; i < 12; ++i) {
      CHECK(markers[i][0].get<double>() == Approx(r[0][0].get<double>() + dx * i).margin(0.02));
      CHECK(markers[i][1].get<double>() == Approx(a + b * report.layers[i].erank).margin(0.02));
    }
  }
  // The automatic fully-redundant line lies at value 1.0 on the same scale.
  REQUIRE(svg["baselines"].size() == 1);
  const std::string d = svg["baselines"][0]["d"];
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  REQUIRE(std::sscanf(d.c_str(), "M%lf %lf L%lf %lf", &x1, &y1, &x2, &y2) == 4);
  CHECK(y1 == Approx(a + b * 1.0).margin(0.02));
  CHECK(y2 == y1);
  CHECK(x1 < r[0][0].get<double>());
  CHECK(x2 > r[11][0].get<double>());
}

TEST_CASE("curves: one panel per input, colours shared by label", "[svg]") {
  Panel small{"128M", {model("MHA", "mha", 12, 4, 0), model("MQA", "mqa", 12, 2, 0.1)}, ""};
  Panel large{"2.5B", {model("MQA", "mqa", 36, 6, 0.2), model("MHA", "mha", 36, 14, 0)}, ""};
  const std::string text = plot_curves_svg({small, large}, {.metric = Curve::erank, .title = "T"});
  const json svg = parse_svg(text);
  CHECK(svg["panels"] == json::array({"128M", "2.5B"}));
  CHECK(svg["all_series_paths"] == 4);
  CHECK(svg["all_markers"] == 12 + 12 + 36 + 36);
  CHECK(svg["baselines"].size() == 2);  // one fully-redundant line per panel
  CHECK(svg["legend"] == json::array({"MHA", "MQA", "Fully redundant"}));
  // The same label has the same stroke colour in both panels.
  const auto stroke_of = [&](std::size_t occurrence, const std::string& label) {
    std::size_t at = 0;
    for (std::size_t i = 0; i <= occurrence; ++i) {
      at = text.find("class=\"series\" data-label=\"" + label + "\"", at + 1);
    }
    const std::size_t stroke = text.find("stroke=\"", at);
    return text.substr(stroke + 8, 7);
  };
  CHECK(stroke_of(0, "MQA") == stroke_of(1, "MQA"));
  CHECK(stroke_of(0, "MHA") == stroke_of(1, "MHA"));
  CHECK(stroke_of(0, "MHA") != stroke_of(0, "MQA"));
}

TEST_CASE("curves: the fully-redundant line only for effective-rank metrics", "[svg]") {
  Panel panel{"p", {model("MHA", "mha", 6, 4, 0.1)}, ""};
  for (const char* metric : {"erank", "erank_centered"}) {
    const json svg =
        parse_svg(plot_curves_svg({panel}, {.metric = parse_curve(metric), .title = ""}));
    CHECK(svg["baselines"].size() == 1);
  }
  for (const char* metric : {"erank_pct", "erank_centered_pct", "mean_similarity", "pcs_90"}) {
    const json svg =
        parse_svg(plot_curves_svg({panel}, {.metric = parse_curve(metric), .title = ""}));
    CHECK(svg["baselines"].empty());
    CHECK(svg["legend"] == json::array({"MHA"}));
    CHECK(svg["all_markers"] == 6);
  }
  CHECK_THROWS_AS(plot_curves_svg({}, {}), Error);
}

TEST_CASE("heatmap: H×H cells coloured by value, head indices on the axes", "[svg]") {
  ModelReport report = model("stories <260K>", "gqa", 3, 6, 0);
  const int heads = 8;
  MatrixD similarity(heads, heads);
  for (int i = 0; i < heads; ++i) {
    for (int j = 0; j < heads; ++j) similarity(i, j) = i == j ? 1.0 : 0.1 * std::abs(i - j) - 0.3;
  }
  report.layers[1].similarity = similarity;
  const json svg = parse_svg(plot_heatmap_svg(report, 1, ""));
  REQUIRE(svg["cells"].size() == heads * heads);
  // Cells are laid out row by row; equal values get equal colours, the diagonal is one colour.
  for (int i = 0; i < heads; ++i) {
    for (int j = 0; j < heads; ++j) {
      const json& cell = svg["cells"][i * heads + j];
      CHECK(cell["value"].get<double>() == Approx(similarity(i, j)).margin(1e-6));
      CHECK(cell["fill"] == svg["cells"][j * heads + i]["fill"]);
      if (i == j) CHECK(cell["fill"] == svg["cells"][0]["fill"]);
    }
  }
  CHECK(svg["cells"][1]["fill"] != svg["cells"][2]["fill"]);
  const auto& texts = svg["texts"];
  CHECK(std::find(texts.begin(), texts.end(), "stories <260K> — layer 1 (qk)") != texts.end());
  CHECK(std::find(texts.begin(), texts.end(), "7") != texts.end());

  CHECK_THROWS_AS(plot_heatmap_svg(report, 7, ""), Error);
  try {
    plot_heatmap_svg(report, 0, "");
    FAIL("a layer without a similarity matrix must be an error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()).find("--similarity") != std::string::npos);
  }
}

TEST_CASE("heatmap: zero heads are skipped in the head labels", "[svg]") {
  ModelReport report = model("m", "mha", 1, 3, 0);
  report.layers[0].zero_heads = {1};
  report.layers[0].similarity = MatrixD::Identity(3, 3);  // heads 0, 2, 3 kept
  report.layers[0].similarity(0, 1) = report.layers[0].similarity(1, 0) = -0.001;
  const json svg = parse_svg(plot_heatmap_svg(report, 0, "custom title"));
  CHECK(svg["cells"].size() == 9);
  const auto& texts = svg["texts"];
  CHECK(std::find(texts.begin(), texts.end(), "custom title") != texts.end());
  CHECK(std::find(texts.begin(), texts.end(), "3") != texts.end());
  CHECK(std::count(texts.begin(), texts.end(), "1") == 0);
  // Cell annotations: -0.001 is shown as 0.00, never as "-0.00".
  CHECK(std::count(texts.begin(), texts.end(), "0.00") == 6);
  CHECK(std::count(texts.begin(), texts.end(), "-0.00") == 0);
}

}  // namespace kvrank

// ---- hostile result files: bounded ticks, validated ranges, well-formed XML on any input
// ----------

namespace kvrank {
namespace {

/// A model whose layers `layers` take the values `values` of erank and erank_pct.
ModelReport model_with(const std::vector<int>& layers, const std::vector<double>& values,
                       const std::string& label = "m") {
  ModelReport report = model(label, "mha", static_cast<int>(layers.size()), 1.0, 0.0);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    report.layers[i].layer = layers[i];
    report.layers[i].erank = report.layers[i].erank_pct = values[i];
  }
  return report;
}

std::size_t count_texts(const json& svg) { return svg["texts"].size(); }

}  // namespace

TEST_CASE("xml_escape keeps only characters XML 1.0 allows", "[svg]") {
  CHECK(xml_escape("a\x01"
                   "b\x1b[31m") ==
        "a\xef\xbf\xbd"
        "b\xef\xbf\xbd[31m");  // U+FFFD
  CHECK(xml_escape("bad \xff\xc0\xaf byte") == "bad \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd byte");
  CHECK(xml_escape("\xef\xbf\xbe") == "\xef\xbf\xbd");  // U+FFFE is not an XML character
  CHECK(xml_escape("tab\tline\ncr\r") == "tab&#9;line&#10;cr&#13;");  // kept in attributes too
  CHECK(xml_escape("\xf0\x9f\x98\x80 \xc2\x85") == "\xf0\x9f\x98\x80 \xc2\x85");
}

TEST_CASE("curves: values closer than double precision give a bounded axis", "[svg]") {
  for (const char* metric : {"erank", "erank_pct"}) {
    const Panel panel{"p", {model_with({0, 1}, {1e17, 1e17 + 32})}, "r.json"};
    const json svg =
        parse_svg(plot_curves_svg({panel}, {.metric = parse_curve(metric), .title = ""}));
    CHECK(count_texts(svg) < 60);
    for (const json& marker : svg["series"][0]["markers"])
      CHECK(std::isfinite(marker[1].get<double>()));
  }
}

TEST_CASE("curves: layer indices near INT_MAX give a bounded axis", "[svg]") {
  constexpr int kMax = std::numeric_limits<int>::max();
  const std::vector<std::vector<int>> cases = {{0, kMax}, {kMax - 1, kMax}, {-kMax - 1, kMax}};
  for (const auto& layers : cases) {
    const Panel panel{"p", {model_with(layers, {2.0, 3.0})}, "r.json"};
    const json svg = parse_svg(plot_curves_svg({panel}, {}));
    CHECK(count_texts(svg) < 60);
    REQUIRE(svg["series"][0]["markers"].size() == 2);
  }
}

TEST_CASE("curves: a value range wider than a double holds is an error naming the file", "[svg]") {
  const Panel panel{"p", {model_with({0, 1}, {1e308, -1e308})}, "dir/r.json"};
  try {
    plot_curves_svg({panel}, {.metric = Curve::erank_pct, .title = ""});
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) ==
          "dir/r.json: erank_pct values from -1e+308 to 1e+308 are too far apart to plot");
  }
  const Panel single{"p", {model_with({0}, {1e308})}, "r.json"};  // one huge value still plots
  CHECK(parse_svg(plot_curves_svg({single}, {}))["series"][0]["markers"].size() == 1);
}

TEST_CASE("curves and heatmap: control characters in names give well-formed XML", "[svg]") {
  const std::string evil = "m\x01\x1b[2J\xff\xef\xbf\xbe <&> \"'";
  const Panel panel{
      "t\x02"
      "itle",
      {model_with({0, 1}, {2.0, 3.0}, evil)},
      "r.json"};
  const json svg = parse_svg(plot_curves_svg({panel}, {.title = evil}));
  REQUIRE(svg["series"].size() == 1);
  const std::string replaced = "m\xef\xbf\xbd\xef\xbf\xbd[2J\xef\xbf\xbd\xef\xbf\xbd <&> \"'";
  CHECK(svg["series"][0]["label"] == replaced);
  CHECK(svg["panels"] == json::array({"t\xef\xbf\xbditle"}));

  ModelReport heat = model_with({0}, {2.0}, evil);
  heat.repr = "q\x1bk";
  heat.layers[0].similarity = MatrixD{{1.0, 0.5}, {0.5, 1.0}};
  CHECK(parse_svg(plot_heatmap_svg(heat, 0, ""))["cells"].size() == 4);
}

TEST_CASE("heatmap: a similarity outside [-1, 1] is an error", "[svg]") {
  ModelReport heat = model_with({3}, {2.0});
  heat.layers[0].similarity = MatrixD{{1.0, 1e308}, {1e308, 1.0}};
  try {
    plot_heatmap_svg(heat, 3, "");
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) ==
          "model \"m\" layer 3: similarity[0][1] = 1e+308 is not a cosine (outside [-1, 1])");
  }
}

}  // namespace kvrank

namespace kvrank {
namespace {

ModelReport with_repr(ModelReport report, const std::string& repr) {
  report.repr = repr;
  return report;
}

ModelReport at_step(ModelReport report, const std::string& path, std::int64_t step) {
  report.path = path;
  report.step = step;
  return report;
}

}  // namespace

TEST_CASE("curves: each representation of a file gets its own panel", "[svg]") {
  Panel panel{"tiny",
              {with_repr(model("MHA", "mha", 4, 6, 0.1), "qk"),
               with_repr(model("MHA", "mha", 4, 3, 0.1), "k"),
               with_repr(model("MQA", "mqa", 4, 4, 0.1), "qk"),
               with_repr(model("MQA", "mqa", 4, 1, 0.0), "k")},
              ""};
  const json svg = parse_svg(plot_curves_svg({panel}, {}));
  CHECK(svg["panels"] == json::array({"tiny (qk)", "tiny (k)"}));
  CHECK(svg["all_series_paths"] == 4);
  CHECK(svg["legend"] == json::array({"MHA", "MQA", "Fully redundant"}));
}

TEST_CASE("curves: --ylim gives exactly that range, values mapped linearly inside it", "[svg]") {
  PlotOptions options;
  options.ylim = {0.0, 10.0};
  options.width_in = 4;
  options.height_in = 3;
  const ModelReport m = model("M", "mha", 5, 2, 1);
  const std::string text = plot_curves_svg({{"p", {m}, ""}}, options);
  CHECK(text.find("width=\"4in\" height=\"3in\" viewBox=\"0 0 384 288\"") != std::string::npos);
  CHECK(text.find("data-y-low=\"0\" data-y-high=\"10\"") != std::string::npos);
  const json markers = parse_svg(text)["series"][0]["markers"];
  REQUIRE(markers.size() == 5);
  // Equal value steps give equal pixel steps (value 2, 3, 4, 5, 6).
  const double step = markers[1][1].get<double>() - markers[0][1].get<double>();
  for (int i = 1; i < 5; ++i) {
    CHECK(markers[i][1].get<double>() - markers[i - 1][1].get<double>() ==
          Approx(step).margin(0.02));
  }
}

TEST_CASE("curves: a figure too small for its panels is an error, not a broken figure", "[svg]") {
  PlotOptions options;
  options.width_in = 1;
  options.height_in = 1;
  const Panel panel{"p", {model("M", "mha", 5, 2, 1)}, ""};
  CHECK_THROWS_AS(plot_curves_svg({panel, panel, panel}, options), Error);
}

TEST_CASE("steps: one line per layer against the step, runs from the checkpoint folders", "[svg]") {
  Panel panel{"traj",
              {at_step(model("a2", "mha", 3, 4, 0.5), "runs/a/checkpoint-200", 200),
               at_step(model("a0", "mha", 3, 2, 0.5), "runs/a/checkpoint-0", 0),
               at_step(model("b0", "mqa", 3, 1, 0.5), "runs/b/step-0/model.safetensors", 0)},
              "traj.json"};
  const json svg = parse_svg(plot_steps_svg(panel, StepPlot::layers, {}));
  CHECK(svg["panels"] == json::array({"a", "b"}));
  CHECK(svg["legend"] == json::array({"Layer 0", "Layer 1", "Layer 2"}));
  const json& layer0 = svg["series"][0];  // run a, layer 0: steps 0 and 200 in order
  CHECK(layer0["label"] == "Layer 0");
  REQUIRE(layer0["markers"].size() == 2);
  CHECK(layer0["markers"][0][0].get<double>() < layer0["markers"][1][0].get<double>());
  CHECK(layer0["markers"][0][1].get<double>() > layer0["markers"][1][1].get<double>());

  const json mean = parse_svg(plot_steps_svg(panel, StepPlot::mean, {}));
  CHECK(mean["legend"] == json::array({"a", "b"}));
  const json heat = parse_svg(plot_steps_svg(panel, StepPlot::heatmap, {}));
  CHECK(heat["cells"].size() == 3 * 2 + 3 * 1);

  Panel no_step{"x", {model("m", "mha", 2, 1, 1)}, "x.json"};
  CHECK(test::error_message([&] { plot_steps_svg(no_step, StepPlot::mean, {}); }) ==
        "x.json: model \"m\" has no training step: analyze checkpoint-N folders, or give --step N "
        "to analyze");
  CHECK_THROWS_WITH(parse_step_plot("both"),
                    "--over-steps: expected layers, mean or heatmap, found \"both\"");
  CHECK(parse_step_plot("heatmap") == StepPlot::heatmap);
}

}  // namespace kvrank

// Tests of the figure grid and its edges (svg_detail.hpp, svg.hpp, figure_options.hpp): panel
// titles that fit their panel, one y axis for shared panels, the inside legend's corner, one
// colour map per heatmap kind, and axes at the limits of a double. The SVG structure of whole
// figures is checked again by tests/e2e/test_figures.py with an XML parser and the font's own
// widths.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "kvrank/base/error.hpp"
#include "kvrank/plot/svg.hpp"
#include "plot/svg_detail.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using namespace plot_detail;

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t found = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + 1)) {
    ++found;
  }
  return found;
}

ModelReport rising(const std::string& label, double start, std::optional<std::int64_t> step = {}) {
  ModelReport model;
  model.label = label;
  model.variant = "mha";
  model.repr = "qk";
  model.step = step;
  model.geometry.heads = 8;
  for (int i = 0; i < 6; ++i) {
    LayerMetrics layer;
    layer.layer = i;
    layer.heads = 8;
    layer.erank = start + 0.2 * i;
    model.layers.push_back(layer);
  }
  return model;
}

}  // namespace

TEST_CASE("text_width: DejaVu Sans's advance widths", "[grid]") {
  CHECK(text_width("0", 10) == Approx(6.36));
  CHECK(text_width("Layer", 100) == Approx(55.7 + 61.3 + 59.2 + 61.5 + 41.1));
  CHECK(text_width("Layer", 100, true) == Approx(1.13 * text_width("Layer", 100)));
  CHECK(text_width("…", 10) == Approx(10));  // general punctuation: a full em
}

TEST_CASE("fit_title: one line, then two balanced lines, then smaller, then cut", "[grid]") {
  const TitleLayout short_title = fit_title("gemma-2-9b", 14, 10, 200);
  CHECK(short_title.lines == std::vector<std::string>{"gemma-2-9b"});
  CHECK(short_title.size == 14);
  CHECK(fit_title("", 14, 10, 200).lines.empty());

  const TitleLayout wrapped = fit_title("qwen2.5 7b instruct", 14, 10, 90);
  CHECK(wrapped.lines == std::vector<std::string>{"qwen2.5", "7b instruct"});
  CHECK(wrapped.size == 14);
  const TitleLayout hyphen = fit_title("deepseek-v2-lite-chat", 14, 10, 100);
  CHECK(hyphen.lines == std::vector<std::string>{"deepseek-", "v2-lite-chat"});

  const TitleLayout smaller = fit_title("deepseek-v2-lite-chat", 14, 10, 75);
  REQUIRE(smaller.lines.size() == 2);
  CHECK(smaller.size < 14);
  CHECK(smaller.size >= 10);

  for (const double width : {20.0, 45.0, 75.0, 300.0}) {
    for (const std::string& title :
         {std::string("a-very-long-checkpoint-name-without-spaces"), std::string(500, 'W'),
          std::string("ünïcödé títlé wïth àccents — and dashes"), std::string("x y")}) {
      const TitleLayout layout = fit_title(title, 14, 10, width);
      REQUIRE(!layout.lines.empty());
      CHECK(layout.lines.size() <= 2);
      CHECK(layout.size >= 10);
      for (const std::string& line : layout.lines) {
        CHECK(text_width(line, layout.size) <= width + 1e-9);
      }
    }
  }
  // A megabyte title is laid out in linear time (prefix widths, no copy per break).
  std::string huge;
  for (int i = 0; i < 100'000; ++i) huge += "word-";
  const TitleLayout cut = fit_title(huge, 14, 10, 100);
  CHECK(cut.lines.size() == 2);
  CHECK(cut.lines[1].size() < 100);
}

TEST_CASE("axes: --ylim beyond a double and one-ulp ranges are refused, never NaN", "[grid]") {
  CHECK(test::error_message([] { parse_ylim("-1e308,1e308"); }) ==
        "--ylim: \"-1e308,1e308\" is too wide to draw (HIGH - LOW overflows a double)");
  CHECK(test::error_message([] { parse_ylim("1,1.0000000000000002"); }) ==
        "--ylim: \"1,1.0000000000000002\" is too narrow to draw (HIGH - LOW must be at least "
        "1e-9 of their size)");
  CHECK(parse_ylim("1,1.000000001") == std::pair{1.0, 1.000000001});
  // The axis itself never repeats a tick, whatever it is given.
  const Axis one_ulp = exact_axis(1, std::nextafter(1.0, 2.0), 6);
  for (std::size_t i = 1; i < one_ulp.ticks.size(); ++i) {
    CHECK(one_ulp.ticks[i] > one_ulp.ticks[i - 1]);
    CHECK(one_ulp.label(i) != one_ulp.label(i - 1));
  }
  const Axis near = exact_axis(1, 1.000000001, 6);
  REQUIRE(near.ticks.size() >= 3);
  for (std::size_t i = 1; i < near.ticks.size(); ++i) CHECK(near.label(i) != near.label(i - 1));
  // Huge and tiny limits get scientific labels, not 301 digits.
  const Axis huge = exact_axis(1e300, 2e300, 6);
  CHECK(huge.label(0) == "1.0e300");
  CHECK(exact_axis(0, 1e-300, 6).label(1) == "2.0e-301");
  CHECK(exact_axis(0, 8, 6).label(1) == "2");
}

TEST_CASE("axes: steps near 2^63 give finite limits and ticks inside them", "[grid]") {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  for (const auto& [first, last] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {kMax, kMax}, {kMax - 1000, kMax}, {0, kMax}, {-kMax, kMax}, {kMax - 5, kMax - 2}}) {
    const Axis axis = integer_axis(first, last);
    INFO(first << " … " << last);
    REQUIRE(std::isfinite(axis.low));
    REQUIRE(std::isfinite(axis.high));
    REQUIRE(axis.low < axis.high);
    REQUIRE(!axis.ticks.empty());
    for (std::size_t i = 0; i < axis.ticks.size(); ++i) {
      CHECK(axis.fraction(axis.ticks[i]) >= 0);
      CHECK(axis.fraction(axis.ticks[i]) <= 1);
    }
    CHECK(axis.fraction(static_cast<double>(first)) >= 0);
    CHECK(axis.fraction(static_cast<double>(last)) <= 1);
  }
  CHECK(integer_axis(kMax, kMax).label(0) == "9223372036854775807");
  CHECK(integer_axis(0, 100, 3).ticks.size() <= 3);
}

TEST_CASE("legend places and colour maps (--legend, --colour-map): corners, maps and their errors",
          "[grid]") {
  CHECK(parse_legend("inside").place == LegendPlace::inside);
  CHECK(!parse_legend("inside").corner);
  CHECK(parse_legend("inside:bottom-left").corner == LegendCorner::bottom_left);
  CHECK(parse_legend("inside:top-right").corner == LegendCorner::top_right);
  for (const char* bad : {"inside:", "inside:middle", "top", "inside:bottom-left ", "Inside"}) {
    CHECK(test::error_message([&] { parse_legend(bad); }) ==
          std::string("--legend: expected below, right, inside or none (inside:CORNER: "
                      "top-left, top-right, bottom-left or bottom-right), found \"") +
              bad + "\"");
  }
  CHECK(parse_colour_map("greys") == ColourMap::greys);
  CHECK(test::error_message([] { parse_colour_map("jet"); }) ==
        "--colour-map: expected viridis, rdbu or greys, found \"jet\"");
  FigureSettings settings;
  settings.legend = "inside:top-left";
  settings.colour_map = "viridis";
  const PlotOptions options = plot_options(settings);
  CHECK(options.legend_corner == LegendCorner::top_left);
  CHECK(options.colour_map == ColourMap::viridis);
}

TEST_CASE("inside legend: the corner covering the fewest points, ties in matplotlib's order",
          "[grid]") {
  const Frame frame{0, 0, 100, 100, {}, {}};
  const LegendBox box{1, 30, 10, 30, 20};
  std::vector<std::vector<std::pair<double, double>>> drawn(1);
  CHECK(place_inside_legend({frame}, drawn, box, {}, 5, 1).corner == LegendCorner::top_right);
  drawn[0] = {{90, 10}, {10, 10}, {90, 90}};  // every corner but the bottom-left
  const InsideLegend free = place_inside_legend({frame}, drawn, box, {}, 5, 1);
  CHECK(free.corner == LegendCorner::bottom_left);
  CHECK(free.covered == 0);
  CHECK(free.left == 5);
  CHECK(free.top == 100 - 20 - 5);
  // A corner given is taken, however full.
  CHECK(place_inside_legend({frame}, drawn, box, LegendCorner::top_right, 5, 1).covered == 1);
  // No free corner in the first panel: the second panel's.
  drawn[0].emplace_back(10, 90);
  drawn.emplace_back();
  const Frame second{200, 0, 100, 100, {}, {}};
  CHECK(place_inside_legend({frame, second}, drawn, box, {}, 5, 1).panel == 1);
}

TEST_CASE("curves: a shared y axis is labelled once, its ticks in the first column", "[grid]") {
  std::vector<Panel> panels;
  for (int i = 0; i < 4; ++i) {
    panels.push_back({"run " + std::to_string(i), {rising("M", 2 + i)}, "run.json"});
  }
  PlotOptions options;
  options.columns = 2;
  const std::string own = plot_curves_svg(panels, options);
  CHECK(count(own, "class=\"y-label\"") == 4);
  options.share_y = true;
  const std::string shared = plot_curves_svg(panels, options);
  CHECK(count(shared, "class=\"y-label\"") == 1);
  // Tick labels on every row, none on the second column.
  CHECK(count(shared, "class=\"y-tick\"") > 0);
  const std::regex tick("<text x=\"([0-9.]+)\"[^>]*class=\"y-tick\"");
  std::set<std::string> columns;
  for (auto it = std::sregex_iterator(shared.begin(), shared.end(), tick);
       it != std::sregex_iterator(); ++it) {
    columns.insert((*it)[1]);
  }
  CHECK(columns.size() == 1);
}

TEST_CASE("curves: one label at several steps draws apart, at one step is refused", "[grid]") {
  const std::vector<Panel> apart = {{"t", {rising("A", 2, 100), rising("A", 3, 200)}, "t.json"}};
  const std::string svg = plot_curves_svg(apart, {});
  CHECK(count(svg, "data-label=\"A (step 100)\"") == 3);  // group, path, legend entry
  CHECK(count(svg, "data-label=\"A (step 200)\"") == 3);
  // A step beside no step still tells the two apart: "no step" names the other.
  const std::vector<Panel> one_unknown = {
      {"t", {rising("A", 2, {}), rising("A", 3, 100)}, "t.json"}};
  const std::string drawn = plot_curves_svg(one_unknown, {});
  CHECK(count(drawn, "data-label=\"A (no step)\"") == 3);
  CHECK(count(drawn, "data-label=\"A (step 100)\"") == 3);
  for (const auto& [a, b] :
       std::vector<std::pair<std::optional<std::int64_t>, std::optional<std::int64_t>>>{{100, 100},
                                                                                        {{}, {}}}) {
    const std::vector<Panel> same = {{"t", {rising("A", 2, a), rising("A", 3, b)}, "t.json"}};
    CHECK(test::error_message([&] { plot_curves_svg(same, {}); }) ==
          "t.json: two models labelled \"A\" with repr qk (labels must be unique to be "
          "compared)");
  }
}

TEST_CASE("curves: --panel-title once per panel or not at all; --title names one file", "[grid]") {
  std::vector<Panel> panels = {{"a", {rising("M", 2)}, "dir/a.json"},
                               {"b", {rising("M", 3)}, "b.json"}};
  CHECK(test::error_message([&] { apply_panel_titles(panels, {"x"}); }) ==
        "--panel-title given 1 times for 2 input(s): give it once per input, in order, or not at "
        "all");
  CHECK(test::error_message([&] {
          apply_panel_titles(panels, {"x", "y", "z"});
        }) ==
        "--panel-title given 3 times for 2 input(s): give it once per input, in order, or not "
        "at all");
  apply_panel_titles(panels, {});
  CHECK(panels[0].title == "a");
  PlotOptions options;
  options.title = "Tiny models";
  const std::string one = plot_curves_svg({panels[0]}, options);
  CHECK(count(one, "class=\"panel-title\"") == 0);
  CHECK(count(one, ">Tiny models</text>") == 1);
  const std::string titled = plot_curves_svg({{"128M", {rising("M", 2)}, "a.json"}}, options);
  CHECK(count(titled, ">128M</text>") == 1);  // a title of its own stays
  CHECK(count(plot_curves_svg(panels, options), "class=\"panel-title\"") == 2);
}

TEST_CASE("heatmap: one colour map for every model, errors list what exists", "[grid]") {
  ModelReport positive = rising("Positive", 2);
  ModelReport negative = rising("Negative", 2);
  positive.layers[1].similarity = MatrixD::Identity(3, 3);
  negative.layers[1].similarity = MatrixD::Identity(3, 3);
  negative.layers[1].similarity(0, 1) = negative.layers[1].similarity(1, 0) = -0.5;
  for (const ModelReport* model : {&positive, &negative}) {
    const std::string svg = plot_heatmap_svg(*model, 1, PlotOptions{});
    CHECK(count(svg, "data-colour-map=\"rdbu\"") == 1);
    CHECK(count(svg, "fill=\"#f7f7f7\"") == (model == &positive ? 6 : 4));  // 0: the white middle
  }
  PlotOptions viridis;
  viridis.colour_map = ColourMap::viridis;
  const std::string clipped = plot_heatmap_svg(negative, 1, viridis);
  CHECK(count(clipped, "data-colour-map=\"viridis\"") == 1);
  CHECK(count(clipped, "≤ 0.00") == 1);
  CHECK(count(plot_heatmap_svg(positive, 1, viridis), "≤") == 0);

  CHECK(test::error_message([&] { plot_heatmap_svg(positive, 7, PlotOptions{}); }) ==
        "model \"Positive\" has no layer 7 (it has layers 0-5)");
  std::vector<ModelReport> models;
  for (int i = 0; i < 11; ++i) models.push_back(rising("model " + std::to_string(i), 2));
  models.push_back(rising(std::string(100, 'x'), 2));
  CHECK(&heatmap_model(models, "model 3", "r.json") == &models[3]);
  CHECK(&heatmap_model(models, "", "r.json") == &models[0]);
  CHECK(test::error_message([&] { heatmap_model(models, "Foo", "r.json"); }) ==
        "r.json: has no model labelled \"Foo\" (it has \"model 0\", \"model 1\", \"model 2\", "
        "\"model 3\", \"model 4\", \"model 5\", \"model 6\", \"model 7\" and 4 more)");
  models.erase(models.begin(), models.begin() + 11);
  CHECK(test::error_message([&] { heatmap_model(models, "Foo", "r.json"); }) ==
        "r.json: has no model labelled \"Foo\" (it has \"" + std::string(40, 'x') +
            "... (100 bytes)\")");
  CHECK(test::error_message([&] { heatmap_model({}, "", "r.json"); }) == "r.json: holds no model");
}

}  // namespace kvrank

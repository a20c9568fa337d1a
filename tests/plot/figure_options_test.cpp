// Tests of figure_options.hpp: formats, presets, y limits, legend places and style files, with
// the exact messages a user sees.
#include "kvrank/plot/figure_options.hpp"

#include <set>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using nlohmann::json;

std::string style_error(const json& document) {
  return test::error_message([&] { parse_style_file(document, "style.json"); });
}

}  // namespace

TEST_CASE("figure_format follows the extension in any case, and nothing else", "[figure]") {
  CHECK(figure_format("fig.svg") == FigureFormat::svg);
  CHECK(figure_format("out/FIG.SVG") == FigureFormat::svg);
  CHECK(figure_format("fig.png") == FigureFormat::png);
  CHECK(figure_format("fig.PnG") == FigureFormat::png);
  CHECK(figure_format("fig.pdf") == FigureFormat::pdf);
  CHECK(figure_format("a.b/fig.PDF") == FigureFormat::pdf);
  CHECK(test::error_message([] { figure_format("fig.jpg"); }) ==
        "fig.jpg: unknown figure format \".jpg\": name the output .svg, .png or .pdf");
  for (const char* name : {"fig", "fig.svg.bak", ".png", "dir.png/", "fig.eps"}) {
    CHECK_THROWS_AS(figure_format(name), Error);
  }
}

TEST_CASE("size presets and y limits", "[figure]") {
  PlotOptions options;
  apply_size_preset(options, "column");
  CHECK(options.width_in == 3.5);
  CHECK(options.font_pt == 8);
  apply_size_preset(options, "page");
  CHECK(options.width_in == 7.0);
  CHECK(options.font_pt == 9);
  CHECK_THROWS_AS(apply_size_preset(options, "poster"), Error);

  CHECK(parse_ylim("1,8") == std::pair{1.0, 8.0});
  CHECK(parse_ylim(" -0.5 , 2.25 ") == std::pair{-0.5, 2.25});
  CHECK(test::error_message([] { parse_ylim("8,1"); }) ==
        "--ylim: LOW must be below HIGH, found \"8,1\"");
  for (const char* bad : {"", "1", "1,", ",2", "a,b", "1,2,3", "1,inf", "nan,2", "1;2"}) {
    CHECK_THROWS_AS(parse_ylim(bad), Error);
  }
  CHECK(parse_legend_place("right") == LegendPlace::right);
  CHECK_THROWS_AS(parse_legend_place("top"), Error);
}

TEST_CASE("panels per row: unset is one row, any value given is checked, 0 too", "[figure]") {
  FigureSettings settings;
  CHECK(plot_options(settings).columns == 0);  // all panels in one row
  settings.columns = 3;
  CHECK(plot_options(settings).columns == 3);
  // The command line's --cols 0 is refused, and so is the library's (and Python's cols=0).
  for (const int bad : {0, -2, 1001}) {
    settings.columns = bad;
    CHECK(test::error_message([&] { plot_options(settings); }) ==
          "--cols: expected 1 to 1000, found " + std::to_string(bad));
  }
}

TEST_CASE("style files: each field checked, the label and field named", "[figure]") {
  const auto styles = parse_style_file(
      json::parse(R"({"MQA": {"colour": "#D55E00", "marker": "star", "dash": "6 2"},
                      "MLA": {"color": "#abc"}, "GQA": {}})"),
      "style.json");
  REQUIRE(styles.size() == 3);
  CHECK(styles.at("MQA").colour == "#D55E00");
  CHECK(styles.at("MQA").marker == "star");
  CHECK(styles.at("MQA").dash == "6 2");
  CHECK(styles.at("MLA").colour == "#abc");
  CHECK(styles.at("GQA").marker.empty());

  CHECK(style_error(json::array()) == "style.json: expected an object: label → style");
  CHECK(style_error({{"MQA", "red"}}).find("style.json: \"MQA\": expected an object") == 0);
  CHECK(style_error({{"MQA", {{"colour", "red"}}}}) ==
        "style.json: \"MQA\".colour: expected #rrggbb or #rgb, found \"red\"");
  CHECK(style_error({{"MQA", {{"colour", "#12345\"/>"}}}}) ==
        "style.json: \"MQA\".colour: expected #rrggbb or #rgb, found \"#12345\"/>\"");
  CHECK(style_error({{"MQA", {{"marker", "blob"}}}})
            .find("unknown marker \"blob\" (expected "
                  "circle, square,") != std::string::npos);
  CHECK(style_error({{"MQA", {{"dash", "0 0"}}}}).find("\"MQA\".dash: expected solid") !=
        std::string::npos);
  CHECK(style_error({{"MQA", {{"dash", "4\" onload=\""}}}}).find("\"MQA\".dash") !=
        std::string::npos);
  CHECK(style_error({{"MQA", {{"width", 2}}}}) ==
        "style.json: \"MQA\": unknown key \"width\" (expected colour, marker, dash)");
  CHECK(style_error({{"MQA", {{"marker", 3}}}}) == "style.json: \"MQA\".marker: expected a string");
}

TEST_CASE("ten distinct marker names", "[figure]") {
  const auto& names = marker_names();
  CHECK(names.size() == 10);
  CHECK(std::set<std::string>(names.begin(), names.end()).size() == 10);
}

}  // namespace kvrank

// Tests of check.hpp: regression check of rank curves against a golden result set.
#include "kvrank/report/check.hpp"

#include <algorithm>
#include <string>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

ModelReport curve(const std::string& label, const std::string& repr, int layers, double level) {
  ModelReport model;
  model.label = label;
  model.repr = repr;
  model.variant = "mha";
  for (int i = 0; i < layers; ++i) {
    LayerMetrics layer;
    layer.layer = i;
    layer.heads = 8;
    layer.erank = level + 0.1 * i;
    layer.erank_centered = level - 1 + 0.05 * i;
    layer.erank_pct = 100 * layer.erank / 8;
    layer.erank_centered_pct = 100 * layer.erank_centered / 8;
    layer.mean_similarity = 0.02 * i;
    layer.pcs_90 = 5;
    model.layers.push_back(layer);
  }
  return model;
}

std::vector<ModelReport> golden_set() {
  return {curve("Standard MHA", "qk", 6, 5.0), curve("GQA", "qk", 6, 4.0)};
}

std::string error_of(const std::vector<ModelReport>& current,
                     const std::vector<ModelReport>& golden, const CheckOptions& options = {}) {
  return test::error_message(
      [&] { check_reports(current, golden, options, "current.json", "golden.json"); });
}

}  // namespace

TEST_CASE("identical result sets have no violations", "[check]") {
  const auto golden = golden_set();
  CHECK(check_reports(golden, golden, {}, "current.json", "golden.json").empty());
  CHECK(format_violations({}).empty());
  // Matching is by label, not by position.
  const std::vector<ModelReport> swapped = {golden[1], golden[0]};
  CHECK(check_reports(swapped, golden, {}, "current.json", "golden.json").empty());
}

TEST_CASE("one layer moved beyond tolerance is exactly one violation", "[check]") {
  const auto golden = golden_set();
  auto current = golden;
  current[1].layers[3].erank += 0.0501;           // just beyond the default 0.05
  current[1].layers[4].erank_centered -= 0.0499;  // just within
  current[0].layers[2].mean_similarity += 1.0;    // not a checked metric by default
  const auto violations = check_reports(current, golden, {}, "current.json", "golden.json");
  REQUIRE(violations.size() == 1);
  CHECK(violations[0].label == "GQA");
  CHECK(violations[0].repr == "qk");
  CHECK(violations[0].layer == 3);
  CHECK(violations[0].metric == Curve::erank);
  CHECK(violations[0].golden == golden[1].layers[3].erank);
  CHECK(violations[0].current == current[1].layers[3].erank);

  const std::string table = format_violations(violations);
  CHECK(table.rfind("label  repr  layer  metric", 0) == 0);
  CHECK(table.find("\nGQA    qk        3  erank ") != std::string::npos);
  CHECK(table.find("+0.050100") != std::string::npos);
  CHECK(std::count(table.begin(), table.end(), '\n') == 2);

  CheckOptions similarity_only;
  similarity_only.metrics = {Curve::mean_similarity};
  const auto other = check_reports(current, golden, similarity_only, "current.json", "golden.json");
  REQUIRE(other.size() == 1);
  CHECK(other[0].label == "Standard MHA");
  CHECK(other[0].layer == 2);
}

TEST_CASE("parse_direction reads down, up or both and words any other name as the others",
          "[check]") {
  CHECK(parse_direction("up") == Direction::up);
  CHECK(direction_name(parse_direction("both")) == "both");
  CHECK_THROWS_WITH(parse_direction("sideways"),
                    "--direction: expected down, up or both, found \"sideways\"");
}

TEST_CASE("rel_tol lets a difference within rel_tol·|golden| pass", "[check]") {
  const auto golden = golden_set();
  auto current = golden;
  // golden erank at layer 5 of MHA = 5.5; 0.2 is beyond abs 0.05 but within 5 % of 5.5 (0.275).
  current[0].layers[5].erank += 0.2;
  CheckOptions options;
  CHECK(check_reports(current, golden, options, "c", "g").size() == 1);
  options.rel_tol = 0.05;
  CHECK(check_reports(current, golden, options, "c", "g").empty());
  options.rel_tol = 0.03;  // 0.165 < 0.2
  CHECK(check_reports(current, golden, options, "c", "g").size() == 1);
  // A large abs_tol passes on its own.
  options.rel_tol.reset();
  options.abs_tol = 0.25;
  CHECK(check_reports(current, golden, options, "c", "g").empty());
}

TEST_CASE("several representations of one label are matched by repr", "[check]") {
  const std::vector<ModelReport> golden = {curve("m", "k", 3, 2.0), curve("m", "v", 3, 3.0)};
  auto current = golden;
  current[1].layers[0].erank += 1;
  const auto violations = check_reports(current, golden, {}, "c", "g");
  REQUIRE(violations.size() == 1);
  CHECK(violations[0].repr == "v");

  const std::vector<ModelReport> only_k = {golden[0]};
  CHECK(error_of(only_k, golden) ==
        "current.json: no model \"m\" (repr v) as in golden.json (models are matched by label)");
}

TEST_CASE("result sets that do not correspond are an error naming both files", "[check]") {
  const auto golden = golden_set();
  const std::vector<ModelReport> missing = {golden[0]};
  CHECK(error_of(missing, golden) ==
        "current.json: no model \"GQA\" as in golden.json (models are matched by label)");

  auto extra = golden;
  extra.push_back(curve("MQA", "qk", 6, 2.0));
  CHECK(error_of(extra, golden) ==
        "golden.json: no model \"MQA\" to compare with current.json (models are matched by label)");

  auto fewer_layers = golden;
  fewer_layers[1].layers.pop_back();
  CHECK(error_of(fewer_layers, golden) ==
        "current.json: model \"GQA\" has layers 0-4 but golden.json has layers 0-5");

  auto other_layers = golden;
  other_layers[0].layers[5].layer = 9;
  CHECK(error_of(other_layers, golden) ==
        "current.json: model \"Standard MHA\" has layers 0-4,9 but golden.json has layers 0-5");

  auto other_step = golden;
  other_step[1].step = 2000;
  auto golden_steps = golden;
  golden_steps[1].step = 1000;
  CHECK(error_of(other_step, golden_steps) ==
        "current.json: model \"GQA\" is at step 2000 but at step 1000 in golden.json (a label "
        "names one checkpoint)");
  CHECK(check_reports(other_step, golden, {}, "current.json", "golden.json").empty());  // null

  const std::vector<ModelReport> duplicate = {golden[0], golden[0], golden[1]};
  CHECK(error_of(duplicate, golden) ==
        "current.json: two models labelled \"Standard MHA\" with repr qk (labels must be unique "
        "to be compared)");
}

TEST_CASE("the metric table reads each metric by its JSON name", "[check]") {
  LayerMetrics layer;
  layer.erank = 1;
  layer.erank_centered = 2;
  layer.erank_pct = 3;
  layer.erank_centered_pct = 4;
  layer.mean_similarity = 5;
  layer.pcs_90 = 6;
  const auto value_of = [&](const char* name) { return curve_value(layer, parse_curve(name)); };
  CHECK(value_of("erank") == 1);
  CHECK(value_of("erank_centered") == 2);
  CHECK(value_of("erank_pct") == 3);
  CHECK(value_of("erank_centered_pct") == 4);
  CHECK(value_of("mean_similarity") == 5);
  CHECK(value_of("pcs_90") == 6);
  for (const char* name :
       {"erank", "erank_centered", "erank_pct", "erank_centered_pct", "mean_similarity", "pcs_90"})
    CHECK(curve_name(parse_curve(name)) == name);
  CHECK(fully_redundant_at_one(Curve::erank_centered));
  CHECK_FALSE(fully_redundant_at_one(Curve::erank_pct));
  try {
    parse_curve("eranq");
    FAIL("no error");
  } catch (const Error& error) {
    CHECK(std::string(error.what()) ==
          "--metric: expected erank, erank_pct, erank_centered, erank_centered_pct, "
          "mean_similarity or pcs_90, found \"eranq\"");
  }

  CheckOptions options;
  options.metrics.clear();
  CHECK(error_of(golden_set(), golden_set(), options) ==
        "--metric: at least one metric is required");
}

}  // namespace kvrank

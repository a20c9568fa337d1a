// Tests of reading a plan file back (plans_from_json, src/analysis/plan_read.cpp): a plan written
// by plan_json reads back as it was, and each broken field is refused in the result reader's
// words (report/field_reader.hpp), naming the field's place.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "kvrank/analysis/plan.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

using namespace kvrank;
using nlohmann::json;
using test::error_message;

namespace {

GroupingScore score(double base, std::vector<std::vector<int>> groups) {
  return {std::move(groups), base, base + 0.1, base + 0.2, base + 1, base + 2};
}

PlanModel two_layer_plan() {
  PlanModel model;
  model.label = "m";
  model.path = "m.safetensors";
  model.family = "llama";
  model.heads = 4;
  model.kv_heads = 4;
  model.kv_heads_after = 2;
  model.head_dim = 8;
  model.objective = PlanObjective::merge;
  model.random_partitions = 3;
  for (int i = 0; i < 2; ++i) {
    PlanLayer layer;
    layer.layer = i;
    layer.exact = i == 0;
    layer.plan = score(0.1 * i, {{0, 3}, {1, 2}});
    layer.erank_qk_before = 3.5;
    layer.contiguous = score(0.5, {{0, 1}, {2, 3}});
    layer.random_median = score(0.4, {});
    model.layers.push_back(layer);
  }
  model.layers[1].plan.qk_error = std::numeric_limits<double>::quiet_NaN();  // written as null
  return model;
}

json plan_document() { return json::parse(plan_json({two_layer_plan()})); }

std::string read_error(const json& document) {
  return error_message([&] { plans_from_json(document, "p.json"); });
}

}  // namespace

TEST_CASE("plan file: a written plan reads back as it was") {
  const std::vector<PlanModel> plans = plans_from_json(plan_document(), "p.json");
  REQUIRE(plans.size() == 1);
  const PlanModel want = two_layer_plan();
  const PlanModel& got = plans.front();
  CHECK(got.label == want.label);
  CHECK(got.objective == PlanObjective::merge);
  CHECK(got.kv_heads_after == 2);
  REQUIRE(got.layers.size() == 2);
  CHECK(got.layers[0].exact);
  CHECK_FALSE(got.layers[1].exact);
  CHECK(got.layers[1].plan.groups == want.layers[1].plan.groups);
  CHECK(got.layers[1].contiguous.groups == want.layers[1].contiguous.groups);
  CHECK(got.layers[1].plan.key_error == want.layers[1].plan.key_error);
  CHECK(std::isnan(got.layers[1].plan.qk_error));
  CHECK(got.layers[0].random_median.erank_k_after == want.layers[0].random_median.erank_k_after);
}

TEST_CASE("plan file: each broken field is one line naming its place") {
  json document = plan_document();
  json& layer = document["models"][0]["layers"][1];
  SECTION("not a plan") {
    document["kind"] = "diff";
    CHECK(read_error(document) == "p.json: kind: expected one of plan, found \"diff\"");
    document.erase("kind");
    CHECK(read_error(document) == "p.json: missing \"kind\"");
  }
  SECTION("a missing or mistyped number") {
    layer.erase("qk_error");
    CHECK(read_error(document) == "p.json: models[0].layers[1]: missing \"qk_error\"");
    layer["qk_error"] = "0.5";
    CHECK(read_error(document) ==
          "p.json: models[0].layers[1].qk_error: expected a number, found a string");
  }
  SECTION("nested objects, groups and flags") {
    layer["contiguous"]["key_error"] = true;
    CHECK(read_error(document) ==
          "p.json: models[0].layers[1].contiguous.key_error: expected a number, found a boolean");
    layer["contiguous"]["key_error"] = 1;
    layer["groups"][1] = 3;
    CHECK(read_error(document) ==
          "p.json: models[0].layers[1].groups[1]: expected an array of heads, found a number");
    layer["groups"][1] = json::array({1, -2});
    CHECK(read_error(document) ==
          "p.json: models[0].layers[1].groups[1][1]: expected >= 0, found -2");
    layer["groups"][1] = json::array({1, 2});
    layer["exact"] = 1;
    CHECK(read_error(document) ==
          "p.json: models[0].layers[1].exact: expected a boolean, found a number");
  }
  SECTION("the models") {
    document["models"][0]["objective"] = "fast";
    CHECK(read_error(document) ==
          "p.json: models[0].objective: expected one of merge, qk, found \"fast\"");
    document["models"][0] = json::array();
    CHECK(read_error(document) == "p.json: models[0]: expected an object, found an array");
    document["models"] = json::array();
    CHECK(read_error(document) ==
          "p.json: models: expected at least one planned model, found none");
  }
}

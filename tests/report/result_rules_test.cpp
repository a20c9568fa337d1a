// The rules the result reader checks (result_files.hpp): the JSON Schema's (docs/schema/), one test
// per rule, each naming the file and the field; the "since" of the curves, which lets a file of
// an older schema_version lack a newer curve; `check`'s options and its messages' excerpts.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/report/check.hpp"
#include "kvrank/report/result_files.hpp"
#include "report/field_reader.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using nlohmann::json;

ModelReport sample_model() {
  ModelReport model;
  model.label = "A";
  model.path = "ckpts/A";
  model.family = "llama";
  model.variant = "mha";
  model.geometry = {4, 4, 8, 32, 3, std::nullopt, std::nullopt};
  model.source.qk_norm_gain = "weight";
  for (int i = 0; i < 3; ++i) {
    LayerMetrics layer;
    layer.layer = i;
    layer.heads = 4;
    layer.erank = 3.5;
    layer.erank_pct = 87.5;
    layer.pcs_90 = 3;
    layer.eigenvalues = {2.0, 1.0, 0.75, 0.25};
    layer.eigenvalues_centered = {1.5, 1.0, 0.5, 0.0};
    layer.head_erank = {1, 2, 3, 4};
    layer.head_norm = {1, 1, 1, 1};
    model.layers.push_back(layer);
  }
  model.summary = summarize(model.layers);
  return model;
}

json sample_document() { return to_json({sample_model()}); }

std::string error_reading_part(const json& document) {
  return test::error_message([&] { reports_from_json(document, "part.json"); });
}

/// The error of reading the sample with `change` applied; it must name the file.
template <typename Change>
std::string error_after(Change&& change) {
  json document = sample_document();
  change(document);
  const std::string error = error_reading_part(document);
  CHECK(error.find("part.json") != std::string::npos);
  return error;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("the reader reads what the writer writes, and nothing the schema forbids", "[report]") {
  CHECK(error_reading_part(sample_document()) == "(no error)");

  SECTION("tool.name must be kvrank, and tool holds name and version only") {
    CHECK(contains(error_after([](json& d) { d["tool"]["name"] = "other"; }),
                   "tool.name: expected one of kvrank, found \"other\""));
    CHECK(contains(error_after([](json& d) { d["tool"]["version"] = 1; }), "tool.version"));
    CHECK(contains(error_after([](json& d) { d["tool"]["x"] = 1; }), "tool: unexpected key"));
    CHECK(contains(error_after([](json& d) { d.erase("tool"); }), "missing \"tool\""));
  }
  SECTION("no key the schema does not list, at any level") {
    CHECK(contains(error_after([](json& d) { d["x"] = 1; }), "unexpected key \"x\""));
    CHECK(contains(error_after([](json& d) { d["models"][0]["x"] = 1; }),
                   "models[0]: unexpected key \"x\""));
    CHECK(contains(error_after([](json& d) { d["models"][0]["layers"][2]["x"] = 1; }),
                   "models[0].layers[2]: unexpected key"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["source"]["x"] = 1; }),
                   "models[0].source: unexpected key"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["options"]["x"] = 1; }),
                   "models[0].options: unexpected key"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["summary"]["x"] = 1; }),
                   "models[0].summary: unexpected key"));
  }
  SECTION("a long unknown key is quoted as an excerpt") {
    const std::string error =
        error_after([](json& d) { d["models"][0][std::string(100000, 'k')] = 1; });
    CHECK(error.size() < 200);
  }
  SECTION("the norm gains and repr are among the known names") {
    CHECK(contains(
        error_after([](json& d) { d["models"][0]["options"]["qk_norm_gain"] = "2*weight"; }),
        "models[0].options.qk_norm_gain: expected one of weight, 1+weight, found \"2*weight\""));
    CHECK(contains(error_after([](json& d) { d["models"][0]["options"]["input_norm_gain"] = "w"; }),
                   "models[0].options.input_norm_gain"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["repr"] = "zz"; }),
                   "models[0].repr: expected one of qk, ov, k, v, found \"zz\""));
  }
  SECTION("counts are not negative, ranks at least 1") {
    for (const char* key : {"heads", "kv_heads", "head_dim", "d_model", "num_layers"}) {
      CHECK(contains(error_after([&](json& d) { d["models"][0][key] = -1; }),
                     "models[0]." + std::string(key) + ": expected >= 0, found -1"));
    }
    CHECK(contains(error_after([](json& d) { d["models"][0]["step"] = -5; }),
                   "models[0].step: expected >= 0, found -5"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["lrkv_rank"] = 0; }),
                   "models[0].lrkv_rank: expected >= 1, found 0"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["mla_kv_lora_rank"] = -3; }),
                   "models[0].mla_kv_lora_rank: expected >= 1"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["layers"][1]["layer"] = -1; }),
                   "models[0].layers[1].layer: expected >= 0"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["layers"][1]["kept_heads"] = -1; }),
                   "models[0].layers[1].kept_heads: expected >= 0"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["layers"][1]["pcs_90"] = -1; }),
                   "models[0].layers[1].pcs_90: expected >= 0"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["layers"][1]["zero_heads"] = {-1}; }),
                   "models[0].layers[1].zero_heads[0]: expected >= 0"));
    CHECK(contains(error_after([](json& d) { d["models"][0]["attention_layers"] = {-1}; }),
                   "models[0].attention_layers[0]: expected >= 0"));
  }
  SECTION("a layer keeps at most the model's heads (beyond what the schema can say)") {
    CHECK(contains(error_after([](json& d) { d["models"][0]["layers"][2]["kept_heads"] = 5; }),
                   "models[0].layers[2].kept_heads: expected at most heads (4), found 5"));
  }
  SECTION("a huge number is quoted short") {
    const std::string error = error_after([](json& d) { d["models"][0]["heads"] = 1.7e308; });
    CHECK(contains(error, "models[0].heads: expected an integer, found 1.7e+308"));
  }
}

TEST_CASE("the names the reader knows are the library's", "[report]") {
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v}) {
    CHECK(std::find(kReprNames.begin(), kReprNames.end(), repr_name(repr)) != kReprNames.end());
  }
  CHECK(kReprNames.size() == 4);
  for (std::string_view name : kReprNames) CHECK(repr_name(parse_repr(name)) == name);
}

TEST_CASE("a curve newer than a file's schema_version may be absent from it", "[report]") {
  // The metric table as it would be when mean_similarity came with schema_version 3 — summarised
  // here, in erank's place (its key "mean_similarity_mean"), to see an absent mean too.
  std::vector<CurveField> fields(metric_fields().begin(), metric_fields().end());
  CurveField& newer = fields[static_cast<std::size_t>(Curve::mean_similarity)];
  newer.since = 3;
  newer.mean = &Summary::erank_mean;
  fields[static_cast<std::size_t>(Curve::erank)].mean = nullptr;
  json layer = to_json({sample_model()})["models"][0]["layers"][0];
  layer.erase("mean_similarity");
  const json old_summary = {
      {"erank_pct_mean", 1.0}, {"erank_centered_mean", 2.0}, {"erank_centered_pct_mean", 3.0}};
  const std::string file = "old.json";

  SECTION("version 2 lacks it: read, and recorded as absent") {
    const report_detail::FieldReader reader(layer, "models[0].layers[0]", file);
    LayerMetrics metrics;
    std::vector<Curve> absent;
    report_detail::read_curves(reader, fields, 2, metrics, absent);
    CHECK(absent == std::vector<Curve>{Curve::mean_similarity});
    CHECK(metrics.erank == 3.5);
    const report_detail::FieldReader means(old_summary, "models[0].summary", file);
    const Summary read = report_detail::read_summary(means, fields, 2);
    CHECK(std::isnan(read.erank_mean));
    CHECK(read.erank_centered_mean == 2.0);
  }
  SECTION("version 3 must have it") {
    const report_detail::FieldReader reader(layer, "models[0].layers[0]", file);
    LayerMetrics metrics;
    std::vector<Curve> absent;
    CHECK(test::error_message([&] {
            report_detail::read_curves(reader, fields, 3, metrics, absent);
          }) == "old.json: models[0].layers[0]: missing \"mean_similarity\"");
    const report_detail::FieldReader means(old_summary, "models[0].summary", file);
    CHECK(test::error_message([&] { report_detail::read_summary(means, fields, 3); }) ==
          "old.json: models[0].summary: missing \"mean_similarity_mean\"");
  }
  SECTION("every curve of today's table came with a version the reader reads") {
    for (const CurveField& field : metric_fields()) {
      CHECK(field.since >= 1);
      CHECK(field.since <= kSchemaVersion);
    }
  }
}

TEST_CASE("check refuses to compare a curve a file predates", "[check]") {
  ModelReport old = sample_model();
  old.absent_curves = {Curve::erank_centered};
  const ModelReport current = sample_model();
  const auto compare = [&](const ModelReport& a, const ModelReport& b) {
    return test::error_message([&] { check_reports({a}, {b}, {}, "current.json", "golden.json"); });
  };
  CHECK(compare(current, old) ==
        "golden.json: model \"A\" has no \"erank_centered\" (the file's schema_version predates "
        "it)");
  CHECK(contains(compare(old, current), "current.json: model \"A\" has no \"erank_centered\""));
  CheckOptions erank_only;
  erank_only.metrics = {Curve::erank};
  CHECK(check_reports({current}, {old}, erank_only, "current.json", "golden.json").empty());
}

TEST_CASE("check's tolerances are finite numbers >= 0, NaN and infinity refused", "[check]") {
  const ModelReport model = sample_model();
  const auto error_with = [&](const CheckOptions& options) {
    return test::error_message(
        [&] { check_reports({model}, {model}, options, "current.json", "golden.json"); });
  };
  CheckOptions options;
  options.abs_tol = std::numeric_limits<double>::quiet_NaN();
  CHECK(error_with(options) == "--abs-tol: must be a finite number, 0 or more, found nan");
  options.abs_tol = -1.7e308;
  CHECK(error_with(options) == "--abs-tol: must be a finite number, 0 or more, found -1.7e+308");
  options.abs_tol = 0;
  options.rel_tol = std::numeric_limits<double>::quiet_NaN();
  CHECK(error_with(options) == "--rel-tol: must be a finite number, 0 or more, found nan");
  options.rel_tol = std::numeric_limits<double>::infinity();
  CHECK(error_with(options) == "--rel-tol: must be a finite number, 0 or more, found inf");
  options.rel_tol = 1e308;
  CHECK(error_with(options) == "(no error)");
}

TEST_CASE("check quotes labels and values short", "[check]") {
  ModelReport huge = sample_model();
  huge.label = std::string(10'000'000, 'x');
  const ModelReport other = sample_model();
  const std::string error = test::error_message(
      [&] { check_reports({huge}, {other}, {}, "current.json", "golden.json"); });
  CHECK(contains(error, "no model \"xxxx"));
  CHECK(error.size() < 300);
  const std::string twice = test::error_message([&] {
    check_reports({huge, huge}, {other}, {}, "current.json", "golden.json");
  });
  CHECK(contains(twice, "two models labelled"));
  CHECK(twice.size() < 300);

  const std::vector<Violation> violations{{"A", "qk", 0, Curve::erank, 1.7e308, -1.7e308}};
  const std::string table = format_violations(violations);
  CHECK(table.size() < 200);
  CHECK(contains(table, "1.7e+308"));
  CHECK(contains(table, "-inf"));
  CHECK(markdown_summary(violations, {}, "c.json", "g.json").size() < 400);
  CHECK(github_annotations(violations, "c.json").size() < 200);
}

}  // namespace kvrank

namespace kvrank {

TEST_CASE("the field tables agree with the JSON Schema: names and since", "[report]") {
  const json schema = json::parse(
      test::read_file(test::source_dir() / "docs" / "schema" / "kvrank-result.schema.json"));
  const json& layer = schema["$defs"]["layer"];
  const json& model = schema["$defs"]["model"];
  for (const CurveField& field : metric_fields()) {
    const std::string name(field.name);
    INFO(name);
    REQUIRE(layer["properties"].contains(name));
    CHECK(layer["properties"][name]["x-since"] == field.since);
    CHECK(layer["properties"][name]["type"] == (field.integral ? "integer" : "number"));
    CHECK(std::count(layer["required"].begin(), layer["required"].end(), name) == 1);
    if (field.mean)
      CHECK(model["properties"]["summary"]["properties"].contains(summary_key(field)));
  }
  for (const GeometryField& field : geometry_fields()) {
    INFO(field.name);
    CHECK(model["properties"][std::string(field.name)]["x-since"] == field.since);
  }
  for (const OptionalGeometryField& field : optional_geometry_fields()) {
    INFO(field.name);
    CHECK(model["properties"][std::string(field.name)]["x-since"] == field.since);
  }
  std::vector<std::string> reprs(kReprNames.begin(), kReprNames.end());
  CHECK(model["properties"]["repr"]["enum"] == json(reprs));
  std::vector<json> gains(kNormGainNames.begin(), kNormGainNames.end());
  gains.push_back(nullptr);
  CHECK(model["properties"]["options"]["properties"]["qk_norm_gain"]["enum"] == json(gains));
  CHECK(model["properties"]["options"]["properties"]["input_norm_gain"]["enum"] == json(gains));
  CHECK(schema["properties"]["schema_version"]["const"] == kSchemaVersion);
}

}  // namespace kvrank

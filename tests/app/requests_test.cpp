// The application layer's requests (kvrank/app/requests.hpp) and the decimal integer reading and
// "did you mean" of kvrank/base/text.hpp they rely on.
#include "kvrank/app/requests.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include "kvrank/base/text.hpp"
#include "kvrank/report/training_run.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using Catch::Matchers::Contains;
using test::error_message;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

}  // namespace

TEST_CASE("parse_integer: decimal only, leading zeros kept, never clamped", "[app][integer]") {
  CHECK(parse_integer("--step", "000500", 0, kMax) == 500);
  CHECK(parse_integer("--step", "0", 0, kMax) == 0);
  CHECK(parse_integer("--step", "9223372036854775807", 0, kMax) == kMax);
  CHECK(parse_integer("--x", "-12", -20, 20) == -12);
  for (const char* bad : {"0x10", "1e3", "+5", " 5", "5 ", "", "-", "12a", "0b1", "1.0"}) {
    CAPTURE(bad);
    CHECK_THAT(error_message([&] { parse_integer("--step", bad, 0, kMax); }),
               Contains("--step: expected a decimal integer"));
  }
  CHECK_THAT(error_message([] { parse_integer("--step", "9223372036854775808", 0, kMax); }),
             Contains("--step: 9223372036854775808 is out of range (at most 9223372036854775807)"));
  CHECK_THAT(error_message([] { parse_integer("--step", "99999999999999999999999", 0, kMax); }),
             Contains("out of range"));
  CHECK_THAT(error_message([] { parse_integer("--dpi", "2147483648", 0, 2147483647); }),
             Contains("--dpi: 2147483648 is out of range (at most 2147483647)"));
  CHECK_THAT(error_message([] { parse_integer("--step", "-1", 0, kMax); }),
             Contains("--step: -1 is out of range (at least 0)"));
}

TEST_CASE("decimal_value: --step and checkpoint-N read a number alike", "[app][integer]") {
  CHECK(decimal_value("000500") == 500);
  CHECK(step_from_folder_name("checkpoint-000500") == 500);
  CHECK(parse_integer("--step", "000500", 0, kMax) == *step_from_folder_name("checkpoint-000500"));
  CHECK_FALSE(decimal_value("9223372036854775808"));
  CHECK_FALSE(step_from_folder_name("checkpoint-9223372036854775808"));
  CHECK_FALSE(decimal_value("0x10"));
  CHECK_FALSE(decimal_value(""));
}

TEST_CASE("nearest_name: a typo's likely meaning, nothing for a stranger", "[app][suggest]") {
  const std::vector<std::string> commands{"analyze", "inspect", "check", "plot", "merge"};
  CHECK(nearest_name("analyse", commands) == "analyze");
  CHECK(nearest_name("chekc", commands) == "check");
  CHECK_FALSE(nearest_name("frobnicate", commands));
  const std::vector<std::string> options{"--format", "--layers", "--label", "--layer-shard"};
  CHECK(nearest_name("--fromat", options) == "--format");
  CHECK(nearest_name("--layer", options) == "--layers");
  CHECK_FALSE(nearest_name(std::string(10'000, 'x'), options));
}

TEST_CASE("AnalyzeRequest::validate names the option and the rule", "[app][requests]") {
  app::AnalyzeRequest request;
  request.inputs = {"a", "b"};
  CHECK_NOTHROW(request.validate());
  request.steps = {1, 2, 3};
  CHECK_THAT(error_message([&] { request.validate(); }),
             Contains("--step given 3 times for 2 input(s)"));
  request.steps = {-1};
  CHECK_THAT(error_message([&] { request.validate(); }),
             Contains("--step: must be 0 or more, found -1"));
  request.steps = {};
  request.layout.heads = 0;
  CHECK_THAT(error_message([&] { request.validate(); }),
             Contains("--heads: must be 1 or more, found 0"));
  request.layout.heads.reset();
  request.format = app::ResultFormat::table;
  request.output = "out.json";
  CHECK_THAT(error_message([&] { request.validate(); }),
             Contains("--format table contradicts -o out.json"));
  request.format.reset();
  request.similarity = true;
  CHECK_NOTHROW(request.validate());  // -o out.json: JSON holds the matrices
  request.output = "out.csv";
  CHECK_THAT(error_message([&] { request.validate(); }), Contains("--similarity: "));
}

TEST_CASE("check, plot and baseline requests refuse what they cannot mean", "[app][requests]") {
  app::CheckRequest check;
  check.options.abs_tol = std::numeric_limits<double>::quiet_NaN();
  CHECK_THAT(error_message([&] { check.validate(); }),
             Contains("--abs-tol: must be a finite number, 0 or more, found nan"));
  check.options.abs_tol = std::numeric_limits<double>::infinity();
  CHECK(error_message([&] { check.validate(); }) ==
        "--abs-tol: must be a finite number, 0 or more, found inf");
  check.options.abs_tol = 0;
  check.options.rel_tol = std::numeric_limits<double>::infinity();
  // The request's rule is the library's (report/check.hpp): one message for both.
  CHECK(error_message([&] { check.validate(); }) ==
        error_message([&] { validate(check.options); }));
  CHECK_THAT(error_message([&] { check.validate(); }), Contains("--rel-tol: must be a finite"));
  check.options.rel_tol.reset();
  check.options.metrics.clear();
  CHECK(error_message([&] { check.validate(); }) == "--metric: at least one metric is required");
  app::PlotRequest plot;
  plot.inputs = {"r.json"};
  plot.heatmap_layer = -1;
  CHECK_THAT(error_message([&] { plot.validate(); }), Contains("--heatmap: must be a layer"));
  app::BaselineRequest baseline;
  baseline.layers = 4;
  CHECK(baseline.head_count() == 2);
  baseline.heads = 1;
  CHECK_THAT(error_message([&] { baseline.validate(); }),
             Contains("--heads: must be 2 or more, found 1"));
}

TEST_CASE("the name lists come from the library's tables", "[app][requests]") {
  CHECK(app::result_format_names() == std::vector<std::string>{"table", "json", "csv", "tsv"});
  CHECK(app::parse_result_format("csv") == app::ResultFormat::csv);
  CHECK_THAT(error_message([] { app::parse_result_format("xml"); }),
             Contains("--format: expected table, json, csv or tsv, found \"xml\""));
  CHECK(app::format_of_extension("OUT.JSON") == app::ResultFormat::json);
  CHECK(app::parse_repr_list("qk,,ov") == std::vector<Repr>{Repr::qk, Repr::ov});
  CHECK(app::parse_metric_list("erank,,pcs_90") == std::vector<Curve>{Curve::erank, Curve::pcs_90});
  CHECK_THAT(error_message([] { app::parse_metric_list("erank,eranq"); }),
             Contains("--metric: expected erank, erank_pct, erank_centered, erank_centered_pct, "
                      "mean_similarity or pcs_90, found \"eranq\""));
  CHECK(app::parse_number_list("--redundancy", "0,0.5") == std::vector<double>{0, 0.5});
  CHECK_THAT(error_message([] { app::parse_number_list("--redundancy", "0,x"); }),
             Contains("--redundancy: \"x\" is not a number"));
  CHECK(repr_names() == std::vector<std::string>{"qk", "ov", "k", "v"});
  CHECK(attention_choice_names() == std::vector<std::string>{"self", "cross", "all"});
  // --gauge: the command line and Python parse it here; any other name is refused (the command
  // line once read "--gauge maybe" as none).
  CHECK(app::gauge_names() == std::vector<std::string>{"auto", "none"});
  CHECK(app::parse_gauge("auto"));
  CHECK_FALSE(app::parse_gauge("none"));
  CHECK(error_message([] { app::parse_gauge("maybe"); }) ==
        "--gauge: expected auto or none, found \"maybe\"");
  // The defaults the help shows, named from the same tables (kGauges lists true first).
  CHECK(app::gauge_name(true) == "auto");
  CHECK(app::gauge_name(false) == "none");
  CHECK(app::annotate_name(app::Annotate::automatic) == "auto");
  CHECK(app::annotate_name(app::Annotate::none) == "none");
  CHECK(plan_objective_names() == std::vector<std::string>{"merge", "qk"});
  CHECK(plan_objective_name(PlanOptions{}.objective) == "qk");
  // A plan has no TSV form: plan's --format choices and its refusal of .tsv name the same list.
  CHECK(app::plan_format_names() == std::vector<std::string>{"table", "json", "csv"});
  app::PlanRequest plan;
  plan.inputs = {"model"};
  plan.options.kv_heads_after = 1;
  plan.format = app::ResultFormat::tsv;
  CHECK(error_message([&plan] { plan.validate(); }) ==
        "--format: a plan is written as table, json or csv");
}

TEST_CASE("written_format: -o's extension, else --format, else the table", "[app][requests]") {
  using app::ResultFormat;
  CHECK(app::written_format(std::nullopt, "") == ResultFormat::table);
  CHECK(app::written_format(ResultFormat::csv, "-") == ResultFormat::csv);
  CHECK(app::written_format(ResultFormat::csv, "out.JSON") == ResultFormat::json);
  app::PlanRequest plan;
  plan.output = "plan.csv";
  app::DiffRequest diff;
  diff.format = ResultFormat::json;
  app::AnalyzeRequest analyze;
  CHECK(plan.output_format() == ResultFormat::csv);
  CHECK(diff.output_format() == ResultFormat::json);
  CHECK(analyze.output_format() == ResultFormat::table);
}

}  // namespace kvrank

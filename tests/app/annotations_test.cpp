// `check --annotate github`: annotations grouped per model and representation and capped at
// GitHub's 10 per step (kvrank/report/check.hpp); the job summary keeps every change.
#include <string>
#include <vector>

#include "kvrank/report/check.hpp"
#include "support/catch.hpp"

namespace kvrank {
namespace {

using Catch::Matchers::Contains;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

Violation change(const std::string& label, int layer) {
  return {label, "qk", layer, Curve::erank, 2.0, 1.0};
}

}  // namespace

TEST_CASE("annotations: one per model and representation", "[check][annotations]") {
  std::vector<Violation> violations;
  for (int layer = 0; layer < 7; ++layer) violations.push_back(change("A", layer));
  violations.push_back(change("B", 3));
  const std::vector<std::string> lines = lines_of(github_annotations(violations, "r.json"));
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], Contains("model \"A\" (repr qk): 7 values changed: layer 0: erank"));
  CHECK_THAT(lines[0], Contains("; and 2 more (the job summary lists them)"));
  CHECK(lines[1] ==
        "::error file=r.json,title=kvrank check::model \"B\" (repr qk) layer 3: erank changed "
        "from 2.000000 to 1.000000");
}

TEST_CASE("annotations: at most 10, the summary complete", "[check][annotations]") {
  std::vector<Violation> violations;
  for (int model = 0; model < 15; ++model)
    violations.push_back(change("M" + std::to_string(model), 1));
  const std::vector<std::string> lines = lines_of(github_annotations(violations, "r.json"));
  REQUIRE(lines.size() == 10);
  CHECK_THAT(lines[8], Contains("model \"M8\""));
  CHECK_THAT(lines[9], Contains("::6 more models or representations changed"));
  const std::string summary = markdown_summary(violations, {}, "r.json", "g.json");
  CHECK_THAT(summary, Contains("| M14 | qk | 1 |"));
}

}  // namespace kvrank

// The lists the documents type out — model types, families, variants, reprs, GGUF architectures —
// against the library's tables (model_type.hpp, family.hpp, layout.hpp), so that a row added to a
// table without its doc (or a doc naming what the code lacks) fails here. The command line's own
// options against the README are checked by tests/e2e/test_docs_match_code.py.
#include <algorithm>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "kvrank/layout/family.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/layout/model_type.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

/// A document's text with every run of white space as one space (lists wrap across lines).
std::string document(const std::string& relative_path) {
  const std::string text = test::read_file(test::source_dir() / relative_path);
  return std::regex_replace(text, std::regex(R"(\s+)"), " ");
}

/// The text between the first `begin` and the next `end` after it; fails the test when absent.
std::string between(const std::string& text, const std::string& begin, const std::string& end) {
  const auto start = text.find(begin);
  INFO("looking for: " << begin);
  REQUIRE(start != std::string::npos);
  const auto stop = text.find(end, start + begin.size());
  REQUIRE(stop != std::string::npos);
  return text.substr(start + begin.size(), stop - start - begin.size());
}

/// The names in `code spans` of a text, in order.
std::vector<std::string> code_spans(const std::string& text) {
  std::vector<std::string> names;
  const std::regex span("`([a-z][a-z0-9_+.-]*)`");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), span); it != std::sregex_iterator();
       ++it)
    names.push_back((*it)[1]);
  return names;
}

std::vector<std::string> split(const std::string& text, const std::string& separators) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : text + separators.front()) {
    if (separators.find(c) == std::string::npos) {
      part += c;
    } else if (!part.empty()) {
      parts.push_back(part);
      part.clear();
    }
  }
  return parts;
}

std::vector<std::string> model_type_names() {
  std::vector<std::string> names;
  for (const ModelTypeInfo& row : model_types()) names.emplace_back(row.name);
  return names;
}

std::set<std::string> all_family_names() {
  std::set<std::string> names;
  for (int f = 0; f <= static_cast<int>(Family::activations); ++f)
    names.emplace(family_name(static_cast<Family>(f)));
  return names;
}

}  // namespace

TEST_CASE("the README and families.md list every model type of the table, in order", "[docs]") {
  const std::string readme = document("README.md");
  CHECK(code_spans(between(readme, "GGUF architecture and QK-norm kind):", ". The notable ones")) ==
        model_type_names());
  const std::string families = document("docs/families.md");
  CHECK(code_spans(between(families, "checks this list against the table:", "## Variants")) ==
        model_type_names());
}

TEST_CASE("the README lists the GGUF architectures kvrank reads", "[docs]") {
  std::string listed =
      between(document("README.md"), "Versions 2 and 3, architectures ", ". The head geometry");
  listed = std::regex_replace(listed, std::regex(R"( \([^)]*\))"), "");  // "(MLA)", "(and …)"
  listed = std::regex_replace(listed, std::regex(" and "), ", ");
  CHECK(split(listed, ", ") == split(gguf_architecture_list(), ", "));
}

TEST_CASE("the docs' lists of reprs, families and variants are the library's", "[docs]") {
  const std::string readme = document("README.md");
  std::set<std::string> reprs;
  for (const std::string& name : split(between(readme, "[--repr ", "]"), "|,")) reprs.insert(name);
  std::set<std::string> library_reprs;
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v}) library_reprs.emplace(repr_name(repr));
  CHECK(reprs == library_reprs);

  CHECK(split(between(readme, "kvrank synth --family ", " "), "|") ==
        split(synthesizable_family_list(), ", "));

  // The result schema's description of "family" names every reader family, and baseline.
  const std::string schema = document("docs/schema/kvrank-result.schema.json");
  const std::string family =
      between(between(schema, "\"family\": {", "}"), "\"description\"", "\",");
  std::set<std::string> described;
  for (const std::string& name : code_spans(family)) described.insert(name);
  std::set<std::string> expected = all_family_names();
  expected.insert("baseline");
  CHECK(described == expected);

  // The first column of families.md's table of variants.
  const std::string variants = between(document("docs/families.md"), "## Variants", "## dtypes");
  std::set<std::string> documented;
  const std::regex first_cell(R"(\| `([a-z0-9_]+)` \|)");
  for (auto it = std::sregex_iterator(variants.begin(), variants.end(), first_cell);
       it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  const std::vector<std::string> library_variants = split(variant_list(", "), ", ");
  CHECK(documented == std::set<std::string>(library_variants.begin(), library_variants.end()));
}

}  // namespace kvrank

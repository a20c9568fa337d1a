// `kvrank check`: compares rank curves with a golden file, for CI (docs/ci-recipe.md).
// Models are matched by label, layers by index. A value that changed beyond tolerance — in the
// direction asked for — is a violation (exit 1); files that do not correspond (a missing label,
// different layers) are an error (exit 2).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrank/report/result_model.hpp"

namespace kvrank {

/// Which changes count: a fall (heads collapsing), a rise (which may be fine), or both.
enum class Direction { down, up, both };
std::string_view direction_name(Direction direction) noexcept;
/// Parses "down", "up", "both"; throws kvrank::Error naming them otherwise.
Direction parse_direction(std::string_view name);
/// "down", "up", "both", from the same table (for help texts).
std::vector<std::string> direction_names();

struct CheckOptions {
  std::vector<Curve> metrics{Curve::erank, Curve::erank_centered};
  Direction direction = Direction::both;
  double abs_tol = 0.05;
  std::optional<double> rel_tol;  ///< when set, a difference within rel_tol·|golden| also passes
};

/// The one rule for check's options: each tolerance a finite number, 0 or more, and at least one
/// metric. Throws kvrank::Error naming the option (a usage error) otherwise. check_reports and
/// the application layer's CheckRequest::validate call it.
void validate(const CheckOptions& options);

struct Violation {
  std::string label;
  std::string repr;
  int layer = 0;
  Curve metric = Curve::erank;
  double golden = 0;
  double current = 0;
};

/// Throws kvrank::Error (naming the files) when the two result sets do not correspond.
std::vector<Violation> check_reports(const std::vector<ModelReport>& current,
                                     const std::vector<ModelReport>& golden,
                                     const CheckOptions& options, const std::string& current_file,
                                     const std::string& golden_file);

/// A compact table of violations (one line each), or "" when there are none.
std::string format_violations(const std::vector<Violation>& violations);

/// The comparison as a JSON document: the files, the options, whether it passed, each change.
nlohmann::json check_to_json(const std::vector<Violation>& violations, const CheckOptions& options,
                             const std::string& current_file, const std::string& golden_file);

/// GitHub Actions annotation lines ("::error title=…::…"): one per model and representation that
/// changed (its changes listed, the first five), at most 10 in all — GitHub shows 10 per step — the
/// tenth counting the groups left out. markdown_summary lists every change.
std::string github_annotations(const std::vector<Violation>& violations,
                               const std::string& current_file);

/// A Markdown job summary (GitHub's $GITHUB_STEP_SUMMARY): the verdict and a table of changes.
std::string markdown_summary(const std::vector<Violation>& violations, const CheckOptions& options,
                             const std::string& current_file, const std::string& golden_file);

}  // namespace kvrank

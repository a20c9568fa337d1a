// `kvrank check`: regression check of rank curves against a golden file, for CI.
// Models are matched by label, layers by index. A difference beyond tolerance is a violation
// (exit 1); files that do not correspond (a missing label, different layers) are an error (exit 2).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kvrank/report/results.hpp"

namespace kvrank {

struct CheckOptions {
  std::vector<Metric> metrics{Metric::erank, Metric::erank_centered};
  double abs_tol = 0.05;
  std::optional<double> rel_tol;  ///< when set, a difference within rel_tol·|golden| also passes
};

struct Violation {
  std::string label;
  std::string repr;
  int layer = 0;
  Metric metric = Metric::erank;
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

}  // namespace kvrank

// Writers and readers of analysis results: JSON (docs/result-format.md, schema_version 1), CSV,
// terminal table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvrank/base/atomic_file.hpp"  // write_file_atomically, used with every writer
#include "kvrank/report/results.hpp"

namespace kvrank {

struct ReportOptions {
  bool include_similarity = false;  ///< `--similarity`: add each layer's H×H matrix
};

nlohmann::json to_json(const std::vector<ModelReport>& models, const ReportOptions& options = {});
/// A JSON document as text: indented by 2, with a final newline. JSON text is UTF-8, so a string
/// that is not (a file name in another encoding, a label from the command line) has its bad bytes
/// replaced by U+FFFD rather than failing the run.
std::string to_json_text(const nlohmann::json& document);
std::string to_csv(const std::vector<ModelReport>& models);
std::string to_table(const std::vector<ModelReport>& models);

/// Parses a JSON document written by to_json (for `plot` and `check`). Throws kvrank::Error naming
/// `file_name` and the missing/invalid field.
std::vector<ModelReport> reports_from_json(const nlohmann::json& document,
                                           const std::string& file_name);

}  // namespace kvrank

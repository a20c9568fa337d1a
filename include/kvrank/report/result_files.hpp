// Writers and readers of analysis results: JSON (docs/result-format.md, the JSON Schema
// docs/schema/kvrank-result.schema.json), CSV and TSV, terminal table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvrank/base/atomic_file.hpp"  // write_file_atomically, used with every writer
#include "kvrank/report/result_model.hpp"

namespace kvrank {

/// The schema_version analyze and merge write. reports_from_json reads this one and every
/// earlier one (version 1: no step or provenance, a layer's kept heads named "heads").
inline constexpr int kSchemaVersion = 2;

struct ReportOptions {
  bool include_similarity = false;  ///< `--similarity`: add each layer's H×H matrix
};

nlohmann::json to_json(const std::vector<ModelReport>& models, const ReportOptions& options = {});
/// A JSON document as text: indented by 2, with a final newline. JSON text is UTF-8, so a string
/// that is not (a file name in another encoding, a label from the command line) has its bad bytes
/// replaced by U+FFFD rather than failing the run.
std::string to_json_text(const nlohmann::json& document);
/// The CSV (or with separator '\t' the TSV): one row per model and layer, the model's label, step,
/// source, family, variant, repr and geometry on every row; with `summary` one row per model and
/// representation holding the means instead.
struct TableOptions {
  char separator = ',';
  bool summary = false;
};
std::string to_csv(const std::vector<ModelReport>& models, const TableOptions& options = {});
std::string to_table(const std::vector<ModelReport>& models);

/// Parses a JSON document written by to_json (for `plot` and `check`). Throws kvrank::Error naming
/// `file_name` and the missing/invalid field.
std::vector<ModelReport> reports_from_json(const nlohmann::json& document,
                                           const std::string& file_name);

}  // namespace kvrank

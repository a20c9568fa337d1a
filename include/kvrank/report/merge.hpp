// `kvrank merge`: joins result files written by `analyze --format json` over parts of one job
// (one checkpoint or one layer shard each, e.g. Slurm array tasks) into the document a single
// `analyze` over the same inputs would have written, byte for byte.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kvrank {

/// One part: a result document and the file it came from (named in every error).
struct ResultPart {
  std::string file;
  nlohmann::json document;
};

struct MergeOptions {
  /// The `--layers` selection the parts were cut from; empty: every layer of each model.
  std::optional<std::vector<int>> layers;
};

/// Merges parts. A model is a (label, repr) pair; models appear in the order they first appear in
/// the parts (parts in the order given, then models in file order), each with its layers sorted
/// and its summary recomputed. Every part must share schema and tool version, and every part
/// holding a model must agree on its path, step, provenance, family, variant and geometry — all
/// but the --layers each part was cut to: the merged provenance names `options.layers` (or every
/// layer), as one analyze with that --layers would. Reads schema_version 1 and 2 parts and writes
/// the current version. Throws kvrank::Error on
/// an overlap (a layer in two parts), a gap (a selected layer in no part) or any disagreement.
/// A fully-redundant baseline (`--with-baseline`) must be identical wherever it appears and is
/// written once, last, as analyze writes it.
nlohmann::json merge_results(const std::vector<ResultPart>& parts,
                             const MergeOptions& options = {});

}  // namespace kvrank

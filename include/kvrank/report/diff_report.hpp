// What changed between two models of one shape (`kvrank diff A B`, docs/diff.md): per layer the
// metrics of both and their change, and per head the cosine similarity of head h's form in A and
// in B (analysis/diff.hpp computes it from the checkpoints). Writers: JSON (schema
// docs/schema/diff.schema.json), CSV/TSV and the terminal table. Needs no checkpoint reader.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvrank/report/result_model.hpp"

namespace kvrank {

/// The schema_version of diff's JSON (its own schema: not a result file of analyze).
inline constexpr int kDiffSchemaVersion = 1;

/// One representation (and attention series) of A and of B, layer by layer.
struct SeriesDiff {
  ModelReport a;
  ModelReport b;  ///< the same layers as `a`, in the same order
  /// head_similarity[i][h]: cos(A_h, B_h) = ⟨A_h, B_h⟩_F / (‖A_h‖_F ‖B_h‖_F) in layer
  /// a.layers[i], query head h; NaN where A_h or B_h is zero. Empty when the heads were not
  /// compared (result files hold no weights).
  std::vector<std::vector<double>> head_similarity;
};

struct DiffResult {
  std::vector<SeriesDiff> series;
  bool heads_compared = false;  ///< whether head_similarity was computed (both were checkpoints)
};

/// A head and how much it moved: the lower `similarity`, the more.
struct MovedHead {
  std::size_t series = 0;  ///< index into DiffResult::series
  int layer = 0;
  int head = 0;
  double similarity = 0;
};

/// Every compared head, the ones that moved most (lowest similarity) first; zero heads (NaN) left
/// out. Ties keep the order series, layer, head.
std::vector<MovedHead> heads_by_movement(const DiffResult& diff);

/// Throws kvrank::Error (one line naming the first difference, "heads 8 vs 4") unless `a` and `b`
/// have the same heads, key/value heads, head size, hidden size, layers and attention layers.
/// The latent ranks (LRKV r, MLA's latent) may differ: the forms are d × d either way.
void check_same_geometry(const ModelReport& a, const ModelReport& b);

/// Pairs the models of two result files (or analyses) by representation and attention series,
/// baselines left out. Throws kvrank::Error when one side holds several models of one
/// representation (diff compares one model with one), when a representation is on one side only,
/// when the geometries differ, or when the layers differ. `a_name`, `b_name` name the sides in
/// those errors.
std::vector<SeriesDiff> pair_reports(std::vector<ModelReport> a, std::vector<ModelReport> b,
                                     const std::string& a_name, const std::string& b_name);

/// The JSON document; `top` moved heads are listed in "moved_heads".
nlohmann::json diff_to_json(const DiffResult& diff, std::size_t top);
/// One row per representation and layer: each metric of A, of B and its change, then (when the
/// heads were compared) the lowest and mean head similarity and one column per head.
std::string diff_to_csv(const DiffResult& diff, char separator = ',');
/// Per representation a table of the layers, then the `top` heads that moved most.
std::string diff_to_table(const DiffResult& diff, std::size_t top);

}  // namespace kvrank

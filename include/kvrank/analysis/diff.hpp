// `kvrank diff A B` as a library call (docs/diff.md): two checkpoints (or result files) of one
// shape in, per layer the metrics of both and per head how far the head itself moved out.
//
//   cos(A_h, B_h) = ⟨A_h, B_h⟩_F / (‖A_h‖_F ‖B_h‖_F),   A_h = L_h R_hᵀ in A,  B_h = L'_h R'_hᵀ in B
//   ⟨A_h, B_h⟩_F  = Σ_ab (L_hᵀ L'_h)_ab (R_hᵀ R'_h)_ab                 (metric.md §2, across
//   models)
//
// L_hᵀ L'_h is d_h × d_h: a cross-Gram of the two checkpoints' projection rows, so no d × d matrix
// is formed. The similarity is gauge-invariant (W_Q^h M, W_K^h M⁻ᵀ in B leaves it unchanged) and
// sees a permutation of the heads, which the layer metrics do not.
//
// Usage:
//   ModelInput a = resolve_model_argument("base/"), b = resolve_model_argument("tuned/");
//   DiffResult d = diff_models(a, b, {});                  // qk and ov, every layer
//   for (const MovedHead& head : heads_by_movement(d)) …  // report/diff_report.hpp
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/analysis/model_inputs.hpp"
#include "kvrank/base/factors.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/report/diff_report.hpp"

namespace kvrank {

struct DiffOptions {
  std::vector<Repr> reprs;                 ///< empty: qk and ov (k and v for K/V-only inputs)
  std::optional<std::vector<int>> layers;  ///< empty: every attention layer
  LayoutOverrides layout;                  ///< applied to both checkpoints
  AttentionChoice attention = AttentionChoice::all;
  OpenOptions open;
  /// Notes for stderr (what analyze says, e.g. folded gains). May be empty.
  std::function<void(const std::string& message)> note;
};

/// cos(A_h, B_h) for every head h of one layer and one representation (the file comment): NaN
/// where A_h or B_h is zero, clamped to [−1, 1]. Identical factors give exactly 1. Throws
/// kvrank::Error unless both have the same number of heads, the same width of each side (d, or T
/// for activations) and the same symmetry (representation).
std::vector<double> head_similarity(const HeadFactors& a, const HeadFactors& b);

/// Whether `path` is a result file of `kvrank analyze` (a .json file) rather than a checkpoint.
bool is_result_file(const std::filesystem::path& path);

/// Both checkpoints analysed (diff's own representations: qk and ov by default), their geometry
/// checked (check_same_geometry, before any layer is read), and every head compared, layer by
/// layer. `a.label`, `b.label` label the sides.
DiffResult diff_checkpoints(const ModelInput& a, const ModelInput& b, const DiffOptions& options);

/// `kvrank diff A B`: two checkpoints as diff_checkpoints; a result file on either side gives
/// per-layer metric changes only (heads_compared false), its models chosen by `options.reprs`
/// (empty: every representation it holds).
DiffResult diff_models(const ModelInput& a, const ModelInput& b, const DiffOptions& options);

}  // namespace kvrank

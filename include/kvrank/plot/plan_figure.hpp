// The figure of a `kvrank plan` result (`kvrank plot plan.json`): per layer, how much the plan's
// merge loses against contiguous groups and the median of random ones, and the erank of the
// attention forms before and after the conversion (docs/plan.md, "The figure").
#pragma once

#include <string>
#include <vector>

#include "kvrank/plot/svg.hpp"

namespace kvrank {

/// One layer of a planned model, as the figure draws it.
struct PlanFigureLayer {
  int layer = 0;
  /// The plan objective's error (qk_error, or key_error + value_error) of the plan, of
  /// contiguous groups and the median over random partitions.
  double plan = 0, contiguous = 0, random_median = 0;
  /// erank of the qk forms: the original layer, and after each conversion (NaN: no queries).
  double erank_before = 0, erank_plan = 0, erank_contiguous = 0, erank_random_median = 0;
};

struct PlanFigureModel {
  std::string label;
  std::string error_name;  ///< the y label of the error panel ("qk_error", …)
  int kv_heads = 0, kv_heads_after = 0;
  std::vector<PlanFigureLayer> layers;
  /// Heads the model's panels when not empty (plot's FILE=Title); else several models are told
  /// apart by their labels.
  std::string title;
};

/// SVG of the plans: two panels per model (its error, its erank_qk), the layers along x; one
/// series per grouping ("plan", "contiguous", "random median") and the original layer's erank
/// ("before"). Throws kvrank::Error when a model has no layers.
std::string plot_plan_svg(const std::vector<PlanFigureModel>& models, const PlotOptions& options);

}  // namespace kvrank

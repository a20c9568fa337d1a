// Private: `kvrank plot` of a plan file (plan.cpp), for plot.cpp.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kvrank/plot/figure_options.hpp"

namespace kvrank::app::detail {

/// The plan figure (plot/plan_figure.hpp) of `inputs` when the first is a `kvrank plan` JSON file
/// (recognised by its "kind"), with what was drawn; nullopt when it is not, and the inputs are
/// result files. Throws kvrank::Error naming the file for a broken plan file, or for a plan file
/// mixed with others.
struct PlanFigure {
  std::string svg;
  std::string drawn;
};
std::optional<PlanFigure> plan_figure(const std::vector<std::string>& inputs,
                                      const PlotOptions& options);

}  // namespace kvrank::app::detail

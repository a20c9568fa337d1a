// Private: `kvrank plot` of a plan file (plan.cpp), for plot.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/plot/figure_options.hpp"

namespace kvrank::app::detail {

/// An input of `plot`: FILE, or FILE=Title with its title.
struct PlotInput {
  std::string file;
  std::optional<std::string> title;
};

/// The plan figure (plot/plan_figure.hpp) of `inputs`, the first of which holds `first` (its JSON,
/// read by the caller: a `kvrank plan` file, recognised by its "kind"), with what was drawn. A
/// title (FILE=Title) heads the panels of that file's models. Throws kvrank::Error naming the file
/// for a broken plan file, or for a plan file mixed with others.
struct PlanFigure {
  std::string svg;
  std::string drawn;
};
PlanFigure plan_figure(const nlohmann::json& first, const std::vector<PlotInput>& inputs,
                       const PlotOptions& options);

}  // namespace kvrank::app::detail

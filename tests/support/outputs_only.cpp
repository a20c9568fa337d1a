// Built against kvrank_plot alone (tests/CMakeLists.txt): the outputs — JSON/CSV/table writers,
// `check`, `merge`, the figures — link without the checkpoint readers. It also checks that what it
// writes reads back, so a broken writer fails here too.
#include <cstdio>

#include "kvrank/plot/svg.hpp"
#include "kvrank/report/check.hpp"
#include "kvrank/report/merge.hpp"
#include "kvrank/report/result_files.hpp"

int main() {
  kvrank::ModelReport model;
  model.label = "identity";
  model.variant = "mha";
  model.geometry.heads = 3;
  model.geometry.num_layers = 1;
  model.layers.push_back(kvrank::similarity_metrics(kvrank::MatrixD::Identity(3, 3)));
  model.summary = kvrank::summarize(model.layers);
  const std::vector<kvrank::ModelReport> models{model};
  const nlohmann::json document = kvrank::to_json(models);
  const auto read_back = kvrank::reports_from_json(document, "memory");
  const std::vector<kvrank::ResultPart> parts{{"memory", document}};
  const bool merges_back = kvrank::merge_results(parts) == document;
  const kvrank::CheckOptions check_options;
  kvrank::Panel panel;
  panel.title = "panel";
  panel.models = models;
  const kvrank::PlotOptions plot_options;
  const bool ok = read_back.size() == 1 && read_back[0].layers[0].erank == model.layers[0].erank &&
                  kvrank::check_reports(read_back, models, check_options, "a", "b").empty() &&
                  merges_back && !kvrank::to_csv(models).empty() &&
                  !kvrank::to_table(models).empty() &&
                  !kvrank::plot_curves_svg({panel}, plot_options).empty();
  if (!ok) std::fputs("outputs_only: a writer did not round-trip\n", stderr);
  return ok ? 0 : 1;
}

// The binding of `kvrank plan` (plan.hpp): kvrank._kvrank.plan(...) returns the JSON text of
// `kvrank plan --format json`; python/kvrank/plan.py wraps it (to_dict, to_pandas).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "kvrank/analysis/plan.hpp"

namespace py = pybind11;

namespace kvrank::python {

namespace {

std::string plan_text(const std::vector<std::string>& paths, const std::vector<std::string>& labels,
                      int kv_heads, bool align, const std::string& objective,
                      const std::string& rope, const std::string& layers,
                      std::optional<double> latent_energy, int random, std::uint64_t seed) {
  PlanOptions options;
  options.kv_heads_after = kv_heads;
  options.align = align;
  options.objective = parse_plan_objective(objective);
  if (!rope.empty()) options.rope = parse_rope_convention(rope);
  options.layers = layers;
  options.latent_energy = latent_energy;
  options.random_partitions = random;
  options.seed = seed;
  std::vector<PlanModel> models;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    py::gil_scoped_release release;
    models.push_back(plan_checkpoint(Checkpoint::open(paths[i]), {}, options,
                                     i < labels.size() ? labels[i] : ""));
  }
  return plan_json(models);
}

}  // namespace

void add_plan_bindings(py::module_& m) {
  m.def("plan", &plan_text, py::arg("paths"), py::arg("labels"), py::arg("kv_heads"),
        py::arg("align"), py::arg("objective"), py::arg("rope"), py::arg("layers"),
        py::arg("latent_energy"), py::arg("random"), py::arg("seed"));
}

}  // namespace kvrank::python

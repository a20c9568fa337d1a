// The binding of `kvrank plan` (plan.hpp): kvrank._kvrank.plan(...) returns the JSON text of
// `kvrank plan --format json`; python/kvrank/plan.py wraps it (to_dict, to_pandas).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/app/commands.hpp"
#include "kvrank/app/requests.hpp"

namespace py = pybind11;

namespace kvrank::python {

namespace {

/// `kvrank plan --format json`: the request's validate() and the parsers check every value; an
/// option left unset (None) keeps the request's default, as on the command line.
std::string plan_json_text(const std::vector<std::string>& paths,
                           const std::vector<std::string>& labels, int kv_heads,
                           const std::optional<std::string>& gauge,
                           const std::optional<std::string>& objective, const std::string& rope,
                           const std::string& layers, std::optional<double> latent_energy,
                           std::optional<int> random, std::optional<std::uint64_t> seed,
                           std::optional<bool> refit) {
  app::PlanRequest request;
  request.inputs = paths;
  request.labels = labels;
  request.format = app::ResultFormat::json;
  request.options.kv_heads_after = kv_heads;
  if (gauge) request.options.align = app::parse_gauge(*gauge);
  if (objective) request.options.objective = parse_plan_objective(*objective);
  if (!rope.empty()) request.options.rope = parse_rope_convention(rope);
  request.options.layers = layers;
  request.options.latent_energy = latent_energy;
  if (random) request.options.random_partitions = *random;
  if (seed) request.options.seed = *seed;
  request.options.refit = refit;
  py::gil_scoped_release release;
  return app::plan_text(request, {});
}

}  // namespace

void add_plan_bindings(py::module_& m) {
  m.def("plan", &plan_json_text, py::arg("paths"), py::arg("labels"), py::arg("kv_heads"),
        py::arg("gauge"), py::arg("objective"), py::arg("rope"), py::arg("layers"),
        py::arg("latent_energy"), py::arg("random"), py::arg("seed"), py::arg("refit"));
}

}  // namespace kvrank::python

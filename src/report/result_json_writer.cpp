// The JSON writer of analysis results (result_files.hpp, docs/result-format.md); the reader is in
// result_files.cpp.
#include <utility>

#include "kvrank/base/version.hpp"
#include "kvrank/report/result_files.hpp"
#include "report/head_pairs_json.hpp"

namespace kvrank {

using nlohmann::json;

namespace {

template <typename T>
json optional_value(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

json provenance_source(const Provenance& source) {
  return {{"input", optional_value(source.input)},
          {"hf_repo", optional_value(source.hf_repo)},
          {"hf_revision", optional_value(source.hf_revision)}};
}

json provenance_options(const Provenance& source) {
  return {{"layers", optional_value(source.layers)},
          {"map", optional_value(source.map)},
          {"qk_norm_gain", optional_value(source.qk_norm_gain)},
          {"input_norm_gain", optional_value(source.input_norm_gain)}};
}

json matrix_to_json(const MatrixD& matrix) {
  json rows = json::array();
  for (Index i = 0; i < matrix.rows(); ++i) {
    json row = json::array();
    for (Index j = 0; j < matrix.cols(); ++j) row.push_back(matrix(i, j));
    rows.push_back(std::move(row));
  }
  return rows;
}

json layer_to_json(const LayerMetrics& layer, const ReportOptions& options) {
  json out = {
      {"layer", layer.layer},
      {"kept_heads", layer.heads},
      {"eigenvalues", layer.eigenvalues},
      {"eigenvalues_centered", layer.eigenvalues_centered},
      {"head_erank", layer.head_erank},
      {"head_norm", layer.head_norm},
      {"zero_heads", layer.zero_heads},
  };
  for (const CurveField& field : metric_fields()) {
    const double value = field.value(layer);
    out[std::string(field.name)] = field.integral ? json(static_cast<int>(value)) : json(value);
  }
  if (options.include_similarity) out["similarity"] = matrix_to_json(layer.similarity);
  detail::add_head_pairs(out, layer);  // --pairs
  return out;
}

json summary_to_json(const Summary& summary) {
  json out = json::object();
  for (const CurveField& field : metric_fields())
    if (field.mean) out[summary_key(field)] = summary.*field.mean;
  return out;
}

json model_to_json(const ModelReport& model, const ReportOptions& options) {
  json layers = json::array();
  for (const LayerMetrics& layer : model.layers) layers.push_back(layer_to_json(layer, options));
  json out = {
      {"step", optional_value(model.step)},
      {"source", provenance_source(model.source)},
      {"dtype", optional_value(model.source.dtype)},
      {"options", provenance_options(model.source)},
      {"label", model.label},
      {"path", model.path},
      {"family", model.family},
      {"model_type", model.model_type.empty() ? json() : json(model.model_type)},
      {"variant", model.variant},
      {"repr", model.repr},
      {"layers", std::move(layers)},
      {"summary", summary_to_json(model.summary)},
  };
  for (const GeometryField& field : geometry_fields())
    out[std::string(field.name)] = model.geometry.*field.value;
  for (const OptionalGeometryField& field : optional_geometry_fields())
    out[std::string(field.name)] = optional_value(model.geometry.*field.value);
  // Only an encoder's or encoder-decoder's series has the key: other results stay as they were.
  if (model.attention)
    out["attention"] = {{"stack", stack_name(model.attention->stack)},
                        {"kind", kind_name(model.attention->kind)}};
  if (!model.attention_layers.empty()) out["attention_layers"] = model.attention_layers;
  // The training run named by the caller (Python's run=); absent otherwise, as in older files.
  if (model.run) out["run"] = *model.run;
  return out;
}

}  // namespace

// nlohmann::json writes doubles with 17 significant digits, so the JSON round-trips exactly.
json to_json(const std::vector<ModelReport>& models, const ReportOptions& options) {
  json model_array = json::array();
  for (const ModelReport& model : models) model_array.push_back(model_to_json(model, options));
  return {
      {"schema_version", kSchemaVersion},
      {"tool", {{"name", "kvrank"}, {"version", version()}}},
      {"models", std::move(model_array)},
  };
}

std::string to_json_text(const json& document) {
  return document.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace kvrank

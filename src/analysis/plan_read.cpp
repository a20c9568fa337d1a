// Reading back a `kvrank plan` JSON file (plan.hpp): what its figure (`kvrank plot plan.json`)
// draws. Every field read is checked by the result reader's FieldReader: a file that is not a
// plan, or a field missing or of the wrong type, is one line naming the field's place.
#include <limits>
#include <nlohmann/json.hpp>

#include "kvrank/analysis/plan.hpp"
#include "kvrank/base/error.hpp"
#include "report/field_reader.hpp"

namespace kvrank {
namespace {

using nlohmann::json;
using report_detail::FieldReader;

/// A number, or null for "not defined" (NaN: no queries).
double number_or_nan(const FieldReader& reader, const char* name) {
  return reader.optional_number(name).value_or(std::numeric_limits<double>::quiet_NaN());
}

/// The reader of `name`, an object inside `reader`'s.
FieldReader child(const FieldReader& reader, const char* name) {
  return {reader.field(name), reader.place(name), reader.file()};
}

std::vector<std::vector<int>> read_groups(const FieldReader& reader) {
  const json& groups = reader.array("groups");
  std::vector<std::vector<int>> heads;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::string at = reader.place("groups") + "[" + std::to_string(g) + "]";
    if (!groups[g].is_array())
      reader.fail(at, "expected an array of heads, found " + FieldReader::type_of(groups[g]));
    heads.emplace_back();
    for (std::size_t i = 0; i < groups[g].size(); ++i)
      heads.back().push_back(reader.count_item(groups[g][i], at + "[" + std::to_string(i) + "]"));
  }
  return heads;
}

GroupingScore read_score(const FieldReader& reader, bool with_groups) {
  GroupingScore score;
  if (with_groups) score.groups = read_groups(reader);
  score.key_error = number_or_nan(reader, "key_error");
  score.value_error = number_or_nan(reader, "value_error");
  score.qk_error = number_or_nan(reader, "qk_error");
  score.erank_qk_after = number_or_nan(reader, "erank_qk_after");
  score.erank_k_after = number_or_nan(reader, "erank_k_after");
  return score;
}

PlanLayer read_layer(const FieldReader& reader) {
  PlanLayer layer;
  layer.layer = reader.integer("layer");
  layer.exact = reader.boolean("exact");
  layer.plan = read_score(reader, true);
  layer.erank_qk_before = number_or_nan(reader, "erank_qk_before");
  layer.contiguous = read_score(child(reader, "contiguous"), true);
  layer.random_median = read_score(child(reader, "random_median"), false);
  return layer;
}

PlanModel read_model(const FieldReader& reader) {
  PlanModel model;
  model.label = reader.string("label");
  model.path = reader.string("path");
  model.family = reader.string("family");
  model.heads = reader.integer("heads");
  model.kv_heads = reader.integer("kv_heads");
  model.kv_heads_after = reader.integer("kv_heads_after");
  model.head_dim = reader.integer("head_dim");
  model.objective =
      parse_plan_objective(reader.choice("objective", {plan_objective_name(PlanObjective::merge),
                                                       plan_objective_name(PlanObjective::qk)}));
  model.random_partitions = reader.integer("random_partitions");
  const json& layers = reader.array("layers");
  for (std::size_t i = 0; i < layers.size(); ++i)
    model.layers.push_back(read_layer(FieldReader(
        layers[i], reader.place("layers") + "[" + std::to_string(i) + "]", reader.file())));
  return model;
}

}  // namespace

bool is_plan_document(const nlohmann::json& document) {
  const auto kind = document.find("kind");
  return kind != document.end() && kind->is_string() && *kind == "plan";
}

std::vector<PlanModel> plans_from_json(const nlohmann::json& document, const std::string& path) {
  const FieldReader top(document, "", path);
  top.choice("kind", {"plan"});
  const json& models = top.array("models");
  if (models.empty()) top.fail("models", "expected at least one planned model, found none");
  std::vector<PlanModel> plans;
  for (std::size_t i = 0; i < models.size(); ++i)
    plans.push_back(read_model(FieldReader(models[i], "models[" + std::to_string(i) + "]", path)));
  return plans;
}

}  // namespace kvrank

// Reading back a `kvrank plan` JSON file (plan.hpp): what its figure (`kvrank plot plan.json`)
// draws. Every field read is checked; a file that is not a plan, or a field of the wrong type, is
// one line naming the field.
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "kvrank/analysis/plan.hpp"
#include "kvrank/base/error.hpp"

namespace kvrank {
namespace {

using nlohmann::json;

/// A field of `object` with its place in the file, for the messages.
class Reader {
 public:
  Reader(const json& object, std::string place, const std::string& path)
      : object_(object), place_(std::move(place)), path_(path) {}

  const json& field(const char* name, json::value_t type) const {
    const auto found = object_.find(name);
    const bool number = type == json::value_t::number_float;
    if (found == object_.end() || (number ? !found->is_number() : found->type() != type))
      fail(name, number                          ? "a number"
                 : type == json::value_t::array  ? "an array"
                 : type == json::value_t::object ? "an object"
                 : type == json::value_t::string ? "a string"
                                                 : "an integer");
    return *found;
  }
  int integer(const char* name) const {
    const auto found = object_.find(name);
    if (found == object_.end() || !found->is_number_integer() ||
        found->get<long long>() < std::numeric_limits<int>::min() ||
        found->get<long long>() > std::numeric_limits<int>::max())
      fail(name, "an integer");
    return found->get<int>();
  }
  /// A number, or null for "not defined" (NaN).
  double number(const char* name) const {
    const auto found = object_.find(name);
    if (found != object_.end() && found->is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (found == object_.end() || !found->is_number()) fail(name, "a number or null");
    return found->get<double>();
  }
  std::string text(const char* name) const {
    return field(name, json::value_t::string).get<std::string>();
  }
  Reader child(const char* name) const {
    return {field(name, json::value_t::object), place_ + name + ".", path_};
  }
  const std::string& place() const { return place_; }
  const std::string& path() const { return path_; }

  [[noreturn]] void fail(const char* name, const char* what) const {
    throw Error(path_, "not a kvrank plan file: " + place_ + name + " must be " + what);
  }

 private:
  const json& object_;
  std::string place_;
  const std::string& path_;
};

std::vector<std::vector<int>> read_groups(const Reader& reader) {
  std::vector<std::vector<int>> groups;
  for (const json& group : reader.field("groups", json::value_t::array)) {
    if (!group.is_array()) reader.fail("groups", "an array of arrays of heads");
    groups.emplace_back();
    for (const json& head : group) {
      if (!head.is_number_integer() || head.get<long long>() < 0 ||
          head.get<long long>() > std::numeric_limits<int>::max())
        reader.fail("groups", "an array of arrays of heads");
      groups.back().push_back(head.get<int>());
    }
  }
  return groups;
}

GroupingScore read_score(const Reader& reader, bool with_groups) {
  GroupingScore score;
  if (with_groups) score.groups = read_groups(reader);
  score.key_error = reader.number("key_error");
  score.value_error = reader.number("value_error");
  score.qk_error = reader.number("qk_error");
  score.erank_qk_after = reader.number("erank_qk_after");
  score.erank_k_after = reader.number("erank_k_after");
  return score;
}

PlanLayer read_layer(const Reader& reader) {
  PlanLayer layer;
  layer.layer = reader.integer("layer");
  layer.exact = reader.field("exact", json::value_t::boolean).get<bool>();
  layer.plan = read_score(reader, true);
  layer.erank_qk_before = reader.number("erank_qk_before");
  layer.contiguous = read_score(reader.child("contiguous"), true);
  layer.random_median = read_score(reader.child("random_median"), false);
  return layer;
}

PlanModel read_model(const Reader& reader) {
  PlanModel model;
  model.label = reader.text("label");
  model.path = reader.text("path");
  model.family = reader.text("family");
  model.heads = reader.integer("heads");
  model.kv_heads = reader.integer("kv_heads");
  model.kv_heads_after = reader.integer("kv_heads_after");
  model.head_dim = reader.integer("head_dim");
  try {
    model.objective = parse_plan_objective(reader.text("objective"));
  } catch (const Error&) {
    reader.fail("objective", "\"merge\" or \"qk\"");
  }
  model.random_partitions = reader.integer("random_partitions");
  const json& layers = reader.field("layers", json::value_t::array);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::string place = reader.place() + "layers[" + std::to_string(i) + "].";
    if (!layers[i].is_object()) Reader(layers, place, reader.path()).fail("", "an object");
    model.layers.push_back(read_layer(Reader(layers[i], place, reader.path())));
  }
  return model;
}

}  // namespace

bool is_plan_document(const nlohmann::json& document) {
  const auto kind = document.find("kind");
  return kind != document.end() && kind->is_string() && *kind == "plan";
}

std::vector<PlanModel> plans_from_json(const nlohmann::json& document, const std::string& path) {
  const Reader top(document, "", path);
  if (!is_plan_document(document)) top.fail("kind", "\"plan\"");
  const json& models = top.field("models", json::value_t::array);
  std::vector<PlanModel> plans;
  for (std::size_t i = 0; i < models.size(); ++i) {
    const std::string place = "models[" + std::to_string(i) + "].";
    if (!models[i].is_object()) Reader(models, place, path).fail("", "an object");
    plans.push_back(read_model(Reader(models[i], place, path)));
  }
  if (plans.empty()) top.fail("models", "a non-empty array");
  return plans;
}

}  // namespace kvrank

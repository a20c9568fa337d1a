// Writers of `kvrank plan`'s result: JSON (docs/schema/kvrank-plan.schema.json), a terminal
// table and CSV.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kvrank/analysis/plan.hpp"
#include "kvrank/base/version.hpp"

namespace kvrank {
namespace {

using nlohmann::json;

constexpr int kPlanSchemaVersion = 1;

json number_or_null(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

json score_json(const GroupingScore& score, bool with_groups) {
  json out = json::object();
  if (with_groups) out["groups"] = score.groups;
  out["key_error"] = number_or_null(score.key_error);
  out["value_error"] = number_or_null(score.value_error);
  out["qk_error"] = number_or_null(score.qk_error);
  out["erank_qk_after"] = number_or_null(score.erank_qk_after);
  out["erank_k_after"] = number_or_null(score.erank_k_after);
  return out;
}

json layer_json(const PlanLayer& layer) {
  json out = score_json(layer.plan, true);
  out["layer"] = layer.layer;
  out["exact"] = layer.exact;
  out["erank_qk_before"] = number_or_null(layer.erank_qk_before);
  out["contiguous"] = score_json(layer.contiguous, true);
  out["random_median"] = score_json(layer.random_median, false);
  if (layer.latent_rank) out["latent_rank"] = *layer.latent_rank;
  if (layer.latent_rank_forms) out["latent_rank_forms"] = *layer.latent_rank_forms;
  return out;
}

json model_json(const PlanModel& model) {
  json layers = json::array();
  for (const PlanLayer& layer : model.layers) layers.push_back(layer_json(layer));
  return {{"label", model.label},
          {"path", model.path},
          {"family", model.family},
          {"model_type", model.model_type.empty() ? json(nullptr) : json(model.model_type)},
          {"heads", model.heads},
          {"kv_heads", model.kv_heads},
          {"kv_heads_after", model.kv_heads_after},
          {"head_dim", model.head_dim},
          {"gauge", {{"keys", model.key_gauge}, {"values", model.value_gauge}}},
          {"objective", std::string(plan_objective_name(model.objective))},
          {"random_partitions", model.random_partitions},
          {"latent_energy", model.latent_energy ? json(*model.latent_energy) : json(nullptr)},
          {"refit", model.refit},
          {"layers", layers}};
}

std::string fixed(double value, int digits) {
  if (!std::isfinite(value)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string groups_text(const std::vector<std::vector<int>>& groups) {
  std::string text;
  for (const auto& group : groups) {
    text += text.empty() ? "(" : " (";
    for (std::size_t i = 0; i < group.size(); ++i)
      text += (i ? "," : "") + std::to_string(group[i]);
    text += ")";
  }
  return text;
}

/// A CSV field in double quotes, quotes inside doubled (RFC 4180).
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

/// The error the objective minimises, of one grouping.
double objective_error(const PlanModel& model, const GroupingScore& score) {
  return model.objective == PlanObjective::qk ? score.qk_error
                                              : score.key_error + score.value_error;
}

}  // namespace

std::string plan_json(const std::vector<PlanModel>& models) {
  json document = {{"schema_version", kPlanSchemaVersion},
                   {"tool", {{"name", "kvrank"}, {"version", std::string(version())}}},
                   {"kind", "plan"},
                   {"models", json::array()}};
  for (const PlanModel& model : models) document["models"].push_back(model_json(model));
  return document.dump(2) + "\n";
}

std::string plan_table(const std::vector<PlanModel>& models) {
  std::string out;
  for (const PlanModel& model : models) {
    out += model.label + ": " + std::to_string(model.kv_heads) + " -> " +
           std::to_string(model.kv_heads_after) + " KV heads, objective " +
           std::string(plan_objective_name(model.objective)) +
           (model.refit ? " with refit" : " with mean-pool") + ", gauge keys " + model.key_gauge +
           " / values " + model.value_gauge + "\n";
    out += "layer  error(plan  contig  random)  qk_error  erank_qk(before  after)  exact  groups\n";
    for (const PlanLayer& layer : model.layers) {
      char row[256];
      std::snprintf(row, sizeof row, "%5d  %11s %7s %7s  %8s  %15s %6s  %5s  ", layer.layer,
                    fixed(objective_error(model, layer.plan), 4).c_str(),
                    fixed(objective_error(model, layer.contiguous), 4).c_str(),
                    fixed(objective_error(model, layer.random_median), 4).c_str(),
                    fixed(layer.plan.qk_error, 4).c_str(), fixed(layer.erank_qk_before, 2).c_str(),
                    fixed(layer.plan.erank_qk_after, 2).c_str(), layer.exact ? "yes" : "no");
      out += row + groups_text(layer.plan.groups);
      if (layer.latent_rank) out += "  latent_rank " + std::to_string(*layer.latent_rank);
      if (layer.latent_rank_forms) out += " forms " + std::to_string(*layer.latent_rank_forms);
      out += "\n";
    }
  }
  return out;
}

std::string plan_csv(const std::vector<PlanModel>& models) {
  std::string out =
      "label,layer,kv_heads,kv_heads_after,objective,refit,exact,groups,key_error,value_error,qk_"
      "error,"
      "erank_qk_before,erank_qk_after,erank_k_after,contiguous_key_error,contiguous_value_error,"
      "contiguous_qk_error,contiguous_erank_qk_after,random_key_error,random_value_error,"
      "random_qk_error,random_erank_qk_after,latent_rank,latent_rank_forms\n";
  auto cell = [](double value) { return std::isfinite(value) ? fixed(value, 8) : std::string(); };
  for (const PlanModel& model : models)
    for (const PlanLayer& layer : model.layers) {
      std::string groups = groups_text(layer.plan.groups);
      out += quoted(model.label) + "," + std::to_string(layer.layer) + "," +
             std::to_string(model.kv_heads) + "," + std::to_string(model.kv_heads_after) + "," +
             std::string(plan_objective_name(model.objective)) + "," +
             (model.refit ? "true," : "false,") + (layer.exact ? "true" : "false") + ",\"" +
             groups + "\"";
      for (const GroupingScore* score : {&layer.plan, &layer.contiguous, &layer.random_median}) {
        out += "," + cell(score->key_error) + "," + cell(score->value_error) + "," +
               cell(score->qk_error);
        if (score == &layer.plan) out += "," + cell(layer.erank_qk_before);
        out += "," + cell(score->erank_qk_after);
        if (score == &layer.plan) out += "," + cell(score->erank_k_after);
      }
      out += "," + (layer.latent_rank ? std::to_string(*layer.latent_rank) : std::string()) + "," +
             (layer.latent_rank_forms ? std::to_string(*layer.latent_rank_forms) : "");
      out += "\n";
    }
  return out;
}

}  // namespace kvrank

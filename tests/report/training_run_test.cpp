// Tests of training_run.hpp: the step and the run of a checkpoint, read from its path.
#include "kvrank/report/training_run.hpp"

#include "kvrank/report/result_files.hpp"
#include "support/catch.hpp"

namespace kvrank {
namespace {

ModelReport at(const std::string& path) {
  ModelReport model;
  model.path = path;
  return model;
}

}  // namespace

TEST_CASE("step_from_folder_name reads the trainers' checkpoint folder names", "[training_run]") {
  CHECK(step_from_folder_name("checkpoint-1000") == 1000);
  CHECK(step_from_folder_name("step-0") == 0);
  CHECK(step_from_folder_name("global_step_250") == 250);
  CHECK(step_from_folder_name("global_step250") == 250);
  CHECK(step_from_folder_name("checkpoint-9223372036854775807") == INT64_MAX);
  CHECK(step_from_folder_name("checkpoint-9223372036854775808") == std::nullopt);  // > int64
  CHECK(step_from_folder_name("checkpoint-") == std::nullopt);
  CHECK(step_from_folder_name("checkpoint-12a") == std::nullopt);
  CHECK(step_from_folder_name("checkpoint--5") == std::nullopt);
  CHECK(step_from_folder_name("checkpoint-+5") == std::nullopt);
  CHECK(step_from_folder_name("Checkpoint-5") == std::nullopt);
  CHECK(step_from_folder_name("mha") == std::nullopt);
}

TEST_CASE("step_from_path asks the checkpoint folder, or the folder of a checkpoint file",
          "[training_run]") {
  CHECK(step_from_path("runs/mha/checkpoint-2000") == 2000);
  CHECK(step_from_path("runs/mha/checkpoint-2000/") == 2000);
  CHECK(step_from_path("runs/mha/checkpoint-2000/model.safetensors") == 2000);
  CHECK(step_from_path("/abs/global_step_7/mp_rank_00_model_states.safetensors") == 7);
  CHECK(step_from_path("step-5/runs/mha/final") == std::nullopt);  // too far up to be its step
  CHECK(step_from_path("model.safetensors") == std::nullopt);
}

TEST_CASE("training_run names the folder holding the checkpoints", "[training_run]") {
  CHECK(training_run(at("runs/mha/checkpoint-1000")) == "mha");
  CHECK(training_run(at("runs/mha/checkpoint-1000/")) == "mha");
  CHECK(training_run(at("runs/mha/checkpoint-1000/model.safetensors")) == "mha");
  CHECK(training_run(at("/abs/runs/lrkv/step-3")) == "lrkv");
  CHECK(training_run(at("runs/mha/final")) == "mha");  // step from --step or trainer_state.json
  CHECK(training_run(at("checkpoint-1000")) == ".");
}

TEST_CASE("a named run wins over the path, and the result file keeps it", "[training_run]") {
  ModelReport model = at("<in memory>");
  CHECK(training_run(model) == ".");
  model.run = "mha-baseline";
  CHECK(training_run(model) == "mha-baseline");
  model.step = 100;
  const nlohmann::json document = to_json({model});
  CHECK(document["models"][0]["run"] == "mha-baseline");
  const std::vector<ModelReport> read = reports_from_json(document, "r.json");
  REQUIRE(read.size() == 1);
  CHECK(read[0].run == std::optional<std::string>("mha-baseline"));
  CHECK(training_run(read[0]) == "mha-baseline");
  // Unnamed: no "run" key (files as before), and none read back.
  const nlohmann::json unnamed = to_json({at("runs/mha/checkpoint-5")});
  CHECK_FALSE(unnamed["models"][0].contains("run"));
  CHECK_FALSE(reports_from_json(unnamed, "r.json")[0].run);
}

}  // namespace kvrank

#include "kvrank/analysis/inspect.hpp"

#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/readers_test_files.hpp"

namespace kvrank {
namespace {

std::vector<std::string> names_of(const std::vector<TensorView>& tensors) {
  std::vector<std::string> names;
  for (const TensorView& tensor : tensors) names.push_back(tensor.name);
  return names;
}

}  // namespace

TEST_CASE("inspect: tensors grouped by layer, in JSON and text", "[readers][inspect]") {
  const auto path = test::generated_files("valid") / "sharded";
  Checkpoint checkpoint = Checkpoint::open(path);
  InspectReport report = inspect_checkpoint(checkpoint);
  CHECK(report.path == path.string());
  CHECK(names_of(report.tensors) ==
        std::vector<std::string>{"model.embed_tokens.weight",
                                 "model.layers.0.self_attn.q_proj.weight",
                                 "model.layers.1.self_attn.q_proj.weight"});
  // Detection either succeeds or says why; never both, never neither.
  CHECK(report.series.empty() == !report.detection_error.empty());

  nlohmann::json json = to_json({report});
  CHECK(json["schema_version"] == 1);
  REQUIRE(json["checkpoints"].size() == 1);
  const nlohmann::json& entry = json["checkpoints"][0];
  CHECK(entry["path"] == path.string());
  for (const char* key :
       {"family", "model_type", "variant", "heads", "kv_heads", "head_dim", "d_model", "num_layers",
        "lrkv_rank", "mla_kv_lora_rank", "attention_layers", "series", "detection_error"}) {
    CHECK(entry.contains(key));
  }
  REQUIRE(entry["tensors"].size() == 3);
  const nlohmann::json& embed = entry["tensors"][0];
  CHECK(embed["name"] == "model.embed_tokens.weight");
  CHECK(embed["dtype"] == "F32");
  CHECK(embed["shape"] == nlohmann::json::array({8, 4}));
  CHECK(embed["bytes"] == 8 * 4 * 4);
  CHECK(embed["layer"].is_null());
  CHECK(entry["tensors"][1]["layer"] == 0);
  CHECK(entry["tensors"][2]["layer"] == 1);

  const std::string text = to_text({report});
  INFO(text);
  CHECK(text.starts_with(path.string() + "\n"));
  const auto other = text.find("other tensors"), layer0 = text.find("layer 0"),
             layer1 = text.find("layer 1");
  REQUIRE(other != std::string::npos);
  REQUIRE(layer0 != std::string::npos);
  REQUIRE(layer1 != std::string::npos);
  CHECK(other < layer0);
  CHECK(layer0 < layer1);
  CHECK(text.find("model.layers.1.self_attn.q_proj.weight  F32  [4, 4]  64 B") !=
        std::string::npos);
  CHECK(text.find("3 tensors, 256 B") != std::string::npos);
}

TEST_CASE("inspect: layer numbers of the families' naming schemes", "[readers][inspect]") {
  // Names only matter here: build a report by hand around empty views.
  InspectReport report;
  report.path = "x";
  for (const char* name :
       {"transformer.h.3.attn.c_attn.weight", "gpt_neox.layers.12.attention.dense.weight",
        "layers.7.attention.wq.weight", "lm_head.weight", "h.0x.weight", "model.layers.2"}) {
    TensorView view;
    view.name = name;
    report.tensors.push_back(view);
  }
  report.detection_error = "x: not detected";
  nlohmann::json json = to_json({report});
  const nlohmann::json& tensors = json["checkpoints"][0]["tensors"];
  std::vector<nlohmann::json> layers;
  for (const auto& tensor : tensors) layers.push_back(tensor["layer"]);
  CHECK(layers == std::vector<nlohmann::json>{3, 12, 7, nullptr, nullptr, nullptr});
  CHECK(json["checkpoints"][0]["family"].is_null());
  CHECK(json["checkpoints"][0]["series"] == nlohmann::json::array());
  CHECK(json["checkpoints"][0]["detection_error"] == "x: not detected");
  CHECK(to_text({report}).find("detection failed: x: not detected") != std::string::npos);
}

namespace {

/// inspect on a real Llama GQA checkpoint: every tensor listed in order, and the layout detected
/// (a detection failure fails the test: it used to pass with a warning).
void check_inspect_llama(const std::filesystem::path& path, int layers, int heads, int kv_heads) {
  Checkpoint checkpoint = Checkpoint::open(path);
  InspectReport report = inspect_checkpoint(checkpoint);
  CHECK(report.tensors.size() == checkpoint.tensors().size());
  CHECK(report.tensors.back().name.starts_with("model.layers." + std::to_string(layers - 1) + "."));
  INFO("detection error: " << report.detection_error);
  REQUIRE(report.series.size() == 1);
  CHECK(report.detection_error.empty());
  const ModelLayout& layout = report.series.front();
  CHECK(layout.family == Family::llama);
  CHECK(layout.variant == Variant::gqa);
  CHECK(layout.heads == heads);
  CHECK(layout.kv_heads == kv_heads);
  CHECK_FALSE(layout.attention.has_value());
  const nlohmann::json entry = to_json({report})["checkpoints"][0];
  CHECK(entry["attention_layers"].is_null());  // every layer has heads
  REQUIRE(entry["series"].size() == 1);
  CHECK(entry["series"][0]["attention"].is_null());
  CHECK(entry["series"][0]["heads"] == heads);
}

}  // namespace

TEST_CASE("inspect: data/tiny/gqa", "[readers][inspect]") {
  check_inspect_llama(test::tiny_model("gqa"), 4, 8, 2);
}

TEST_CASE("inspect: the stories260K fixture", "[.shared][inspect]") {
  check_inspect_llama(test::shared_stories260k(), 5, 8, 4);
}

}  // namespace kvrank

// Tests of merge.hpp: parts of a job merge into the document one run writes, and every way parts
// can disagree is refused with its exact message.
#include "kvrank/report/merge.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "kvrank/analysis/analysis.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/version.hpp"
#include "kvrank/report/result_files.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"

namespace kvrank {
namespace {

using nlohmann::json;
using test::error_message;

// Values that do not print exactly in few digits, so any rounding on the way would show.
LayerMetrics make_layer(int index, int heads) {
  LayerMetrics layer;
  layer.layer = index;
  layer.heads = heads;
  layer.erank = 1.0 + index / 3.0;
  layer.erank_centered = 0.5 + index / 7.0;
  layer.erank_pct = 100.0 * layer.erank / heads;
  layer.erank_centered_pct = 100.0 * layer.erank_centered / heads;
  layer.mean_similarity = 0.1 / (index + 3);
  layer.pcs_90 = 1 + index % heads;
  for (int h = 0; h < heads; ++h) {
    layer.eigenvalues.push_back(1.0 / (h + 1 + index));
    layer.eigenvalues_centered.push_back(1.0 / (h + 2));
    layer.head_erank.push_back(std::sqrt(2.0 + h));
    layer.head_norm.push_back(std::exp(-h - index / 11.0));
  }
  layer.similarity = MatrixD::Identity(heads, heads);
  layer.similarity(0, 1) = layer.similarity(1, 0) = -1.0 / (3.0 + index);
  return layer;
}

/// A model with the given layers of `num_layers`, summary as analyze computes it.
ModelReport make_model(const std::string& label, const std::vector<int>& layers, int num_layers = 4,
                       const std::string& repr = "qk") {
  ModelReport model;
  model.label = label;
  model.path = "/ckpts/" + label;
  model.family = "llama";
  model.variant = "gqa";
  model.geometry.heads = 4;
  model.geometry.kv_heads = 2;
  model.geometry.head_dim = 16;
  model.geometry.d_model = 64;
  model.geometry.num_layers = num_layers;
  model.repr = repr;
  for (int layer : layers) model.layers.push_back(make_layer(layer, 4));
  model.summary = summarize(model.layers);
  return model;
}

ResultPart part(const std::string& file, const std::vector<ModelReport>& models,
                bool similarity = false) {
  return {file, to_json(models, {.include_similarity = similarity})};
}

std::string merge_error(const std::vector<ResultPart>& parts, const MergeOptions& options = {}) {
  return error_message([&] { merge_results(parts, options); });
}

}  // namespace

TEST_CASE("merge: layer shards of one model give the document of one run", "[merge]") {
  for (bool similarity : {false, true}) {
    const json single =
        to_json({make_model("A", {0, 1, 2, 3})}, {.include_similarity = similarity});
    // Parts in any order: the layers come out sorted.
    const json merged = merge_results({part("p0.json", {make_model("A", {2, 3})}, similarity),
                                       part("p1.json", {make_model("A", {0})}, similarity),
                                       part("p2.json", {make_model("A", {1})}, similarity)});
    CHECK(merged.dump(2) == single.dump(2));
  }
}

TEST_CASE("merge: the summary is the mean over all merged layers", "[merge]") {
  const json merged = merge_results(
      {part("a.json", {make_model("A", {0, 1})}), part("b.json", {make_model("A", {2, 3})})});
  const json& summary = merged["models"][0]["summary"];
  double erank_sum = 0, centered_pct_sum = 0;
  for (int layer = 0; layer < 4; ++layer) {
    erank_sum += 1.0 + layer / 3.0;
    centered_pct_sum += 100.0 * (0.5 + layer / 7.0) / 4;
  }
  CHECK(summary["erank_mean"].get<double>() == erank_sum / 4);
  CHECK(summary["erank_centered_pct_mean"].get<double>() == centered_pct_sum / 4);
}

TEST_CASE("merge: models in the order they first appear, each repr a model of its own", "[merge]") {
  const ModelReport b_k = make_model("B", {0, 1}, 2, "k");
  const ModelReport b_v = make_model("B", {0, 1}, 2, "v");
  const json single = to_json({make_model("C", {0, 1}, 2), b_k, b_v, make_model("A", {0, 1}, 2)});
  const json merged = merge_results({
      part("t0.json", {make_model("C", {0, 1}, 2)}),
      part("t1.json", {make_model("B", {0}, 2, "k"), make_model("B", {0}, 2, "v")}),
      part("t2.json", {make_model("B", {1}, 2, "k"), make_model("B", {1}, 2, "v")}),
      part("t3.json", {make_model("A", {0, 1}, 2)}),
  });
  CHECK(merged.dump(2) == single.dump(2));
}

TEST_CASE("merge: an empty shard (more shards than layers) merges", "[merge]") {
  const json merged = merge_results(
      {part("a.json", {make_model("A", {0, 1, 2, 3})}), part("b.json", {make_model("A", {})})});
  CHECK(merged.dump() == to_json({make_model("A", {0, 1, 2, 3})}).dump());
}

TEST_CASE("merge: parts cut to different --layers merge; the result names merge's --layers",
          "[merge]") {
  ModelReport first = make_model("A", {0, 1});
  first.source.layers = "0-1";
  ModelReport second = make_model("A", {2, 3});
  second.source.layers = "2-3";
  CHECK(merge_results({part("a.json", {first}), part("b.json", {second})}).dump() ==
        to_json({make_model("A", {0, 1, 2, 3})}).dump());
}

TEST_CASE("merge: with --layers the parts must hold exactly that selection", "[merge]") {
  const std::vector<ResultPart> parts = {part("a.json", {make_model("A", {0})}),
                                         part("b.json", {make_model("A", {2})})};
  // The merged file names the selection, as one `analyze --layers 0,2` would.
  ModelReport whole = make_model("A", {0, 2});
  whole.source.layers = "0,2";
  CHECK(merge_results(parts, {.layers = std::vector<int>{0, 2}}).dump() == to_json({whole}).dump());
  CHECK(merge_error(parts, {.layers = std::vector<int>{0, 1, 2}}) ==
        "model \"A\" (repr qk): layer 1 is in no part (the parts hold 0,2 of 0-2)");
  CHECK(merge_error(parts, {.layers = std::vector<int>{0, 1}}) ==
        "b.json: model \"A\" (repr qk): layer 2 is not in --layers 0-1");
  CHECK(merge_error(parts, {.layers = std::vector<int>{0, 2, 7}}) ==
        "--layers: layer 7 out of range (model \"A\" (repr qk) has 4 layers (0-3))");
}

TEST_CASE("merge: a gap is refused, naming the missing layers", "[merge]") {
  CHECK(merge_error(
            {part("a.json", {make_model("A", {0})}), part("b.json", {make_model("A", {3})})}) ==
        "model \"A\" (repr qk): layers 1-2 are in no part (the parts hold 0,3 of 0-3)");
  CHECK(merge_error({part("a.json", {make_model("A", {})})}) ==
        "model \"A\" (repr qk): layers 0-3 are in no part (the parts hold none of 0-3)");
}

TEST_CASE("merge: an overlapping layer is refused, naming both parts", "[merge]") {
  CHECK(merge_error({part("a.json", {make_model("A", {0, 1, 2})}),
                     part("b.json", {make_model("A", {2, 3})})}) ==
        "b.json: model \"A\" (repr qk): layer 2 is also in a.json (overlapping parts)");
  ModelReport twice = make_model("A", {0, 1, 2, 3});
  twice.layers.push_back(make_layer(1, 4));
  CHECK(merge_error({part("a.json", {twice})}) ==
        "a.json: model \"A\" (repr qk): layer 1 appears twice (overlapping parts)");
}

TEST_CASE("merge: a layer beyond num_layers is refused", "[merge]") {
  CHECK(merge_error({part("a.json", {make_model("A", {0, 1, 2, 3, 4})})}) ==
        "a.json: model \"A\" (repr qk): layer 4 is out of range (the model has 4 layers (0-3))");
}

TEST_CASE("merge: a hybrid's shards merge to its attention layers without --layers", "[merge]") {
  auto hybrid = [](const std::vector<int>& layers) {
    ModelReport model = make_model("H", layers, 8);
    model.attention_layers = {2, 4, 6, 7};
    return model;
  };
  const json merged =
      merge_results({part("a.json", {hybrid({2, 4})}), part("b.json", {hybrid({6, 7})})});
  CHECK(merged.dump(2) == to_json({hybrid({2, 4, 6, 7})}).dump(2));
  CHECK(merged["models"][0]["attention_layers"] == json({2, 4, 6, 7}));
  CHECK(merge_error({part("a.json", {hybrid({2, 4})}), part("b.json", {hybrid({6})})}) ==
        "model \"H\" (repr qk): layer 7 is in no part (the parts hold 2,4,6 of 2,4,6-7)");
  CHECK(merge_error({part("a.json", {hybrid({2, 3, 4, 6, 7})})}) ==
        "a.json: model \"H\" (repr qk): layer 3 has no attention heads (the model's attention "
        "layers: 2,4,6-7)");
}

TEST_CASE("merge: a num_layers beyond what kvrank reads is refused before the layers are listed",
          "[merge]") {
  // 2^31 − 1 claimed layers built a list of 8 GB before anything was checked (bad_alloc, exit 3).
  CHECK(merge_error({part("a.json", {make_model("A", {0}, 2'147'483'647)})}) ==
        "a.json: model \"A\" (repr qk): num_layers 2147483647 is out of range (kvrank reads 0 to "
        "100000 layers)");
  // A negative count is refused by the reader already, as the schema's minimum says.
  CHECK(merge_error({part("a.json", {make_model("A", {0}, -1)})}) ==
        "a.json: models[0].num_layers: expected >= 0, found -1");
}

TEST_CASE("merge: a long label or version is quoted as an excerpt", "[merge]") {
  const std::string label(1 << 20, 'L');
  const std::string message =
      merge_error({part("a.json", {make_model(label, {0}, 2'147'483'647)})});
  CHECK(message.starts_with("a.json: model \"" + std::string(60, 'L') + "... (1048576 bytes)\""));
  ResultPart other = part("b.json", {make_model("A", {0, 1, 2, 3})});
  other.document["tool"]["version"] = std::string(1 << 20, '9');
  const std::string version_message =
      merge_error({part("a.json", {make_model("A", {0, 1, 2, 3})}), other});
  CHECK(version_message.find(std::string(60, '9') + "... (1048576 bytes)") != std::string::npos);
  CHECK(version_message.size() < 400);
}

TEST_CASE("merge: one label on two checkpoints is refused", "[merge]") {
  ModelReport other = make_model("A", {2, 3});
  other.path = "/elsewhere/A";
  CHECK(merge_error({part("a.json", {make_model("A", {0, 1})}), part("b.json", {other})}) ==
        "b.json: model \"A\" (repr qk): path is \"/elsewhere/A\", but \"/ckpts/A\" in a.json: two "
        "checkpoints share this label (give each its own --label)");
}

TEST_CASE("merge: parts that disagree on family, variant or geometry are refused", "[merge]") {
  const ResultPart first = part("a.json", {make_model("A", {0, 1})});
  ModelReport changed = make_model("A", {2, 3});
  SECTION("heads") {
    changed.geometry.heads = 8;
    CHECK(merge_error({first, part("b.json", {changed})}) ==
          "b.json: model \"A\" (repr qk): heads is 8, but 4 in a.json");
  }
  SECTION("kv_heads") {
    changed.geometry.kv_heads = 4;
    CHECK(merge_error({first, part("b.json", {changed})}) ==
          "b.json: model \"A\" (repr qk): kv_heads is 4, but 2 in a.json");
  }
  SECTION("num_layers") {
    changed.geometry.num_layers = 6;
    CHECK(merge_error({first, part("b.json", {changed})}) ==
          "b.json: model \"A\" (repr qk): num_layers is 6, but 4 in a.json");
  }
  SECTION("family") {
    changed.family = "gpt2";
    CHECK(merge_error({first, part("b.json", {changed})}) ==
          "b.json: model \"A\" (repr qk): family is \"gpt2\", but \"llama\" in a.json");
  }
  SECTION("variant") {
    changed.variant = "mha";
    CHECK(merge_error({first, part("b.json", {changed})}) ==
          "b.json: model \"A\" (repr qk): variant is \"mha\", but \"gqa\" in a.json");
  }
  SECTION("latent size") {
    changed.geometry.mla_kv_lora_rank = 32;
    CHECK(merge_error({first, part("b.json", {changed})}) ==
          "b.json: model \"A\" (repr qk): mla_kv_lora_rank is 32, but null in a.json");
  }
  SECTION("an optional field only one part has") {
    ResultPart second = part("b.json", {changed});
    second.document["models"][0]["attention"] = nullptr;
    CHECK(merge_error({first, second}) ==
          "b.json: model \"A\" (repr qk): attention is null, but absent in a.json");
    CHECK(merge_error({second, first}) ==
          "a.json: model \"A\" (repr qk): attention is absent, but null in b.json");
  }
  SECTION("a field the schema does not list") {
    ResultPart second = part("b.json", {changed});
    second.document["models"][0]["extra"] = 1;
    CHECK(merge_error({first, second}) == "b.json: models[0]: unexpected key \"extra\"");
  }
}

TEST_CASE("merge: parts of another schema or kvrank version are refused", "[merge]") {
  const ResultPart first = part("a.json", {make_model("A", {0, 1})});
  ResultPart second = part("b.json", {make_model("A", {2, 3})});
  SECTION("schema") {
    second.document["schema_version"] = 3;
    CHECK(merge_error({first, second}) == "b.json: unsupported schema_version 3 (expected 1 to 2)");
  }
  SECTION("tool version") {
    second.document["tool"]["version"] = "99.0";
    CHECK(merge_error({first, second}) == "b.json: written by kvrank 99.0, but a.json by kvrank " +
                                              std::string(version()) +
                                              ": merge parts written by one kvrank version");
  }
  SECTION("no tool") {
    second.document.erase("tool");
    CHECK(merge_error({first, second}) == "b.json: missing \"tool\" (not a kvrank result file?)");
  }
  SECTION("the parts' version is kept") {
    ResultPart old_first = first;
    old_first.document["tool"]["version"] = "0.0.9";
    second.document["tool"]["version"] = "0.0.9";
    CHECK(merge_results({old_first, second})["tool"] ==
          json({{"name", "kvrank"}, {"version", "0.0.9"}}));
  }
}

TEST_CASE("merge: similarity matrices in some parts only are refused", "[merge]") {
  CHECK(merge_error({part("a.json", {make_model("A", {0, 1})}, true),
                     part("b.json", {make_model("A", {2, 3})}, false)}) ==
        "b.json: models[0].layers[0] has no similarity matrix, but a.json has: run every part "
        "with --similarity, or none");
  CHECK(merge_error({part("a.json", {make_model("A", {0, 1})}, false),
                     part("b.json", {make_model("A", {2, 3})}, true)}) ==
        "b.json: models[0].layers[0] has a similarity matrix, but a.json has none: run every "
        "part with --similarity, or none");
}

TEST_CASE("merge: the fully-redundant baseline is written once, last", "[merge]") {
  const ModelReport baseline = fully_redundant_baseline(4, 4);
  const json single =
      to_json({make_model("A", {0, 1, 2, 3}), make_model("B", {0, 1}, 2), baseline});
  CHECK(merge_results({part("a.json", {make_model("A", {0, 1}), baseline}),
                       part("b.json", {make_model("A", {2, 3}), baseline}),
                       part("c.json", {make_model("B", {0, 1}, 2), baseline})})
            .dump(2) == single.dump(2));
  CHECK(
      merge_error({part("a.json", {make_model("A", {0, 1, 2, 3}), baseline}),
                   part("b.json", {make_model("B", {0, 1}, 2), fully_redundant_baseline(2, 4)})}) ==
      "b.json: its fully-redundant baseline differs from the one in a.json (--with-baseline "
      "follows each run's first model)");
}

TEST_CASE("merge: a malformed part is refused as check and plot refuse it", "[merge]") {
  ResultPart broken = part("a.json", {make_model("A", {0, 1, 2, 3})});
  broken.document["models"][0]["layers"][1].erase("erank");
  CHECK(merge_error({broken}) == "a.json: models[0].layers[1]: missing \"erank\"");
  CHECK(merge_error({}) == "merge: no result files given");
}

}  // namespace kvrank

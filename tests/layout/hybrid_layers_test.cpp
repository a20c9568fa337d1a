// Hybrids (Jamba, Granite 4.0 hybrid, Qwen3-Next, Zamba 2): only the layers config.json names have
// attention heads; their factors equal those tests/writers/write_family_checkpoints.py (independent
// numpy) wrote the checkpoint from, under the model's own layer numbers.
#include <string>
#include <vector>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

using namespace kvrank;
using kvrank::test::TempDir;

TEST_CASE("hybrids: the attention layers config.json names, read under their own numbers",
          "[hybrid]") {
  struct Case {
    const char* family;
    std::vector<int> attention;  // the writer's patterns over 8 layers
  };
  const Case hybrid = GENERATE(Case{"jamba", {2, 6}}, Case{"granitemoehybrid", {1, 4, 7}},
                               Case{"qwen3_next", {3, 7}});
  INFO(hybrid.family);
  TempDir dir;
  test::write_reference_checkpoint(dir, "write_family_checkpoints.py", hybrid.family,
                                   "--layers 8 --heads 4 --kv-heads 2 --head-dim 6");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint, {});
  CHECK(layout.family == Family::llama);
  CHECK(layout.model_type == hybrid.family);
  CHECK(layout.num_layers == 8);
  CHECK(layout.attention_layers == hybrid.attention);
  CHECK(attention_layer_list(layout) == hybrid.attention);
  CHECK(has_attention(layout, hybrid.attention.front()));
  CHECK_FALSE(has_attention(layout, 0));
  CHECK((layout.heads == 4 && layout.kv_heads == 2 && layout.head_dim == 6));
  CHECK(std::get<DenseTensors>(layout.tensors).gated_query ==
        (std::string(hybrid.family) == "qwen3_next"));
  test::check_factors_match_reference(dir, checkpoint, layout);
  CHECK_THROWS_WITH(layer_factors(checkpoint, layout, 0, Repr::qk),
                    Catch::Matchers::Contains("layer 0 has no attention heads"));
}

TEST_CASE("zamba2: each hybrid layer's effective heads, its shared block plus its own adapters",
          "[hybrid]") {
  TempDir dir;  // layers_block_type: hybrid at 2, 4, 6, 7; two blocks, each stored once
  test::write_reference_checkpoint(dir, "write_family_checkpoints.py", "zamba2",
                                   "--heads 4 --d-model 12");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint, {});
  CHECK(layout.family == Family::zamba2);
  CHECK(layout.model_type == "zamba2");
  CHECK(layout.num_layers == 8);
  CHECK(layout.attention_layers == std::vector<int>{2, 4, 6, 7});
  CHECK((layout.heads == 4 && layout.kv_heads == 4 && layout.head_dim == 6));
  CHECK(layout.d_model == 24);  // q, k and v act on [hidden; embeddings]
  const auto& tensors = std::get<SharedBlockTensors>(layout.tensors);
  CHECK((tensors.blocks == 2 && tensors.adapter_rank == 3 && tensors.hidden_size == 12));
  test::check_factors_match_reference(dir, checkpoint, layout);
  CHECK_THROWS_WITH(layer_factors(checkpoint, layout, 3, Repr::qk),
                    Catch::Matchers::Contains("layer 3 has no attention heads"));
}

TEST_CASE("every layer of a model that is no hybrid has attention", "[hybrid]") {
  ModelLayout layout;
  layout.num_layers = 3;
  CHECK(attention_layer_list(layout) == std::vector<int>{0, 1, 2});
  CHECK(has_attention(layout, 2));
  CHECK_FALSE(has_attention(layout, 3));
}

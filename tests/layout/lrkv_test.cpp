// LRKV: detection (config or tensors), and shared-basis factors that equal the explicit per-head
// keys k_shared + k_lora_b_h · k_lora_a_h written by tests/writers/write_latent_checkpoints.py.
#include <string>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

using namespace kvrank;
using kvrank::test::error_message;
using kvrank::test::TempDir;

namespace {

void write_lrkv(const TempDir& dir, const std::string& options) {
  test::write_reference_checkpoint(dir, "write_latent_checkpoints.py", "lrkv", options);
}

}  // namespace

TEST_CASE("LRKV detection from config.json or from the tensors alone", "[lrkv]") {
  const std::string extra = GENERATE(std::string(""), std::string(" --minimal-config"));
  TempDir dir;
  write_lrkv(dir, "--rank 3 --heads 5 --head-dim 4 --hidden 20" + extra);
  const ModelLayout layout = detect_layout(Checkpoint::open(dir / "ckpt"));
  CHECK(layout.family == Family::lrkv);
  CHECK(layout.variant == Variant::lrkv);
  CHECK(layout.heads == 5);
  CHECK(layout.kv_heads == 5);
  CHECK(layout.head_dim == 4);
  CHECK(layout.d_model == 20);
  CHECK(layout.num_layers == 3);
  CHECK(layout.lrkv_rank == 3);
  CHECK_FALSE(layout.mla_kv_lora_rank);
}

TEST_CASE("LRKV factors equal the explicit per-head projections", "[lrkv]") {
  const std::string options =
      GENERATE(std::string("--rank 1"), std::string("--rank 4 --dtype BF16"),
               std::string("--rank 2 --dtype F16 --minimal-config"),
               std::string("--rank 3 --dtype F8_E4M3 --block 8 16"));
  INFO(options);
  TempDir dir;
  write_lrkv(dir, options);
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint);
  REQUIRE(layout.variant == Variant::lrkv);
  test::check_factors_match_reference(dir, checkpoint, layout);
}

TEST_CASE("LRKV key basis is k_shared stacked on k_lora_a: d_h + H·r rows", "[lrkv]") {
  TempDir dir;
  write_lrkv(dir, "--rank 2 --heads 3 --head-dim 4 --hidden 30");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const HeadFactors factors = layer_factors(checkpoint, detect_layout(checkpoint), 0, Repr::k);
  CHECK(factors.left.basis.rows() == 4 + 3 * 2);
  const std::string attn = "model.layers.0.self_attn.";
  CHECK(factors.left.basis.topRows(4) == to_matrix(checkpoint.at(attn + "k_shared_proj.weight")));
  CHECK(factors.left.basis.bottomRows(6) == to_matrix(checkpoint.at(attn + "k_lora_a.weight")));
  // Head 2: identity on the shared rows, its k_lora_b block on rows [4 + 2·2, 4 + 3·2).
  const auto& blocks = factors.left.heads[2];
  REQUIRE(blocks.size() == 2);
  CHECK(blocks[0].basis_row == 0);
  CHECK(blocks[0].rows() == 4);
  CHECK(blocks[1].basis_row == 8);
  CHECK(blocks[1].rows() == 2);
  CHECK(blocks[1].cols() == 4);
}

TEST_CASE("LRKV: a missing low-rank tensor is named", "[lrkv]") {
  TempDir dir;
  write_lrkv(dir, "--drop model.layers.2.self_attn.v_lora_a.weight");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint);
  CHECK_NOTHROW(layer_factors(checkpoint, layout, 2, Repr::qk));
  CHECK_THAT(error_message([&] { layer_factors(checkpoint, layout, 2, Repr::v); }),
             Catch::Matchers::Contains("model.layers.2.self_attn.v_lora_a.weight"));
}

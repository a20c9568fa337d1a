// Captured activations (--activations): layouts [T, H, d_h] and [B, H, T, d_h], GQA grouping,
// K/V-only captures, and the errors — on NPY/NPZ-free NPY files written here byte by byte.
#include <cstring>
#include <string>
#include <vector>

#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

using namespace kvrank;
using kvrank::test::error_message;
using kvrank::test::expand_head;
using kvrank::test::TempDir;
using kvrank::test::write_npy;

namespace {

/// Deterministic distinct values.
std::vector<float> sequence(std::size_t count, float offset) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = offset + static_cast<float>((i * 37 + 11) % 101) / 17.0f;
  return values;
}

LayoutOverrides activations() {
  LayoutOverrides overrides;
  overrides.activations = true;
  return overrides;
}

}  // namespace

TEST_CASE("[T, H, d_h] captures: head h's columns are Q[:, h, :], GQA keys by h / group",
          "[activations]") {
  constexpr Index T = 7, H = 4, H_KV = 2, D_H = 3;
  TempDir dir;
  const std::vector<float> q = sequence(T * H * D_H, 0.0f);
  const std::vector<float> k = sequence(T * H_KV * D_H, 5.0f);
  for (int layer = 0; layer < 2; ++layer) {
    const std::string stem = "layers." + std::to_string(layer);
    write_npy(dir / (stem + ".q.npy"), {T, H, D_H}, q);
    write_npy(dir / (stem + ".k.npy"), {T, H_KV, D_H}, k);
    write_npy(dir / (stem + ".v.npy"), {T, H_KV, D_H}, k);
  }
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const ModelLayout layout = detect_layout(checkpoint, activations());
  CHECK(layout.family == Family::activations);
  CHECK(layout.variant == Variant::gqa);
  CHECK(layout.heads == H);
  CHECK(layout.kv_heads == H_KV);
  CHECK(layout.head_dim == D_H);
  CHECK(layout.d_model == T);
  CHECK(layout.num_layers == 2);
  CHECK(layout.has_queries);
  CHECK_FALSE(layout.has_outputs);

  const HeadFactors factors = layer_factors(checkpoint, layout, 1, Repr::qk);
  for (Index h = 0; h < H; ++h) {
    MatrixD want_q(T, D_H), want_k(T, D_H);
    for (Index t = 0; t < T; ++t) {
      for (Index a = 0; a < D_H; ++a) {
        want_q(t, a) = q[static_cast<std::size_t>((t * H + h) * D_H + a)];
        want_k(t, a) = k[static_cast<std::size_t>((t * H_KV + h / 2) * D_H + a)];
      }
    }
    CHECK(expand_head(factors.left, static_cast<int>(h)) == want_q);
    CHECK(expand_head(factors.right, static_cast<int>(h)) == want_k);
  }
  CHECK_THAT(error_message([&] { layer_factors(checkpoint, layout, 0, Repr::ov); }),
             Catch::Matchers::Contains("--repr ov needs output projections"));
}

TEST_CASE("[B, H, T, d_h] captures fold the batch into the tokens", "[activations]") {
  constexpr Index B = 2, H = 3, T = 4, D_H = 2;
  TempDir dir;
  const std::vector<float> k = sequence(B * H * T * D_H, 1.0f);
  write_npy(dir / "layers.0.k.npy", {B, H, T, D_H}, k);
  const Checkpoint checkpoint = Checkpoint::open(dir.path());
  const ModelLayout layout = detect_layout(checkpoint, activations());
  CHECK_FALSE(layout.has_queries);  // K only: k and v are analysed
  CHECK(layout.heads == H);
  CHECK(layout.variant == Variant::mha);
  CHECK(layout.d_model == B * T);
  const HeadFactors factors = layer_factors(checkpoint, layout, 0, Repr::k);
  CHECK(factors.symmetric);
  for (Index h = 0; h < H; ++h) {
    MatrixD want(B * T, D_H);
    for (Index b = 0; b < B; ++b)
      for (Index t = 0; t < T; ++t)
        for (Index a = 0; a < D_H; ++a)
          want(b * T + t, a) = k[static_cast<std::size_t>(((b * H + h) * T + t) * D_H + a)];
    CHECK(expand_head(factors.left, static_cast<int>(h)) == want);
  }
}

TEST_CASE("activation errors name the capture and the expected layout", "[activations]") {
  TempDir flat;
  write_npy(flat / "layers.0.k.npy", {6, 4}, sequence(24, 0.0f));
  const Checkpoint checkpoint = Checkpoint::open(flat.path());
  CHECK_THAT(error_message([&] { detect_layout(checkpoint, activations()); }),
             Catch::Matchers::Contains("layers.0.k: expected captured activations of shape "
                                       "[T, heads, head_dim] or [batch, heads, T, head_dim], "
                                       "found [6, 4]"));

  TempDir none;
  write_npy(none / "q_proj.npy", {4, 4}, sequence(16, 0.0f));
  CHECK_THAT(error_message([&] { detect_layout(Checkpoint::open(none.path()), activations()); }),
             Catch::Matchers::Contains("no captured keys found"));

  TempDir mismatch;
  write_npy(mismatch / "layers.0.q.npy", {5, 2, 3}, sequence(30, 0.0f));
  write_npy(mismatch / "layers.0.k.npy", {4, 2, 3}, sequence(24, 0.0f));
  const Checkpoint bad = Checkpoint::open(mismatch.path());
  const ModelLayout layout = detect_layout(bad, activations());
  CHECK_THAT(error_message([&] { layer_factors(bad, layout, 0, Repr::qk); }),
             Catch::Matchers::Contains("layers.0.k: expected 5 tokens"));
}

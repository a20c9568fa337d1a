// Private: the parts of `kvrank synth` (synth.cpp) shared by its files — the resolved options
// (synth_options.cpp), the seeded Gaussian streams (synth_gaussian.cpp) and the tensor plans
// (synth_plan.cpp); synth.cpp writes config.json and the safetensors files.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors_writer.hpp"
#include "kvrank/layout/family.hpp"
#include "kvrank/synth/synth.hpp"

namespace kvrank::detail {

using Floats = std::vector<float>;

constexpr int kVocabSize = 32;       // a token embedding so the checkpoint looks like a model
constexpr int kMaxExtent = 1 << 20;  // bounds every option so shapes cannot overflow
constexpr std::uint64_t kSharedBlock = ~std::uint64_t{0};  // block index of a role's shared part

// ---- options (synth_options.cpp) --------------------------------------------------------------

/// Options resolved and validated: everything the writer needs, nothing optional.
struct Model {
  Family family = Family::llama;  // a synthesizable one (family.hpp)
  Variant variant = Variant::mha;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int d_model = 0;
  int rank = 0;          // LRKV
  int kv_lora_rank = 0;  // MLA
  int rope_dim = 0;      // MLA qk_rope_head_dim
  int nope_dim = 0;      // MLA qk_nope_head_dim
  int v_dim = 0;         // MLA v_head_dim
  int q_lora_rank = 0;   // MLA, 0: q_proj
  DType dtype = DType::F32;
  std::string torch_dtype;
  int shards = 1;
  std::vector<double> redundancy;  // one per layer
  std::uint64_t seed = 0;
};

Model resolve(const SynthOptions& options);

// ---- seeded Gaussians (synth_gaussian.cpp) ----------------------------------------------------

/// What a block of weights is for; with the layer and block index it keys the block's stream.
enum class Role : std::uint64_t {
  embed = 1,
  q,
  k,
  v,
  o,
  kv_a,
  kv_a_norm,
  kv_b_k,
  kv_b_v,
  k_shared,
  v_shared,
  k_lora_a,
  k_lora_b,
  v_lora_a,
  v_lora_b,
  q_a,  // MLA q_a_proj (the per-head q_b_proj rows use `q`)
  q_a_norm,
};

std::uint64_t stream_seed(std::uint64_t seed, int layer, Role role, std::uint64_t block);
/// Fills `out` with N(0, stddev²) values of the stream `stream`.
void fill_gaussian(std::uint64_t stream, float stddev, std::span<float> out);

// ---- tensor plans (synth_plan.cpp) ------------------------------------------------------------

/// A tensor to write: its spec, the layer it belongs to (for sharding) and how to draw it.
struct PlannedTensor {
  TensorSpec spec;
  int layer = 0;
  std::function<Floats()> draw;
};

/// Every tensor of the checkpoint, in file order.
std::vector<PlannedTensor> plan_tensors(const Model& model);

}  // namespace kvrank::detail

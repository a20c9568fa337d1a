// `kvrank synth`: writes a complete Hugging Face style checkpoint (config.json + safetensors,
// sharded on request) of any family/variant with seeded weights whose head redundancy is tunable —
// for tests, demos and benchmarks.
//
// Redundancy r ∈ [0, 1] per layer: each head's projections are (1−r)·own + r·shared (seeded
// Gaussian), so r = 0 gives independent heads and r = 1 identical heads (erank 1.0).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kvrank {

struct SynthOptions {
  std::string family = "llama";  ///< llama | gpt2 | gpt_neox | falcon | phi3 | deepseek_v2 | lrkv
  std::string variant;           ///< mha | gqa | mqa | mla | lrkv (default from family/kv_heads)
  int layers = 4;
  int heads = 8;
  std::optional<int> kv_heads;
  int head_dim = 16;
  std::optional<int> d_model;     ///< default heads × head_dim
  int rank = 8;                   ///< LRKV rank r
  int kv_lora_rank = 32;          ///< MLA latent size
  int q_lora_rank = 0;            ///< MLA query latent size; 0: one q_proj (DeepSeek-V2-Lite)
  std::optional<int> nope_dim;    ///< MLA qk_nope_head_dim (default head_dim)
  std::optional<int> rope_dim;    ///< MLA qk_rope_head_dim (default max(1, head_dim / 2))
  std::optional<int> v_head_dim;  ///< MLA v_head_dim (default head_dim)
  std::string dtype = "f32";      ///< f32 | bf16 | f16
  int shards = 1;
  std::vector<double> redundancy{0.0};  ///< one value, or one per layer
  std::uint64_t seed = 0;
};

/// Writes the checkpoint into `out_dir` (created if needed). Throws kvrank::Error on invalid
/// options (naming the option, its value and the rule) or when the folder cannot be written.
void write_synthetic_checkpoint(const SynthOptions& options, const std::filesystem::path& out_dir);

}  // namespace kvrank

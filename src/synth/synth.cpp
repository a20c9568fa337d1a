// `kvrank synth`: seeded checkpoints of every family/variant of docs/families.md with tunable
// redundancy.
//
// Reproducibility: every block of weights is drawn from its own splitmix64 stream, keyed by (seed,
// layer, role, block), and turned into Gaussians by a Box–Muller transform written here with plain
// float arithmetic (own log/sin/cos polynomials, no libm, no std::normal_distribution, no FMA
// contraction: the target is built with -ffp-contract=off), so the same options give
// byte-identical files on every machine and compiler.
// Streaming: the header of each shard is written first (all shapes are known up front), then the
// tensors one by one; at most one layer's tensors are in memory at a time.
#include "kvrank/synth/synth.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <system_error>

#include "io/safetensors_writer.hpp"
#include "kvrank/base/atomic_file.hpp"
#include "kvrank/base/error.hpp"
#include "synth/synth_detail.hpp"

namespace kvrank {
namespace {

namespace fs = std::filesystem;
using detail::Floats;
using detail::kVocabSize;
using detail::Model;
using detail::PlannedTensor;

// ---- config.json -------------------------------------------------------------------------------

nlohmann::json config_json(const Model& m) {
  using nlohmann::json;
  json config;
  const json provenance = {{"seed", m.seed}, {"redundancy", m.redundancy}};
  if (m.family == Family::gpt2) {
    config = {{"architectures", {"GPT2LMHeadModel"}},
              {"model_type", "gpt2"},
              {"n_embd", m.d_model},
              {"n_head", m.heads},
              {"n_layer", m.layers},
              {"n_positions", 1024}};
  } else if (m.family == Family::gpt_neox) {
    config = {{"architectures", {"GPTNeoXForCausalLM"}},
              {"model_type", "gpt_neox"},
              {"hidden_size", m.d_model},
              {"num_attention_heads", m.heads},
              {"num_hidden_layers", m.layers},
              {"rotary_pct", 0.25}};
  } else if (m.family == Family::falcon) {
    config = {{"architectures", {"FalconForCausalLM"}},
              {"model_type", "falcon"},
              {"hidden_size", m.d_model},
              {"num_attention_heads", m.heads},
              {"num_hidden_layers", m.layers},
              {"num_kv_heads", m.kv_heads},
              {"new_decoder_architecture", m.variant == Variant::gqa},
              {"multi_query", m.variant == Variant::mqa},
              {"parallel_attn", true},
              {"bias", false},
              {"alibi", false}};
  } else if (m.family == Family::deepseek_v2) {
    config = {{"architectures", {"DeepseekV2ForCausalLM"}},
              {"model_type", "deepseek_v2"},
              {"hidden_size", m.d_model},
              {"num_attention_heads", m.heads},
              {"num_key_value_heads", m.heads},
              {"num_hidden_layers", m.layers},
              {"kv_lora_rank", m.kv_lora_rank},
              {"q_lora_rank", m.q_lora_rank > 0 ? json(m.q_lora_rank) : json(nullptr)},
              {"qk_nope_head_dim", m.nope_dim},
              {"qk_rope_head_dim", m.rope_dim},
              {"v_head_dim", m.v_dim}};
  } else {
    const bool phi3 = m.family == Family::phi3;
    config = {{"architectures", {phi3 ? "Phi3ForCausalLM" : "LlamaForCausalLM"}},
              {"model_type", phi3 ? "phi3" : "llama"},
              {"hidden_size", m.d_model},
              {"num_attention_heads", m.heads},
              {"num_key_value_heads", m.kv_heads},
              {"num_hidden_layers", m.layers}};
    if (!phi3) config["head_dim"] = m.head_dim;
    if (m.family == Family::lrkv) {
      config["attention_variant"] = "lrkv";
      config["lrkv_rank"] = m.rank;
    }
  }
  config["vocab_size"] = kVocabSize;
  config["torch_dtype"] = m.torch_dtype;
  config["kvrank_synth"] = provenance;
  return config;
}

// ---- files -------------------------------------------------------------------------------------

std::string shard_name(int shard, int shards) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard + 1, shards);
  return name;
}

/// Which shard each tensor goes to: whole layers per shard while there are at least as many layers
/// as shards, single tensors otherwise; every shard gets at least one tensor.
std::vector<int> assign_shards(const std::vector<PlannedTensor>& tensors, const Model& m) {
  std::vector<int> shard_of(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::int64_t unit =
        m.shards <= m.layers ? tensors[i].layer : static_cast<std::int64_t>(i);
    const std::int64_t units =
        m.shards <= m.layers ? m.layers : static_cast<std::int64_t>(tensors.size());
    shard_of[i] = static_cast<int>(unit * m.shards / units);
  }
  return shard_of;
}

/// Removes what an earlier synth run may have left in `dir` (only files of our own naming), so a
/// stale single file never sits next to a new index or vice versa.
void remove_previous_checkpoint(const fs::path& dir) {
  static const std::regex kOurs(R"(model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?)");
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(dir, ignored)) {
    if (std::regex_match(entry.path().filename().string(), kOurs))
      fs::remove(entry.path(), ignored);
  }
}

void write_shard(const fs::path& path, const std::vector<PlannedTensor>& tensors,
                 const std::vector<int>& shard_of, int shard) {
  std::vector<TensorSpec> specs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (shard_of[i] == shard) specs.push_back(tensors[i].spec);
  }
  SafetensorsWriter writer(path, std::move(specs));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (shard_of[i] == shard) writer.write(tensors[i].spec.name, tensors[i].draw());
  }
  writer.close();
}

std::string index_json(const std::vector<PlannedTensor>& tensors, const std::vector<int>& shard_of,
                       int shards) {
  std::uint64_t total = 0;
  nlohmann::json weight_map = nlohmann::json::object();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    total += tensors[i].spec.byte_size();
    weight_map[tensors[i].spec.name] = shard_name(shard_of[i], shards);
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return index.dump(2) + "\n";
}

}  // namespace

void write_synthetic_checkpoint(const SynthOptions& options, const fs::path& out_dir) {
  const Model model = detail::resolve(options);
  const std::vector<PlannedTensor> tensors = detail::plan_tensors(model);
  if (static_cast<std::size_t>(model.shards) > tensors.size()) {
    throw Error("", "--shards " + std::to_string(model.shards) + " exceeds the " +
                        std::to_string(tensors.size()) + " tensors of the checkpoint");
  }
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error || !fs::is_directory(out_dir)) {
    throw Error(out_dir.string(), "cannot create the output folder" +
                                      (error ? ": " + error.message() : std::string()));
  }
  remove_previous_checkpoint(out_dir);
  write_file_atomically(out_dir / "config.json", config_json(model).dump(2) + "\n");
  if (model.shards == 1) {
    write_shard(out_dir / "model.safetensors", tensors, std::vector<int>(tensors.size(), 0), 0);
    return;
  }
  const std::vector<int> shard_of = assign_shards(tensors, model);
  for (int shard = 0; shard < model.shards; ++shard) {
    write_shard(out_dir / shard_name(shard, model.shards), tensors, shard_of, shard);
  }
  write_file_atomically(out_dir / "model.safetensors.index.json",
                        index_json(tensors, shard_of, model.shards));
}

}  // namespace kvrank

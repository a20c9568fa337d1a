// `kvrank synth` (synth.cpp): the weights of one layer and the plan of every tensor to write.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>

#include "synth/synth_detail.hpp"

namespace kvrank::detail {
namespace {

// ---- weights of one layer ----------------------------------------------------------------------

float init_std(int fan_in) { return 1.0f / std::sqrt(static_cast<float>(fan_in)); }

/// Draws the weights of layer `layer` (or of the model, layer −1).
class Weights {
 public:
  Weights(const Model& model, int layer)
      : model_(model),
        layer_(layer),
        redundancy_(layer >= 0 ? model.redundancy[static_cast<std::size_t>(layer)] : 0.0) {}

  /// `blocks` head blocks of `rows` × `cols`, stacked: block b = (1−r)·own_b + r·shared (r = the
  /// layer's redundancy). r = 0 skips the shared draw, r = 1 the own ones.
  Floats heads(Role role, int blocks, int rows, int cols, float stddev) const {
    const std::size_t block_size = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    Floats result(block_size * static_cast<std::size_t>(blocks));
    const auto r = static_cast<float>(redundancy_);
    Floats shared;
    if (r > 0.0f) {
      shared.resize(block_size);
      fill_gaussian(stream_seed(model_.seed, layer_, role, kSharedBlock), stddev, shared);
    }
    // Blocks are independent streams: drawing them in parallel gives the same bytes.
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int b = 0; b < blocks; ++b) {
      const std::span<float> block(result.data() + block_size * static_cast<std::size_t>(b),
                                   block_size);
      if (r == 1.0f) {
        std::copy(shared.begin(), shared.end(), block.begin());
        continue;
      }
      fill_gaussian(stream_seed(model_.seed, layer_, role, static_cast<std::uint64_t>(b)), stddev,
                    block);
      if (r > 0.0f) {
        for (std::size_t i = 0; i < block_size; ++i)
          block[i] = (1.0f - r) * block[i] + r * shared[i];
      }
    }
    return result;
  }

  /// A tensor without head structure: one seeded Gaussian block.
  Floats plain(Role role, int rows, int cols, float stddev) const {
    Floats result(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
    fill_gaussian(stream_seed(model_.seed, layer_, role, 0), stddev, result);
    return result;
  }

  /// An output projection `[d_model, heads·head_cols]`: head h owns columns [h·k, (h+1)·k).
  Floats output(int head_cols) const {
    return transpose(output_rows(head_cols), model_.heads * head_cols, model_.d_model);
  }
  /// The same in `[in, out]` layout (GPT-2's Conv1D): head h owns rows [h·k, (h+1)·k).
  Floats output_rows(int head_cols) const {
    const int inputs = model_.heads * head_cols;
    return heads(Role::o, model_.heads, head_cols, model_.d_model, init_std(inputs));
  }

  Floats query(int head_rows) const {
    return heads(Role::q, model_.heads, head_rows, model_.d_model, init_std(model_.d_model));
  }
  Floats key() const { return kv(Role::k); }
  Floats value() const { return kv(Role::v); }

  /// `[rows, cols]` → `[cols, rows]`, in tiles so that both sides stay in cache.
  static Floats transpose(const Floats& matrix, int rows, int cols) {
    constexpr std::size_t kTile = 32;
    Floats result(matrix.size());
    const auto r_count = static_cast<std::size_t>(rows);
    const auto c_count = static_cast<std::size_t>(cols);
    for (std::size_t r0 = 0; r0 < r_count; r0 += kTile) {
      for (std::size_t c0 = 0; c0 < c_count; c0 += kTile) {
        for (std::size_t r = r0; r < std::min(r0 + kTile, r_count); ++r) {
          for (std::size_t c = c0; c < std::min(c0 + kTile, c_count); ++c) {
            result[c * r_count + r] = matrix[r * c_count + c];
          }
        }
      }
    }
    return result;
  }

 private:
  Floats kv(Role role) const {
    return heads(role, model_.kv_heads, model_.head_dim, model_.d_model, init_std(model_.d_model));
  }

  const Model& model_;
  int layer_;
  double redundancy_;
};

/// One part of a fused projection: `rows_per_group` rows of `matrix` go into each group.
struct FusedPart {
  const Floats* matrix;
  int rows_per_group;
};

/// Rows of a fused projection: for each of `groups` groups, each part's next rows in turn
/// (gpt_neox/falcon `[H, 3, d_h]`, falcon GQA `[H_kv, G+2, d_h]`, MLA kv_b `[H, nope+v]`).
Floats fuse_rows(const std::vector<FusedPart>& parts, int groups, int cols) {
  Floats result;
  for (int g = 0; g < groups; ++g) {
    for (const FusedPart& part : parts) {
      const std::size_t size =
          static_cast<std::size_t>(part.rows_per_group) * static_cast<std::size_t>(cols);
      const auto first =
          part.matrix->begin() + static_cast<std::ptrdiff_t>(size * static_cast<std::size_t>(g));
      result.insert(result.end(), first, first + static_cast<std::ptrdiff_t>(size));
    }
  }
  return result;
}

Floats filled(std::int64_t count, float value) {
  return Floats(static_cast<std::size_t>(count), value);
}

/// RMSNorm gains in [0.5, 1.5): not all ones, so readers that forget to fold them are caught.
Floats rms_gains(const Weights& weights, Role role, int size) {
  Floats gains = weights.plain(role, 1, size, 0.25f);
  for (float& g : gains) g = 1.0f + std::clamp(g, -0.5f, 0.499f);
  return gains;
}

// ---- tensor plans ------------------------------------------------------------------------------

class Planner {
 public:
  explicit Planner(const Model& model) : model_(model) {}

  std::vector<PlannedTensor> plan() {
    add_model_tensors();
    for (int layer = 0; layer < model_.layers; ++layer) add_layer(layer);
    return std::move(tensors_);
  }

 private:
  void add(std::string name, std::vector<std::int64_t> shape, int layer,
           std::function<Floats()> draw) {
    tensors_.push_back({{std::move(name), model_.dtype, std::move(shape)}, layer, std::move(draw)});
  }
  void add_norm(const std::string& name, int layer, float value) {
    const std::int64_t d = model_.d_model;
    add(name, {d}, layer, [d, value] { return filled(d, value); });
  }

  void add_model_tensors() {
    static const std::map<Family, std::string> kEmbeddings = {
        {Family::gpt2, "wte.weight"},
        {Family::gpt_neox, "gpt_neox.embed_in.weight"},
        {Family::falcon, "transformer.word_embeddings.weight"}};
    const auto found = kEmbeddings.find(model_.family);
    const std::string name =
        found != kEmbeddings.end() ? found->second : "model.embed_tokens.weight";
    const Model& m = model_;
    add(name, {kVocabSize, m.d_model}, 0,
        [&m] { return Weights(m, -1).plain(Role::embed, kVocabSize, m.d_model, 1.0f); });
  }

  void add_layer(int layer) {
    switch (model_.family) {
      case Family::llama:
        return add_llama(layer);
      case Family::lrkv:
        return add_lrkv(layer);
      case Family::phi3:
        return add_phi3(layer);
      case Family::gpt2:
        return add_gpt2(layer);
      case Family::gpt_neox:
        return add_gpt_neox(layer);
      case Family::falcon:
        return add_falcon(layer);
      case Family::deepseek_v2:
        return add_deepseek(layer);
      default:  // not synthesizable: resolve() refused it
        throw std::logic_error("synth: no writer for family " +
                               std::string(family_name(model_.family)));
    }
  }

  static std::string llama_prefix(int layer) {
    return "model.layers." + std::to_string(layer) + ".";
  }

  void add_llama(int layer) {
    const Model& m = model_;
    const std::string p = llama_prefix(layer);
    const std::int64_t d = m.d_model, q_rows = std::int64_t{m.heads} * m.head_dim,
                       kv_rows = std::int64_t{m.kv_heads} * m.head_dim;
    add_norm(p + "input_layernorm.weight", layer, 1.0f);
    add(p + "self_attn.q_proj.weight", {q_rows, d}, layer,
        [&m, layer] { return Weights(m, layer).query(m.head_dim); });
    add(p + "self_attn.k_proj.weight", {kv_rows, d}, layer,
        [&m, layer] { return Weights(m, layer).key(); });
    add(p + "self_attn.v_proj.weight", {kv_rows, d}, layer,
        [&m, layer] { return Weights(m, layer).value(); });
    add(p + "self_attn.o_proj.weight", {d, q_rows}, layer,
        [&m, layer] { return Weights(m, layer).output(m.head_dim); });
    add_norm(p + "post_attention_layernorm.weight", layer, 1.0f);
  }

  void add_lrkv(int layer) {
    const Model& m = model_;
    const std::string p = llama_prefix(layer) + "self_attn.";
    const std::int64_t d = m.d_model, dh = m.head_dim, h = m.heads, r = m.rank;
    add_norm(llama_prefix(layer) + "input_layernorm.weight", layer, 1.0f);
    add(p + "q_proj.weight", {h * dh, d}, layer,
        [&m, layer] { return Weights(m, layer).query(m.head_dim); });
    const std::pair<const char*, std::array<Role, 3>> sides[] = {
        {"k", {Role::k_shared, Role::k_lora_a, Role::k_lora_b}},
        {"v", {Role::v_shared, Role::v_lora_a, Role::v_lora_b}}};
    for (const auto& [side, roles] : sides) {
      const Role shared = roles[0], lora_a = roles[1], lora_b = roles[2];
      add(p + side + "_shared_proj.weight", {dh, d}, layer, [&m, layer, shared] {
        return Weights(m, layer).plain(shared, m.head_dim, m.d_model, init_std(m.d_model));
      });
      add(p + side + "_lora_a.weight", {h * r, d}, layer, [&m, layer, lora_a] {
        return Weights(m, layer).heads(lora_a, m.heads, m.rank, m.d_model, init_std(m.d_model));
      });
      add(p + side + "_lora_b.weight", {h * dh, r}, layer, [&m, layer, lora_b] {
        return Weights(m, layer).heads(lora_b, m.heads, m.head_dim, m.rank, init_std(m.rank));
      });
    }
    add(p + "o_proj.weight", {d, h * dh}, layer,
        [&m, layer] { return Weights(m, layer).output(m.head_dim); });
    add_norm(llama_prefix(layer) + "post_attention_layernorm.weight", layer, 1.0f);
  }

  void add_phi3(int layer) {
    const Model& m = model_;
    const std::string p = llama_prefix(layer);
    const std::int64_t d = m.d_model, dh = m.head_dim;
    add_norm(p + "input_layernorm.weight", layer, 1.0f);
    add(p + "self_attn.qkv_proj.weight", {(std::int64_t{m.heads} + 2 * m.kv_heads) * dh, d}, layer,
        [&m, layer] {
          const Weights w(m, layer);
          const Floats q = w.query(m.head_dim), k = w.key(), v = w.value();
          return fuse_rows({{&q, m.heads * m.head_dim},
                            {&k, m.kv_heads * m.head_dim},
                            {&v, m.kv_heads * m.head_dim}},
                           1, m.d_model);
        });
    add(p + "self_attn.o_proj.weight", {d, std::int64_t{m.heads} * dh}, layer,
        [&m, layer] { return Weights(m, layer).output(m.head_dim); });
    add_norm(p + "post_attention_layernorm.weight", layer, 1.0f);
  }

  void add_gpt2(int layer) {
    const Model& m = model_;
    const std::string p = "h." + std::to_string(layer) + ".";
    const std::int64_t d = m.d_model;
    add_norm(p + "ln_1.weight", layer, 1.0f);
    add_norm(p + "ln_1.bias", layer, 0.0f);
    // Conv1D stores [in, out]: c_attn is the transpose of the stacked [Q; K; V] rows.
    add(p + "attn.c_attn.weight", {d, 3 * d}, layer, [&m, layer] {
      const Weights w(m, layer);
      const Floats q = w.query(m.head_dim), k = w.key(), v = w.value();
      const int rows = m.heads * m.head_dim;
      return Weights::transpose(fuse_rows({{&q, rows}, {&k, rows}, {&v, rows}}, 1, m.d_model),
                                3 * rows, m.d_model);
    });
    add(p + "attn.c_attn.bias", {3 * d}, layer, [d] { return filled(3 * d, 0.0f); });
    add(p + "attn.c_proj.weight", {d, d}, layer,
        [&m, layer] { return Weights(m, layer).output_rows(m.head_dim); });
    add_norm(p + "attn.c_proj.bias", layer, 0.0f);
  }

  void add_gpt_neox(int layer) {
    const Model& m = model_;
    const std::string p = "gpt_neox.layers." + std::to_string(layer) + ".";
    const std::int64_t d = m.d_model;
    add_norm(p + "input_layernorm.weight", layer, 1.0f);
    add_norm(p + "input_layernorm.bias", layer, 0.0f);
    add(p + "attention.query_key_value.weight", {3 * d, d}, layer, [&m, layer] {
      const Weights w(m, layer);
      const Floats q = w.query(m.head_dim), k = w.key(), v = w.value();
      return fuse_rows({{&q, m.head_dim}, {&k, m.head_dim}, {&v, m.head_dim}}, m.heads, m.d_model);
    });
    add(p + "attention.query_key_value.bias", {3 * d}, layer, [d] { return filled(3 * d, 0.0f); });
    add(p + "attention.dense.weight", {d, d}, layer,
        [&m, layer] { return Weights(m, layer).output(m.head_dim); });
    add_norm(p + "attention.dense.bias", layer, 0.0f);
  }

  void add_falcon(int layer) {
    const Model& m = model_;
    const std::string p = "transformer.h." + std::to_string(layer) + ".";
    const std::int64_t d = m.d_model, dh = m.head_dim;
    const bool new_architecture = m.variant == Variant::gqa;
    const std::string norm = new_architecture ? "ln_attn" : "input_layernorm";
    add_norm(p + norm + ".weight", layer, 1.0f);
    add_norm(p + norm + ".bias", layer, 0.0f);
    add(p + "self_attention.query_key_value.weight",
        {(std::int64_t{m.heads} + 2 * m.kv_heads) * dh, d}, layer, [&m, layer] {
          const Weights w(m, layer);
          const Floats q = w.query(m.head_dim), k = w.key(), v = w.value();
          const int dh_rows = m.head_dim;
          if (m.variant == Variant::mha)
            return fuse_rows({{&q, dh_rows}, {&k, dh_rows}, {&v, dh_rows}}, m.heads, m.d_model);
          if (m.variant == Variant::mqa) {
            return fuse_rows({{&q, m.heads * dh_rows}, {&k, dh_rows}, {&v, dh_rows}}, 1, m.d_model);
          }
          const int group = m.heads / m.kv_heads;  // GQA: [H_kv, G + 2, d_h]
          return fuse_rows({{&q, group * dh_rows}, {&k, dh_rows}, {&v, dh_rows}}, m.kv_heads,
                           m.d_model);
        });
    add(p + "self_attention.dense.weight", {d, d}, layer,
        [&m, layer] { return Weights(m, layer).output(m.head_dim); });
  }

  void add_deepseek(int layer) {
    const Model& m = model_;
    const std::string p = llama_prefix(layer);
    const std::int64_t d = m.d_model, h = m.heads, nope = m.nope_dim, v_dim = m.v_dim,
                       rope = m.rope_dim, latent = m.kv_lora_rank, q_lora = m.q_lora_rank;
    add_norm(p + "input_layernorm.weight", layer, 1.0f);
    if (q_lora == 0) {
      add(p + "self_attn.q_proj.weight", {h * (nope + rope), d}, layer,
          [&m, layer] { return Weights(m, layer).query(m.nope_dim + m.rope_dim); });
    } else {
      add(p + "self_attn.q_a_proj.weight", {q_lora, d}, layer, [&m, layer] {
        return Weights(m, layer).plain(Role::q_a, m.q_lora_rank, m.d_model, init_std(m.d_model));
      });
      add(p + "self_attn.q_a_layernorm.weight", {q_lora}, layer,
          [&m, layer] { return rms_gains(Weights(m, layer), Role::q_a_norm, m.q_lora_rank); });
      add(p + "self_attn.q_b_proj.weight", {h * (nope + rope), q_lora}, layer, [&m, layer] {
        return Weights(m, layer).heads(Role::q, m.heads, m.nope_dim + m.rope_dim, m.q_lora_rank,
                                       init_std(m.q_lora_rank));
      });
    }
    add(p + "self_attn.kv_a_proj_with_mqa.weight", {latent + rope, d}, layer, [&m, layer] {
      return Weights(m, layer).plain(Role::kv_a, m.kv_lora_rank + m.rope_dim, m.d_model,
                                     init_std(m.d_model));
    });
    add(p + "self_attn.kv_a_layernorm.weight", {latent}, layer,
        [&m, layer] { return rms_gains(Weights(m, layer), Role::kv_a_norm, m.kv_lora_rank); });
    add(p + "self_attn.kv_b_proj.weight", {h * (nope + v_dim), latent}, layer, [&m, layer] {
      const Weights w(m, layer);
      const float stddev = init_std(m.kv_lora_rank);
      const Floats k = w.heads(Role::kv_b_k, m.heads, m.nope_dim, m.kv_lora_rank, stddev);
      const Floats v = w.heads(Role::kv_b_v, m.heads, m.v_dim, m.kv_lora_rank, stddev);
      return fuse_rows({{&k, m.nope_dim}, {&v, m.v_dim}}, m.heads, m.kv_lora_rank);
    });
    add(p + "self_attn.o_proj.weight", {d, h * v_dim}, layer,
        [&m, layer] { return Weights(m, layer).output(m.v_dim); });
    add_norm(p + "post_attention_layernorm.weight", layer, 1.0f);
  }

  const Model& model_;
  std::vector<PlannedTensor> tensors_;
};

}  // namespace

std::vector<PlannedTensor> plan_tensors(const Model& model) { return Planner(model).plan(); }

}  // namespace kvrank::detail

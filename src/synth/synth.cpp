// `kvrank synth`: seeded checkpoints of every family/variant of SPEC.md §2 with tunable redundancy.
//
// Reproducibility: every block of weights is drawn from its own splitmix64 stream, keyed by (seed,
// layer, role, block), and turned into Gaussians by a Box–Muller transform written here with plain
// float arithmetic (own log/sin/cos polynomials, no libm, no std::normal_distribution, no FMA
// contraction), so the same options give byte-identical files on every machine and compiler.
// Streaming: the header of each shard is written first (all shapes are known up front), then the
// tensors one by one; at most one layer's tensors are in memory at a time.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "kvrank/synth.hpp"

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
#include "kvrank/error.hpp"
#include "kvrank/report.hpp"

namespace kvrank {
namespace {

namespace fs = std::filesystem;
using Floats = std::vector<float>;

constexpr int kVocabSize = 32;       // a token embedding so the checkpoint looks like a model
constexpr int kMaxExtent = 1 << 20;  // bounds every option so shapes cannot overflow
constexpr std::uint64_t kSharedBlock = ~std::uint64_t{0};  // block index of a role's shared part

// ---- options -----------------------------------------------------------------------------------

const std::vector<std::string> kFamilies = {"llama", "gpt2",        "gpt_neox", "falcon",
                                            "phi3",  "deepseek_v2", "lrkv"};
const std::vector<std::string> kVariants = {"mha", "gqa", "mqa", "mla", "lrkv"};

/// Options resolved and validated: everything the writer needs, nothing optional.
struct Model {
  std::string family;   // llama, lrkv, gpt2, gpt_neox, falcon, phi3, deepseek_v2
  std::string variant;  // mha, gqa, mqa, mla, lrkv
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;  // MLA: qk_nope_head_dim and v_head_dim
  int d_model = 0;
  int rank = 0;          // LRKV
  int kv_lora_rank = 0;  // MLA
  int rope_dim = 0;      // MLA qk_rope_head_dim
  DType dtype = DType::F32;
  std::string torch_dtype;
  int shards = 1;
  std::vector<double> redundancy;  // one per layer
  std::uint64_t seed = 0;
};

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

void check_extent(const char* flag, int value) {
  if (value <= 0)
    throw Error("", std::string(flag) + " " + std::to_string(value) + " must be positive");
  if (value > kMaxExtent) {
    throw Error("", std::string(flag) + " " + std::to_string(value) + " exceeds the limit " +
                        std::to_string(kMaxExtent));
  }
}

std::string format_number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

/// The variant the head counts imply, and whether an explicit --variant agrees with them.
std::string resolve_attention_variant(const std::string& asked, int heads,
                                      const std::optional<int>& kv_heads_option, int& kv_heads) {
  if (!kv_heads_option) {
    if (asked == "gqa") throw Error("", "--variant gqa needs --kv-heads");
    if (asked == "mqa" && heads == 1) throw Error("", "--variant mqa needs --heads > 1 (found 1)");
    kv_heads = asked == "mqa" ? 1 : heads;
    return asked.empty() ? "mha" : asked;
  }
  kv_heads = *kv_heads_option;
  check_extent("--kv-heads", kv_heads);
  if (kv_heads > heads) {
    throw Error("", "--kv-heads " + std::to_string(kv_heads) + " must not exceed --heads " +
                        std::to_string(heads));
  }
  if (heads % kv_heads != 0) {
    throw Error("", "--heads " + std::to_string(heads) + " is not a multiple of --kv-heads " +
                        std::to_string(kv_heads));
  }
  const std::string implied = kv_heads == heads ? "mha" : kv_heads == 1 ? "mqa" : "gqa";
  if (!asked.empty() && asked != implied) {
    throw Error("", "--variant " + asked + " does not match --kv-heads " +
                        std::to_string(kv_heads) + " with --heads " + std::to_string(heads) +
                        " (that is " + implied + ")");
  }
  return implied;
}

/// Family and variant: which combinations exist (SPEC.md §2).
void resolve_family_variant(const SynthOptions& options, Model& model) {
  if (!contains(kFamilies, options.family)) {
    throw Error("", "--family " + options.family + " is not one of " + join(kFamilies));
  }
  if (!options.variant.empty() && !contains(kVariants, options.variant)) {
    throw Error("", "--variant " + options.variant + " is not one of " + join(kVariants));
  }
  model.family = options.family;
  std::string asked = options.variant;
  if (asked == "lrkv" && model.family == "llama") model.family = "lrkv";
  if (asked == "mla" && model.family != "deepseek_v2") {
    throw Error("", "--variant mla needs --family deepseek_v2 (found " + options.family + ")");
  }
  if (asked == "lrkv" && model.family != "lrkv") {
    throw Error("", "--variant lrkv needs --family lrkv or llama (found " + options.family + ")");
  }
  const std::string own_variant = model.family == "lrkv"          ? "lrkv"
                                  : model.family == "deepseek_v2" ? "mla"
                                                                  : "";
  if (!own_variant.empty()) {
    if (!asked.empty() && asked != own_variant) {
      throw Error("", "--family " + model.family + " supports only --variant " + own_variant +
                          " (found " + asked + ")");
    }
    if (options.kv_heads && *options.kv_heads != options.heads) {
      throw Error("", "--kv-heads " + std::to_string(*options.kv_heads) +
                          " does not apply to --variant " + own_variant +
                          " (every query head has its own key; leave it out or use --heads " +
                          std::to_string(options.heads) + ")");
    }
    model.variant = own_variant;
    model.kv_heads = options.heads;
    return;
  }
  model.variant = resolve_attention_variant(asked, options.heads, options.kv_heads, model.kv_heads);
  const bool mha_only = model.family == "gpt2" || model.family == "gpt_neox";
  if (mha_only && model.variant != "mha") {
    throw Error("", "--family " + model.family + " supports only --variant mha (found " +
                        model.variant + ")");
  }
}

void resolve_dtype(const std::string& name, Model& model) {
  static const std::map<std::string, std::pair<DType, std::string>> kDTypes = {
      {"f32", {DType::F32, "float32"}},
      {"bf16", {DType::BF16, "bfloat16"}},
      {"f16", {DType::F16, "float16"}}};
  const auto found = kDTypes.find(name);
  if (found == kDTypes.end()) throw Error("", "--dtype " + name + " is not one of f32, bf16, f16");
  model.dtype = found->second.first;
  model.torch_dtype = found->second.second;
}

void resolve_redundancy(const std::vector<double>& values, Model& model) {
  if (values.size() != 1 && values.size() != static_cast<std::size_t>(model.layers)) {
    throw Error("", "--redundancy has " + std::to_string(values.size()) +
                        " values; expected 1 or one per layer (--layers " +
                        std::to_string(model.layers) + ")");
  }
  for (double value : values) {
    if (!(value >= 0.0 && value <= 1.0)) {
      throw Error("", "--redundancy " + format_number(value) + " is outside [0, 1]");
    }
  }
  model.redundancy = values.size() == 1
                         ? std::vector<double>(static_cast<std::size_t>(model.layers), values[0])
                         : values;
}

Model resolve(const SynthOptions& options) {
  Model model;
  check_extent("--layers", options.layers);
  check_extent("--heads", options.heads);
  check_extent("--head-dim", options.head_dim);
  resolve_family_variant(options, model);
  model.layers = options.layers;
  model.heads = options.heads;
  model.head_dim = options.head_dim;
  model.d_model = options.d_model.value_or(options.heads * options.head_dim);
  check_extent("--d-model", model.d_model);
  const bool head_dim_implied = model.family == "gpt2" || model.family == "gpt_neox" ||
                                model.family == "falcon" || model.family == "phi3";
  if (head_dim_implied && model.d_model != model.heads * model.head_dim) {
    throw Error("", "--d-model " + std::to_string(model.d_model) +
                        " must equal --heads × --head-dim = " +
                        std::to_string(model.heads * model.head_dim) + " for --family " +
                        model.family + " (its configs have no head_dim)");
  }
  if (model.variant == "lrkv") {
    check_extent("--rank", options.rank);
    model.rank = options.rank;
  }
  if (model.variant == "mla") {
    check_extent("--kv-lora-rank", options.kv_lora_rank);
    model.kv_lora_rank = options.kv_lora_rank;
    model.rope_dim = std::max(1, model.head_dim / 2);
  }
  resolve_dtype(options.dtype, model);
  resolve_redundancy(options.redundancy, model);
  if (options.shards < 1) {
    throw Error("", "--shards " + std::to_string(options.shards) + " must be positive");
  }
  model.shards = options.shards;
  model.seed = options.seed;
  return model;
}

// ---- seeded Gaussians --------------------------------------------------------------------------

std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
  return x ^ (x >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15u); }

 private:
  std::uint64_t state_;
};

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
};

std::uint64_t stream_seed(std::uint64_t seed, int layer, Role role, std::uint64_t block) {
  std::uint64_t key = mix64(seed + 0x9E3779B97F4A7C15u);
  key = mix64(key ^ (static_cast<std::uint64_t>(layer) + 1) * 0xD1B54A32D192ED03u);
  key = mix64(key ^ static_cast<std::uint64_t>(role) * 0xAEF17502108EF2D9u);
  return mix64(key ^ (block + 1) * 0xF1357AEA2E62A9C5u);
}

/// Picks `if_set` where `mask` is all ones, `if_clear` where it is zero (branch-free, exact).
float select(std::int32_t mask, float if_set, float if_clear) {
  return std::bit_cast<float>((std::bit_cast<std::int32_t>(if_set) & mask) |
                              (std::bit_cast<std::int32_t>(if_clear) & ~mask));
}

float flip_sign(std::int32_t sign_bit, float x) {
  return std::bit_cast<float>(std::bit_cast<std::int32_t>(x) ^ sign_bit);
}

/// ln x for x in (0, 1], to float precision: x = m·2^e with m in [√½, √2), ln m by the atanh
/// series.
float log_unit(float x) {
  const auto bits = std::bit_cast<std::int32_t>(x);
  const std::int32_t high = (bits & 0x007FFFFF) > 0x3504F3 ? 1 : 0;  // mantissa above √2: halve it
  const std::int32_t exponent = ((bits >> 23) & 0xFF) - 127 + high;
  const float m = std::bit_cast<float>((bits & 0x007FFFFF) | ((127 - high) << 23));
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  const float series = 1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9))));
  return static_cast<float>(exponent) * 0.693147181f + 2.0f * s * series;
}

/// √v for v ≥ 0 by two Newton steps on 1/√v (relative error far below float's): std::sqrt would
/// keep the loop below from vectorising, because of errno.
float sqrt_nonnegative(float v) {
  float y = std::bit_cast<float>(0x5F3759DF - (std::bit_cast<std::int32_t>(v) >> 1));
  y = y * (1.5f - 0.5f * v * y * y);
  y = y * (1.5f - 0.5f * v * y * y);
  return v * y;
}

/// Box–Muller on batches: u1 in (0, 1], u2 in [0, 1) → two standard normals each. Branch-free
/// float arithmetic, so the compiler vectorises it.
void box_muller(const float* u1, const float* u2, float* z0, float* z1, std::size_t count) {
  constexpr float kHalfPi = 1.57079633f;
  constexpr float kQuarterPi = 0.785398163f;
  constexpr float kInvSqrt2 = 0.707106781f;
  for (std::size_t i = 0; i < count; ++i) {
    const float radius = sqrt_nonnegative(-2.0f * log_unit(u1[i]));
    const float turns = u2[i] * 4.0f;  // angle 2π·u2 = quadrant·π/2 + local angle
    const auto quadrant = static_cast<std::int32_t>(turns);
    const float x = (turns - static_cast<float>(quadrant)) * kHalfPi - kQuarterPi;  // [-π/4, π/4)
    const float x2 = x * x;
    const float sin_x =
        x *
        (1.0f - x2 * (1.0f / 6 - x2 * (1.0f / 120 - x2 * (1.0f / 5040 - x2 * (1.0f / 362880)))));
    const float cos_x =
        1.0f - x2 * (0.5f - x2 * (1.0f / 24 - x2 * (1.0f / 720 - x2 * (1.0f / 40320))));
    const float cos_local = (cos_x - sin_x) * kInvSqrt2;  // local angle = x + π/4
    const float sin_local = (sin_x + cos_x) * kInvSqrt2;
    // Rotate by the quadrant: odd quadrants swap (cos, sin) → (−sin, cos); quadrants 2, 3 negate.
    const std::int32_t odd = -(quadrant & 1);
    const std::int32_t negate = (quadrant & 2) << 30;
    z0[i] = radius * flip_sign(negate, select(odd, -sin_local, cos_local));
    z1[i] = radius * flip_sign(negate, select(odd, cos_local, sin_local));
  }
}

/// Fills `out` with N(0, stddev²) values of the stream `stream`.
void fill_gaussian(std::uint64_t stream, float stddev, std::span<float> out) {
  constexpr std::size_t kBatch = 512;  // pairs per Box–Muller batch
  float u1[kBatch], u2[kBatch], z0[kBatch], z1[kBatch];
  SplitMix64 random(stream);
  for (std::size_t begin = 0; begin < out.size(); begin += 2 * kBatch) {
    const std::size_t values = std::min(2 * kBatch, out.size() - begin);
    const std::size_t pairs = (values + 1) / 2;
    for (std::size_t i = 0; i < pairs; ++i) {
      const std::uint64_t bits = random.next();  // two 24-bit uniforms from one draw
      u1[i] = static_cast<float>(static_cast<std::int32_t>((bits >> 40) + 1)) * 0x1p-24f;
      u2[i] = static_cast<float>(static_cast<std::int32_t>((bits >> 16) & 0xFFFFFF)) * 0x1p-24f;
    }
    box_muller(u1, u2, z0, z1, pairs);
    float* target = out.data() + begin;
    for (std::size_t i = 0; i < values / 2; ++i) {
      target[2 * i] = z0[i] * stddev;
      target[2 * i + 1] = z1[i] * stddev;
    }
    if (values % 2 == 1) target[values - 1] = z0[pairs - 1] * stddev;
  }
}

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

// ---- tensor plans ------------------------------------------------------------------------------

/// A tensor to write: its spec, the layer it belongs to (for sharding) and how to draw it.
struct PlannedTensor {
  TensorSpec spec;
  int layer = 0;
  std::function<Floats()> draw;
};

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
    static const std::map<std::string, std::string> kEmbeddings = {
        {"gpt2", "wte.weight"},
        {"gpt_neox", "gpt_neox.embed_in.weight"},
        {"falcon", "transformer.word_embeddings.weight"}};
    const auto found = kEmbeddings.find(model_.family);
    const std::string name =
        found != kEmbeddings.end() ? found->second : "model.embed_tokens.weight";
    const Model& m = model_;
    add(name, {kVocabSize, m.d_model}, 0,
        [&m] { return Weights(m, -1).plain(Role::embed, kVocabSize, m.d_model, 1.0f); });
  }

  void add_layer(int layer) {
    const std::string& family = model_.family;
    if (family == "llama") add_llama(layer);
    if (family == "lrkv") add_lrkv(layer);
    if (family == "phi3") add_phi3(layer);
    if (family == "gpt2") add_gpt2(layer);
    if (family == "gpt_neox") add_gpt_neox(layer);
    if (family == "falcon") add_falcon(layer);
    if (family == "deepseek_v2") add_deepseek(layer);
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
    const bool new_architecture = m.variant == "gqa";
    const std::string norm = new_architecture ? "ln_attn" : "input_layernorm";
    add_norm(p + norm + ".weight", layer, 1.0f);
    add_norm(p + norm + ".bias", layer, 0.0f);
    add(p + "self_attention.query_key_value.weight",
        {(std::int64_t{m.heads} + 2 * m.kv_heads) * dh, d}, layer, [&m, layer] {
          const Weights w(m, layer);
          const Floats q = w.query(m.head_dim), k = w.key(), v = w.value();
          const int dh_rows = m.head_dim;
          if (m.variant == "mha")
            return fuse_rows({{&q, dh_rows}, {&k, dh_rows}, {&v, dh_rows}}, m.heads, m.d_model);
          if (m.variant == "mqa") {
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
    // qk_nope_head_dim = v_head_dim = head_dim; qk_rope_head_dim = rope_dim.
    const std::int64_t d = m.d_model, h = m.heads, nope = m.head_dim, v_dim = m.head_dim,
                       rope = m.rope_dim, latent = m.kv_lora_rank;
    add_norm(p + "input_layernorm.weight", layer, 1.0f);
    add(p + "self_attn.q_proj.weight", {h * (nope + rope), d}, layer,
        [&m, layer] { return Weights(m, layer).query(m.head_dim + m.rope_dim); });
    add(p + "self_attn.kv_a_proj_with_mqa.weight", {latent + rope, d}, layer, [&m, layer] {
      return Weights(m, layer).plain(Role::kv_a, m.kv_lora_rank + m.rope_dim, m.d_model,
                                     init_std(m.d_model));
    });
    // RMSNorm gains in [0.5, 1.5): not all ones, so readers that forget to fold them are caught.
    add(p + "self_attn.kv_a_layernorm.weight", {latent}, layer, [&m, layer] {
      Floats gains = Weights(m, layer).plain(Role::kv_a_norm, 1, m.kv_lora_rank, 0.25f);
      for (float& g : gains) g = 1.0f + std::clamp(g, -0.5f, 0.499f);
      return gains;
    });
    add(p + "self_attn.kv_b_proj.weight", {h * (nope + v_dim), latent}, layer, [&m, layer] {
      const Weights w(m, layer);
      const float stddev = init_std(m.kv_lora_rank);
      const Floats k = w.heads(Role::kv_b_k, m.heads, m.head_dim, m.kv_lora_rank, stddev);
      const Floats v = w.heads(Role::kv_b_v, m.heads, m.head_dim, m.kv_lora_rank, stddev);
      return fuse_rows({{&k, m.head_dim}, {&v, m.head_dim}}, m.heads, m.kv_lora_rank);
    });
    add(p + "self_attn.o_proj.weight", {d, h * v_dim}, layer,
        [&m, layer] { return Weights(m, layer).output(m.head_dim); });
    add_norm(p + "post_attention_layernorm.weight", layer, 1.0f);
  }

  const Model& model_;
  std::vector<PlannedTensor> tensors_;
};

// ---- config.json -------------------------------------------------------------------------------

nlohmann::json config_json(const Model& m) {
  using nlohmann::json;
  json config;
  const json provenance = {{"seed", m.seed}, {"redundancy", m.redundancy}};
  if (m.family == "gpt2") {
    config = {{"architectures", {"GPT2LMHeadModel"}},
              {"model_type", "gpt2"},
              {"n_embd", m.d_model},
              {"n_head", m.heads},
              {"n_layer", m.layers},
              {"n_positions", 1024}};
  } else if (m.family == "gpt_neox") {
    config = {{"architectures", {"GPTNeoXForCausalLM"}},
              {"model_type", "gpt_neox"},
              {"hidden_size", m.d_model},
              {"num_attention_heads", m.heads},
              {"num_hidden_layers", m.layers},
              {"rotary_pct", 0.25}};
  } else if (m.family == "falcon") {
    config = {{"architectures", {"FalconForCausalLM"}},
              {"model_type", "falcon"},
              {"hidden_size", m.d_model},
              {"num_attention_heads", m.heads},
              {"num_hidden_layers", m.layers},
              {"num_kv_heads", m.kv_heads},
              {"new_decoder_architecture", m.variant == "gqa"},
              {"multi_query", m.variant == "mqa"},
              {"parallel_attn", true},
              {"bias", false},
              {"alibi", false}};
  } else if (m.family == "deepseek_v2") {
    config = {{"architectures", {"DeepseekV2ForCausalLM"}},
              {"model_type", "deepseek_v2"},
              {"hidden_size", m.d_model},
              {"num_attention_heads", m.heads},
              {"num_key_value_heads", m.heads},
              {"num_hidden_layers", m.layers},
              {"kv_lora_rank", m.kv_lora_rank},
              {"q_lora_rank", nullptr},
              {"qk_nope_head_dim", m.head_dim},
              {"qk_rope_head_dim", m.rope_dim},
              {"v_head_dim", m.head_dim}};
  } else {
    const bool phi3 = m.family == "phi3";
    config = {{"architectures", {phi3 ? "Phi3ForCausalLM" : "LlamaForCausalLM"}},
              {"model_type", phi3 ? "phi3" : "llama"},
              {"hidden_size", m.d_model},
              {"num_attention_heads", m.heads},
              {"num_key_value_heads", m.kv_heads},
              {"num_hidden_layers", m.layers}};
    if (!phi3) config["head_dim"] = m.head_dim;
    if (m.family == "lrkv") {
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
  const Model model = resolve(options);
  const std::vector<PlannedTensor> tensors = Planner(model).plan();
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

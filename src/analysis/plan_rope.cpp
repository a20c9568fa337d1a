// Which entries of a head RoPE rotates together, per model type: what the key gauge of
// `kvrank plan` may rotate without changing the model (docs/plan.md). The conventions follow the
// models' Hugging Face implementations; a model type not listed here is refused with --gauge auto
// unless --rope names its convention.
#include <array>
#include <cmath>

#include "kvrank/analysis/plan.hpp"
#include "kvrank/base/error.hpp"

namespace kvrank {
namespace {

struct RopeRow {
  std::string_view model_type;
  RopeConvention convention;
};

constexpr auto kHalf = RopeConvention::rotate_half;
constexpr auto kPairs = RopeConvention::interleaved;
constexpr auto kNone = RopeConvention::none;

// Absent on purpose (their convention depends on options or is not checked): falcon (ALiBi or
// RoPE), baichuan (RoPE at 7B, ALiBi at 13B), mpt (ALiBi or RoPE), chatglm, zamba2,
// granitemoehybrid, and the MLA models (not grouped).
constexpr std::array<RopeRow, 40> kRopeRows{{
    {"llama", kHalf},      {"mistral", kHalf},     {"mixtral", kHalf},   {"qwen2", kHalf},
    {"qwen2_moe", kHalf},  {"qwen3", kHalf},       {"qwen3_moe", kHalf}, {"qwen3_next", kHalf},
    {"gemma", kHalf},      {"gemma2", kHalf},      {"gemma3", kHalf},    {"gemma3_text", kHalf},
    {"olmo2", kHalf},      {"olmoe", kHalf},       {"phi3", kHalf},      {"phi", kHalf},
    {"starcoder2", kHalf}, {"granite", kHalf},     {"gpt_neox", kHalf},  {"stablelm", kHalf},
    {"qwen", kHalf},       {"internlm2", kHalf},   {"llama4", kPairs},   {"llama4_text", kPairs},
    {"cohere", kPairs},    {"glm", kPairs},        {"gpt2", kNone},      {"opt", kNone},
    {"bloom", kNone},      {"gpt_bigcode", kNone}, {"jamba", kNone},     {"bert", kNone},
    {"roberta", kNone},    {"vit", kNone},         {"t5", kNone},        {"whisper", kNone},
    {"bart", kNone},       {"mbart", kNone},       {"clip", kNone},      {"siglip", kNone},
}};

/// The rotary share of a head from config.json: partial_rotary_factor, or gpt_neox's rotary_pct.
double rotary_fraction(const Checkpoint& checkpoint) {
  if (!checkpoint.config()) return 1.0;
  for (const char* key : {"partial_rotary_factor", "rotary_pct"}) {
    const auto found = checkpoint.config()->find(key);
    if (found == checkpoint.config()->end() || !found->is_number()) continue;
    const double fraction = found->get<double>();
    if (!(fraction > 0 && fraction <= 1))
      throw Error(checkpoint.config_path().string(),
                  std::string(key) + " must lie in (0, 1] (found " + found->dump() + ")");
    return fraction;
  }
  return 1.0;
}

const RopeRow* rope_row(std::string_view model_type) {
  for (const RopeRow& row : kRopeRows)
    if (row.model_type == model_type) return &row;
  return nullptr;
}

}  // namespace

RopeLayout model_rope(const Checkpoint& checkpoint, const ModelLayout& layout,
                      std::optional<RopeConvention> given) {
  RopeLayout rope;
  if (given) {
    rope.convention = *given;
  } else {
    const RopeRow* row = rope_row(layout.model_type);
    if (!row)
      throw Error(checkpoint.path().string(),
                  "kvrank does not know the RoPE convention of " +
                      (layout.model_type.empty() ? std::string("this checkpoint (no model_type)")
                                                 : "model_type " + layout.model_type) +
                      ": give --rope rotate_half|interleaved|none, or --gauge none");
    rope.convention = row->convention;
  }
  if (rope.convention == RopeConvention::none) return rope;
  const int dims = static_cast<int>(std::lround(rotary_fraction(checkpoint) * layout.head_dim));
  rope.rotary_dims = dims - dims % 2;
  return rope;
}

}  // namespace kvrank

// Which entries of a head RoPE rotates together, per model type: what the key gauge of
// `kvrank plan` may rotate without changing the model (docs/plan.md). The conventions follow the
// models' Hugging Face implementations; a model type not listed here (kUnplanned, or one kvrank
// does not read) is refused with --gauge auto unless --rope names its convention.
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

// Every model type of the model-type table (model_type.hpp) is in this table or in kUnplanned
// below; a test fails for one in neither, so that a new model type cannot go unplanned unnoticed.
constexpr std::array<RopeRow, 44> kRopeRows{{
    {"llama", kHalf},
    {"mistral", kHalf},
    {"mixtral", kHalf},
    {"qwen2", kHalf},
    {"qwen2_moe", kHalf},
    {"qwen3", kHalf},
    {"qwen3_moe", kHalf},
    {"qwen3_next", kHalf},
    {"gemma", kHalf},
    {"gemma2", kHalf},
    {"gemma3", kHalf},
    {"gemma3_text", kHalf},
    {"olmo2", kHalf},
    {"olmoe", kHalf},
    {"phi3", kHalf},
    {"phi", kHalf},
    {"starcoder2", kHalf},
    {"granite", kHalf},
    {"gpt_neox", kHalf},
    {"stablelm", kHalf},
    {"qwen", kHalf},
    {"internlm2", kHalf},
    {"llama4", kPairs},
    {"llama4_text", kPairs},
    {"cohere", kPairs},
    {"glm", kPairs},
    {"gpt2", kNone},
    {"opt", kNone},
    {"bloom", kNone},
    {"gpt_bigcode", kNone},
    {"jamba", kNone},
    {"bert", kNone},
    {"roberta", kNone},
    {"vit", kNone},
    {"t5", kNone},
    {"whisper", kNone},
    {"bart", kNone},
    {"mbart", kNone},
    {"clip", kNone},
    {"siglip", kNone},
    {"clip_text_model", kNone},
    {"clip_vision_model", kNone},  // learned positions
    {"siglip_text_model", kNone},
    {"siglip_vision_model", kNone},
}};

struct UnplannedRow {
  std::string_view model_type;
  std::string_view reason;
};

/// Model types kvrank reads whose convention plan does not assume: --rope must name it.
constexpr std::array<UnplannedRow, 10> kUnplanned{{
    {"falcon", "ALiBi or RoPE, by its config"},
    {"baichuan", "RoPE at 7B, ALiBi at 13B"},
    {"mpt", "ALiBi or RoPE, by its config"},
    {"chatglm", "its own 2-D RoPE, not checked"},
    {"zamba2", "not checked"},
    {"granitemoehybrid", "not checked"},
    {"bamba", "not checked"},
    {"deepseek_v2", "MLA: no per-head keys to group"},
    {"deepseek_v3", "MLA: no per-head keys to group"},
    {"minicpm3", "MLA: no per-head keys to group"},
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

std::optional<RopeConvention> model_type_rope(std::string_view model_type) {
  const RopeRow* row = rope_row(model_type);
  return row ? std::optional(row->convention) : std::nullopt;
}

std::string_view unplanned_reason(std::string_view model_type) {
  for (const UnplannedRow& row : kUnplanned)
    if (row.model_type == model_type) return row.reason;
  return {};
}

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
                      (unplanned_reason(layout.model_type).empty()
                           ? std::string()
                           : " (" + std::string(unplanned_reason(layout.model_type)) + ")") +
                      ": give --rope rotate_half|interleaved|none, or --gauge none");
    rope.convention = row->convention;
  }
  if (rope.convention == RopeConvention::none) return rope;
  const int dims = static_cast<int>(std::lround(rotary_fraction(checkpoint) * layout.head_dim));
  rope.rotary_dims = dims - dims % 2;
  return rope;
}

}  // namespace kvrank

// `kvrank synth` (synth.cpp): the options, resolved and validated into a Model.
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <utility>

#include "kvrank/base/error.hpp"
#include "synth/synth_detail.hpp"

namespace kvrank::detail {
namespace {

// ---- options -----------------------------------------------------------------------------------

void check_extent(const char* flag, int value) {
  if (value <= 0)
    throw Error("", std::string(flag) + " " + std::to_string(value) + " must be positive");
  if (value > kMaxExtent) {
    throw Error("", std::string(flag) + " " + std::to_string(value) + " exceeds the limit " +
                        std::to_string(kMaxExtent));
  }
}

void check_extent_or_zero(const char* flag, int value) {
  if (value < 0) {
    throw Error("", std::string(flag) + " " + std::to_string(value) + " must not be negative");
  }
  if (value > 0) check_extent(flag, value);
}

std::string format_number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

/// The variant the head counts imply, and whether an explicit --variant agrees with them.
Variant resolve_attention_variant(std::optional<Variant> asked, int heads,
                                  const std::optional<int>& kv_heads_option, int& kv_heads) {
  if (!kv_heads_option) {
    if (asked == Variant::gqa) throw Error("", "--variant gqa needs --kv-heads");
    if (asked == Variant::mqa && heads == 1)
      throw Error("", "--variant mqa needs --heads > 1 (found 1)");
    kv_heads = asked == Variant::mqa ? 1 : heads;
    return asked.value_or(Variant::mha);
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
  const Variant implied = attention_variant(heads, kv_heads);
  if (asked && asked != implied) {
    throw Error("", "--variant " + std::string(variant_name(*asked)) +
                        " does not match --kv-heads " + std::to_string(kv_heads) +
                        " with --heads " + std::to_string(heads) + " (that is " +
                        std::string(variant_name(implied)) + ")");
  }
  return implied;
}

/// --family and --variant as the table's values: errors list what synth writes.
std::pair<Family, std::optional<Variant>> parse_family_variant(const SynthOptions& options) {
  const std::optional<Family> family = family_named(options.family);
  if (!family || !family_info(*family).synthesizable) {
    throw Error("", "--family " + options.family + " is not one of " + synthesizable_family_list());
  }
  std::optional<Variant> variant;
  if (!options.variant.empty()) {
    variant = variant_named(options.variant);
    if (!variant) {
      throw Error("", "--variant " + options.variant + " is not one of " + variant_list(", "));
    }
  }
  return {*family, variant};
}

/// Family and variant: which combinations exist (docs/families.md).
void resolve_family_variant(const SynthOptions& options, Model& model) {
  const auto [family, asked] = parse_family_variant(options);
  model.family = family;
  if (asked == Variant::lrkv && model.family == Family::llama) model.family = Family::lrkv;
  if (asked == Variant::mla && model.family != Family::deepseek_v2) {
    throw Error("", "--variant mla needs --family deepseek_v2 (found " + options.family + ")");
  }
  if (asked == Variant::lrkv && model.family != Family::lrkv) {
    throw Error("", "--variant lrkv needs --family lrkv or llama (found " + options.family + ")");
  }
  const std::string name(family_name(model.family));
  if (const std::optional<Variant> own = family_variant(model.family)) {
    const std::string own_name(variant_name(*own));
    if (asked && asked != own) {
      throw Error("", "--family " + name + " supports only --variant " + own_name + " (found " +
                          std::string(variant_name(*asked)) + ")");
    }
    if (options.kv_heads && *options.kv_heads != options.heads) {
      throw Error("", "--kv-heads " + std::to_string(*options.kv_heads) +
                          " does not apply to --variant " + own_name +
                          " (every query head has its own key; leave it out or use --heads " +
                          std::to_string(options.heads) + ")");
    }
    model.variant = *own;
    model.kv_heads = options.heads;
    return;
  }
  model.variant = resolve_attention_variant(asked, options.heads, options.kv_heads, model.kv_heads);
  if (family_info(model.family).mha_only && model.variant != Variant::mha) {
    throw Error("", "--family " + name + " supports only --variant mha (found " +
                        std::string(variant_name(model.variant)) + ")");
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

}  // namespace

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
  if (family_info(model.family).head_dim_implied && model.d_model != model.heads * model.head_dim) {
    throw Error("", "--d-model " + std::to_string(model.d_model) +
                        " must equal --heads × --head-dim = " +
                        std::to_string(model.heads * model.head_dim) + " for --family " +
                        std::string(family_name(model.family)) + " (its configs have no head_dim)");
  }
  if (model.variant == Variant::lrkv) {
    check_extent("--rank", options.rank);
    model.rank = options.rank;
  }
  if (model.variant == Variant::mla) {
    check_extent("--kv-lora-rank", options.kv_lora_rank);
    model.kv_lora_rank = options.kv_lora_rank;
    model.nope_dim = options.nope_dim.value_or(model.head_dim);
    model.rope_dim = options.rope_dim.value_or(std::max(1, model.head_dim / 2));
    model.v_dim = options.v_head_dim.value_or(model.head_dim);
    model.q_lora_rank = options.q_lora_rank;
    check_extent("--v-head-dim", model.v_dim);
    check_extent("--nope-dim + --rope-dim", model.nope_dim + model.rope_dim);
    check_extent_or_zero("--nope-dim", model.nope_dim);
    check_extent_or_zero("--rope-dim", model.rope_dim);
    check_extent_or_zero("--q-lora-rank", model.q_lora_rank);
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

}  // namespace kvrank::detail

// Dense layouts (families.cpp): tensor-name templates with a "{i}" layer slot, and the dense
// layouts as data (DenseSpec), found by their tensor names.
#include <algorithm>
#include <array>
#include <regex>

#include "layout/dense.hpp"

namespace kvrank::dense {

// ---- tensor-name templates ("model.layers.{i}.self_attn.q_proj.weight") -----------------------

std::string replace_last(std::string text, std::string_view from, std::string_view to) {
  const auto at = text.rfind(from);
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::string layer_name(const std::string& name_template, int layer) {
  std::string name = name_template;
  const auto at = name.find(kLayerSlot);
  if (at != std::string::npos) name.replace(at, kLayerSlot.size(), std::to_string(layer));
  return name;
}

/// The layer indices present for a template: [first, last], or nullopt when no tensor matches.
std::optional<std::pair<int, int>> template_layers(const Checkpoint& checkpoint,
                                                   const std::string& name_template) {
  const auto slot = name_template.find(kLayerSlot);
  const std::string prefix = name_template.substr(0, slot);
  const std::string suffix = name_template.substr(slot + kLayerSlot.size());
  std::optional<std::pair<int, int>> range;
  for (const TensorView& tensor : checkpoint.tensors()) {
    const std::string& name = tensor.name;
    if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
        !name.ends_with(suffix))
      continue;
    const std::string digits =
        name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (digits.size() > 6 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const int layer = std::stoi(digits);
    if (!range) range = {layer, layer};
    range->first = std::min(range->first, layer);
    range->second = std::max(range->second, layer);
  }
  return range;
}

namespace {

/// The template of the first tensor whose whole name matches `pattern` (group 1 = layer index).
std::optional<std::string> find_template(const Checkpoint& checkpoint, const std::regex& pattern) {
  std::smatch match;
  for (const TensorView& tensor : checkpoint.tensors()) {
    if (!std::regex_match(tensor.name, match, pattern)) continue;
    std::string name_template = tensor.name;
    name_template.replace(static_cast<std::size_t>(match.position(1)),
                          static_cast<std::size_t>(match.length(1)), kLayerSlot);
    return name_template;
  }
  return std::nullopt;
}

// ---- dense layouts as data ----------------------------------------------------------------------

struct FusedFamily {
  const char* family;
  const char* pattern;  // the fused tensor; group 1 = layer index
  const char* fused_part;
  const char* output_part;
  const char* order;
  bool in_out;
};

constexpr std::array<FusedFamily, 4> kFusedFamilies{{
    {"phi3", R"((?:.*\.)?layers\.(\d+)\.self_attn\.qkv_proj\.weight)", "qkv_proj", "o_proj",
     "stacked", false},
    {"gpt2", R"((?:transformer\.)?h\.(\d+)\.attn\.c_attn\.weight)", "c_attn", "c_proj", "stacked",
     true},
    {"gpt_neox", R"((?:gpt_neox\.)?layers\.(\d+)\.attention\.query_key_value\.weight)",
     "query_key_value", "dense", "grouped", false},
    {"falcon", R"((?:transformer\.)?h\.(\d+)\.self_attention\.query_key_value\.weight)",
     "query_key_value", "dense", "grouped", false},
}};

bool template_present(const Checkpoint& checkpoint, const std::string& name_template) {
  return template_layers(checkpoint, name_template).has_value();
}

/// Llama-like: separate q/k/v/o projections, found by their key projection (K/V-only inputs such
/// as NPY folders of `layers.{i}.k_proj` have no queries).
std::optional<DenseSpec> find_llama(const Checkpoint& checkpoint) {
  static const std::regex pattern(R"((?:.*\.)?layers\.(\d+)\.(?:self_attn\.)?k_proj(?:\.weight)?)");
  const auto key_template = find_template(checkpoint, pattern);
  if (!key_template) return std::nullopt;
  DenseSpec spec{"llama", {}, "", false};
  for (const char* role : {"q", "k", "v", "o"}) {
    std::string name_template = replace_last(*key_template, "k_proj", std::string(role) + "_proj");
    const bool required = role[0] == 'k' || role[0] == 'v';
    if (required || template_present(checkpoint, name_template)) spec.names[role] = name_template;
  }
  const std::string& file =
      checkpoint.at(layer_name(*key_template, template_layers(checkpoint, *key_template)->first))
          .file;
  if (file.ends_with(".npy") || file.ends_with(".npz")) spec.family = "npy";
  return spec;
}

std::optional<DenseSpec> find_fused(const Checkpoint& checkpoint, const FusedFamily& family) {
  const auto fused_template = find_template(checkpoint, std::regex(family.pattern));
  if (!fused_template) return std::nullopt;
  DenseSpec spec{family.family, {{"qkv", *fused_template}}, family.order, family.in_out};
  std::string output = replace_last(*fused_template, family.fused_part, family.output_part);
  if (template_present(checkpoint, output)) spec.names["o"] = output;
  return spec;
}

}  // namespace

/// The dense layout of a checkpoint by its tensor names; `only` restricts to one family.
std::optional<DenseSpec> find_dense(const Checkpoint& checkpoint,
                                    const std::optional<std::string>& only) {
  for (const FusedFamily& family : kFusedFamilies) {
    if (only && *only != family.family) continue;
    if (auto spec = find_fused(checkpoint, family)) return spec;
  }
  if (!only || *only == "llama" || *only == "npy") return find_llama(checkpoint);
  return std::nullopt;
}

}  // namespace kvrank::dense

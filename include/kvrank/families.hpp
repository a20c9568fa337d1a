// Checkpoint layouts of every attention family (SPEC.md §2): detection, and per-head factors.
//
// detect_layout() reads config.json (when present), the `--map` file and the tensor names, and
// decides the family, the variant (mha | gqa | mqa | mla | lrkv) and the head geometry; flags in
// LayoutOverrides win over config.json. layer_factors() then builds, for one layer and one
// representation, the HeadFactors (factors.hpp) that diversity.hpp consumes, reading only that
// layer's attention tensors.
//
//   Checkpoint ckpt = Checkpoint::open(path);
//   ModelLayout layout = detect_layout(ckpt, {});
//   for (int layer = 0; layer < layout.num_layers; ++layer)
//     use(analyze_layer(layer_factors(ckpt, layout, layer, Repr::qk)));  // diversity.hpp
// (this example is compiled and run by tests/header_examples_test.cpp)
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/checkpoint.hpp"
#include "kvrank/factors.hpp"

namespace kvrank {

/// Layer indices kvrank reads — in tensor names, `--layers` and `baseline --layers` — are below
/// this (the deepest models have about 130 layers); larger ones are refused before anything is
/// allocated for them.
inline constexpr int kMaxLayers = 100'000;

/// Which bilinear form represents a head (SPEC.md §1).
enum class Repr { qk, ov, k, v };
std::string_view repr_name(Repr repr) noexcept;
/// Parses "qk", "ov", "k", "v"; throws kvrank::Error (usage) otherwise.
Repr parse_repr(std::string_view name);

/// What the user may force from the command line (each wins over config.json).
struct LayoutOverrides {
  std::optional<std::string> family;
  std::optional<int> heads;
  std::optional<int> kv_heads;
  std::optional<int> head_dim;
  std::optional<std::filesystem::path> map_file;  ///< --map: role → tensor-name pattern
  bool activations = false;                       ///< --activations: captured Q/K/V, not weights
};

struct ModelLayout {
  std::string family;   ///< "llama", "gpt2", "gpt_neox", "falcon", "phi3", "deepseek_v2", "lrkv",
                        ///< "map", "npy", "activations"
  std::string variant;  ///< "mha", "gqa", "mqa", "mla", "lrkv"
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int d_model = 0;
  int num_layers = 0;
  std::optional<int> lrkv_rank;
  std::optional<int> mla_kv_lora_rank;
  bool has_queries = true;  ///< false for K/V-only inputs: only `k` and `v` can be analysed
  bool has_outputs = true;  ///< false when no o_proj/dense: `ov` cannot be analysed
  /// Family-specific facts layer_factors() needs (tensor name prefix, MLA dims, falcon layout...).
  std::map<std::string, std::string> details;
};

/// Detects family, variant and geometry. Throws kvrank::Error when config and tensors disagree
/// (naming both) or when a tensor the layout needs is missing.
ModelLayout detect_layout(const Checkpoint& checkpoint, const LayoutOverrides& overrides = {});

/// The per-head factors of one layer for `repr`. Reads and converts only that layer's tensors;
/// validates their shapes against `layout` and their values (NaN/Inf) — errors name the tensor.
HeadFactors layer_factors(const Checkpoint& checkpoint, const ModelLayout& layout, int layer,
                          Repr repr);

/// The tensor names of one layer that layer_factors() reads (for release() after use).
std::vector<std::string> layer_tensor_names(const ModelLayout& layout, int layer);

}  // namespace kvrank

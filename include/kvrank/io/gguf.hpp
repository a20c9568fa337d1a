// The GGUF format (llama.cpp, Ollama): parsed from bytes, validated like safetensors.
//
// Layout (little-endian; ggml docs/gguf.md): "GGUF", uint32 version (2 or 3), uint64 tensor count,
// uint64 metadata count; the metadata, each a string key (uint64 length + UTF-8 bytes), a uint32
// value type and the value (an array is a uint32 element type, a uint64 count and the elements);
// the tensor infos, each a name, uint32 n_dims, uint64 ne[n_dims] (ne[0] varies fastest), a uint32
// GGML type and a uint64 offset into the data section; then the data section, which starts at the
// next multiple of the alignment (`general.alignment`, a power of two, default 32).
//
// Rules enforced (each a kvrank::Error naming the file, and the tensor when there is one): magic;
// version 2 or 3 (version 1 and big-endian files are refused by name); each count no larger than
// the bytes left could hold (nothing is reserved from a claimed count); every string inside the
// file, keys and tensor names at most kMaxGgufName bytes and valid UTF-8; known value types, no
// nested arrays, no duplicate keys; at most kMaxGgufMetadata entries and kMaxGgufTensors tensors;
// general.alignment a uint32 power of two; at most 4 dims, each ≤ 2^63 − 1 with the byte size
// computed with overflow detection; a known GGML type, a block type's ne[0] a whole number of
// blocks; offsets aligned, tensors inside the file and not overlapping; no duplicate names.
// Truncation anywhere is "truncated".
//
// Shapes are given in PyTorch order (reversed ne): a weight with ne = [in, out] has shape
// [out, in], row-major, as in safetensors. Tensors of GGML types kvrank cannot dequantize (Q8_1,
// IQ2_XXS, TQ1_0, MXFP4, ...) are validated and listed in `unsupported`, not in `tensors`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvrank/io/tensor.hpp"

namespace kvrank {

/// A tensor of a GGML type kvrank does not convert.
struct GgufUnsupportedTensor {
  std::string name;
  std::string ggml_type;            ///< "IQ2_XXS", "MXFP4", ...
  std::vector<std::int64_t> shape;  ///< in PyTorch order, as TensorView::shape
};

struct GgufFile {
  std::uint32_t version = 0;
  std::uint64_t alignment = 0;
  /// Scalars as JSON numbers, booleans and strings; arrays of at most kMaxGgufKeptArray numbers or
  /// booleans as JSON arrays. Longer arrays and arrays of strings (the tokenizer's vocabulary) are
  /// validated and skipped.
  std::map<std::string, nlohmann::json> metadata;
  std::vector<TensorView> tensors;  ///< in file order; views into the given bytes, GGUF names
  std::vector<GgufUnsupportedTensor> unsupported;
};

/// Longest key or tensor name accepted (ggml's own limit for names is 63 bytes).
inline constexpr std::size_t kMaxGgufName = 65535;
/// Longest metadata array kept in GgufFile::metadata (per-layer hyperparameters are far shorter).
inline constexpr std::uint64_t kMaxGgufKeptArray = 4096;
/// Most metadata entries and tensor infos read. Each costs a few hundred bytes of memory however
/// small it is in the file (a 13-byte entry, a 24-byte tensor info): unbounded, a file of millions
/// of them took ~5× its size in memory. Real files have tens of entries (a tokenizer's vocabulary
/// is one array) and a few thousand tensors.
inline constexpr std::uint64_t kMaxGgufMetadata = 65'536;
inline constexpr std::uint64_t kMaxGgufTensors = 262'144;

/// Parses and validates a whole GGUF file held in `file_bytes` (usually a memory map; only the
/// header is read). `file_name` is used in error messages. Throws kvrank::Error.
GgufFile parse_gguf(std::span<const std::byte> file_bytes, const std::string& file_name);

/// A GGUF file seen as a Hugging Face checkpoint, so family detection and the factor code apply
/// unchanged: attention tensors renamed (`blk.{i}.attn_q.weight` -> `model.layers.{i}.self_attn.
/// q_proj.weight`, attn_k/v/output, attn_qkv -> qkv_proj, attn_q_norm/attn_k_norm, and DeepSeek's
/// attn_q_a, attn_q_a_norm, attn_q_b, attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b) with the GGUF name
/// kept in TensorView::stored_name; every other tensor under its GGUF name; and a config.json
/// synthesized from `{arch}.attention.head_count`, `head_count_kv`, `key_length`, `value_length`,
/// `{arch}.embedding_length`, `{arch}.block_count` and, for MLA (when `kv_lora_rank` is present),
/// `q_lora_rank`, `kv_lora_rank`, `rope.dimension_count`, `key_length_mla`, `value_length_mla`,
/// `expert_gating_func`. The config holds `gguf_architecture` (general.architecture), not a
/// model_type: the layout layer's model-type table (kvrank/layout/model_type.hpp) maps it, and
/// refuses an architecture it does not read.
///
/// llama.cpp's converter permutes the rows of Q and K within each head (for its RoPE layout); the
/// permutation is the same for a query head and its key head, so every representation kvrank
/// computes is unchanged and the rows are left as stored. Gemma's converter stores RMSNorm gains as
/// 1 + w: they are left as stored, and the layout layer applies GGUF gains as they are.
struct GgufCheckpoint {
  std::vector<TensorView> tensors;
  nlohmann::json config;  ///< an object, with "gguf_architecture" and the fields above
};

/// Maps a parsed GGUF file. Throws kvrank::Error (naming `file_name`) for missing or ill-typed
/// hyperparameters. An attention tensor of a GGML type kvrank cannot dequantize is listed with its
/// shape, and refused (naming the type and the tensor) only when it is read: `--repr qk` does not
/// need `attn_v`.
GgufCheckpoint gguf_checkpoint(GgufFile file, const std::string& file_name);

/// `split.no` (0-based) and `split.count` of one part of a GGUF split by llama-gguf-split.
struct GgufSplit {
  int index = 0;
  int count = 1;
};
/// The split a part belongs to, or nullopt for a whole file (no split.count, or 1).
std::optional<GgufSplit> gguf_split(const GgufFile& file, const std::string& file_name);
/// The file name of part `index` (0-based) of a split whose first part is `first`
/// (`PREFIX-00001-of-0000N.gguf` → `PREFIX-0000k-of-0000N.gguf`); throws kvrank::Error naming
/// `first` when it is not named so.
std::string gguf_split_part_name(const std::string& first, int index, int count);

}  // namespace kvrank

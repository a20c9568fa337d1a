// A model's tensors, whatever the files: one lazily-read, validated catalogue of TensorViews.
//
// Accepted paths:
//  - a `.safetensors` file;
//  - a folder with `model.safetensors`, or `model.safetensors.index.json` and its shards (every
//    tensor the index maps must exist in the shard it names; a missing shard is an error naming the
//    index and the shard), or any other `*.safetensors` files;
//  - a `.npy` file (tensor name = file stem), an `.npz` archive, or a folder of them;
//  - a `.gguf` file (gguf.hpp): attention tensors under their Hugging Face names, and a config
//    synthesized from its metadata (config_path() is then the GGUF file itself).
// `config.json` is read from the folder (or from beside a single file) when present.
//
// Or tensors in memory (Checkpoint::from_memory: the Python module's state dicts), viewed where
// they lie, with a config given as JSON: family detection and analysis are then the same as for
// files.
//
// Opening parses headers only; tensor data is touched when a caller converts a view (to_f32 /
// to_matrix), so peak memory is what the caller converts at once.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvrank/io/npy.hpp"
#include "kvrank/io/tensor.hpp"

namespace kvrank {

class MappedFile;

struct OpenOptions {
  NpyOptions npy;
};

class Checkpoint {
 public:
  /// Opens and validates every file of the checkpoint at `path`. Throws kvrank::Error.
  static Checkpoint open(const std::filesystem::path& path, const OpenOptions& options = {});

  /// Tensors that live in the caller's memory, viewed without a copy: each view's `bytes` must
  /// stay valid and unchanged while the Checkpoint is used; or produced when read (`deferred`:
  /// the Python module copies a GPU or strided tensor then, and release() drops the copy). `name`
  /// stands for the path in results and error messages ("<in memory>"); `config` (a JSON object, or
  /// none) plays config.json and is named "config" in errors. Throws kvrank::Error when a view's
  /// byte count does not match its shape and dtype, a name appears twice, or the config is not an
  /// object.
  static Checkpoint from_memory(const std::string& name, std::vector<TensorView> tensors,
                                std::optional<nlohmann::json> config);

  /// The path the user gave.
  const std::filesystem::path& path() const noexcept { return path_; }
  /// All tensors, sorted by name.
  const std::vector<TensorView>& tensors() const noexcept { return tensors_; }
  /// The tensor called `name`, or nullptr.
  const TensorView* find(std::string_view name) const noexcept;
  /// The tensor called `name`; throws kvrank::Error naming the checkpoint and tensor when missing.
  const TensorView& at(std::string_view name) const;
  /// Parsed config.json, if the checkpoint has one (always a JSON object).
  const std::optional<nlohmann::json>& config() const noexcept { return config_; }
  /// Where config.json was read from (empty when none), for error messages.
  const std::filesystem::path& config_path() const noexcept { return config_path_; }

  /// Lets the OS drop the pages of `tensor` from memory (streaming a model one layer at a time).
  void release(const TensorView& tensor) const noexcept;

 private:
  std::filesystem::path path_;
  std::filesystem::path config_path_;
  std::optional<nlohmann::json> config_;
  std::vector<TensorView> tensors_;
  std::vector<std::shared_ptr<const MappedFile>> maps_;  // keep the views valid
};

}  // namespace kvrank

#include "kvrank/io/checkpoint.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/mapped_file.hpp"
#include "kvrank/base/text.hpp"
#include "kvrank/io/gguf.hpp"
#include "kvrank/io/safetensors.hpp"

namespace kvrank {
namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kConfigName = "config.json";

bool has_extension(const fs::path& path, std::string_view extension) {
  return path.extension() == extension;
}

// A shard name of an index must stay inside the index's folder: no absolute path, no "..", like
// the Hugging Face loaders (an index from the Hub must not make kvrank read /etc/… or ../…).
bool is_inside_folder(const std::string& shard_name) {
  const fs::path shard(shard_name);
  if (shard_name.empty() || shard.is_absolute() || shard.has_root_path()) return false;
  return std::none_of(shard.begin(), shard.end(),
                      [](const fs::path& part) { return part == ".."; });
}

bool is_index_file(const fs::path& path) {
  return path.filename().string().ends_with(".safetensors.index.json");
}

// The regular files of `folder` with `extension`, sorted by name.
std::vector<fs::path> files_with_extension(const fs::path& folder, std::string_view extension) {
  std::vector<fs::path> files;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (it->is_regular_file(ignored) && has_extension(it->path(), extension)) {
      files.push_back(it->path());
    }
  }
  if (error) throw Error(folder.string(), "cannot list the folder: " + error.message());
  std::sort(files.begin(), files.end());
  return files;
}

bool starts_with_gguf_magic(const fs::path& path) {
  // Regular files only: opening a FIFO (with no writer) would block.
  std::error_code error;
  if (!fs::is_regular_file(path, error)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, sizeof magic) && std::string_view(magic, sizeof magic) == "GGUF";
}

// Builds a Checkpoint's catalogue file by file, filling the members Checkpoint::open hands it.
class CheckpointLoader {
 public:
  CheckpointLoader(std::vector<TensorView>& tensors,
                   std::vector<std::shared_ptr<const MappedFile>>& maps, const OpenOptions& options)
      : tensors_(tensors), maps_(maps), options_(options) {}

  /// The config a GGUF file's metadata stands for (a GGUF file carries no config.json).
  std::optional<nlohmann::json> gguf_config;

  void add_file(const fs::path& path) {
    if (has_extension(path, ".safetensors")) {
      add_safetensors(path);
    } else if (has_extension(path, ".npy")) {
      add_npy(path);
    } else if (has_extension(path, ".npz")) {
      add_npz(path);
    } else if (is_index_file(path)) {
      add_index(path);
    } else if (has_extension(path, ".gguf") || starts_with_gguf_magic(path)) {
      add_gguf(path);  // Ollama keeps GGUF files as extension-less blobs (sha256-...)
    } else {
      throw Error(path.string(),
                  "unsupported file type (expected .safetensors, .safetensors.index.json, .npy, "
                  ".npz, .gguf, or a folder)");
    }
  }

  void add_folder(const fs::path& folder) {
    if (fs::is_regular_file(folder / kIndexName)) {
      add_index(folder / kIndexName);
      return;
    }
    // A Hugging Face folder may hold other files; safetensors win when present.
    std::vector<fs::path> files = files_with_extension(folder, ".safetensors");
    if (files.empty()) {
      files = files_with_extension(folder, ".npy");
      std::vector<fs::path> archives = files_with_extension(folder, ".npz");
      files.insert(files.end(), archives.begin(), archives.end());
    }
    if (files.empty()) {
      // A GGUF file is read when named: a folder may hold several quantisations of one model.
      const std::vector<fs::path> gguf = files_with_extension(folder, ".gguf");
      const std::string hint =
          gguf.empty()
              ? ""
              : "; it holds " + excerpt(gguf.front().filename().string()) +
                    (gguf.size() > 1
                         ? " and " + std::to_string(gguf.size() - 1) + " more .gguf file(s)"
                         : std::string()) +
                    ": name a .gguf file itself";
      throw Error(folder.string(),
                  "no checkpoint files in this folder (expected .safetensors, "
                  "model.safetensors.index.json, .npy or .npz)" +
                      hint);
    }
    for (const fs::path& file : files) add_file(file);
  }

 private:
  const MappedFile& map(const fs::path& path) {
    maps_.push_back(std::make_shared<const MappedFile>(path));
    return *maps_.back();
  }

  // Returns the position of the first tensor it added.
  std::size_t add_safetensors(const fs::path& path) {
    const std::size_t first = tensors_.size();
    SafetensorsFile file = parse_safetensors(map(path).bytes(), path.string());
    for (TensorView& tensor : file.tensors) tensors_.push_back(std::move(tensor));
    return first;
  }

  void add_gguf(const fs::path& path) {
    GgufFile file = parse_gguf(map(path).bytes(), path.string());
    if (const std::optional<GgufSplit> split = gguf_split(file, path.string()))
      add_split_parts(path, *split, file);
    GgufCheckpoint gguf = gguf_checkpoint(std::move(file), path.string());
    for (TensorView& tensor : gguf.tensors) tensors_.push_back(std::move(tensor));
    gguf_config = std::move(gguf.config);
  }

  // llama-gguf-split writes PREFIX-0000k-of-0000N.gguf; the first part, which holds the model's
  // metadata, names the model, and the tensors of the other parts join its own.
  void add_split_parts(const fs::path& first, const GgufSplit& split, GgufFile& file) {
    if (split.index != 0) {
      throw Error(first.string(), "this is part " + std::to_string(split.index + 1) +
                                      " of a GGUF split into " + std::to_string(split.count) +
                                      " files; give the first part (named …-00001-of-…)");
    }
    for (int index = 1; index < split.count; ++index) {
      const fs::path part = gguf_split_part_name(first.string(), index, split.count);
      if (!fs::is_regular_file(part))
        throw Error(part.string(), "missing: part " + std::to_string(index + 1) + " of " +
                                       std::to_string(split.count) + " of " + first.string());
      GgufFile more = parse_gguf(map(part).bytes(), part.string());
      const std::optional<GgufSplit> its = gguf_split(more, part.string());
      if (!its || its->index != index || its->count != split.count)
        throw Error(part.string(), "is not part " + std::to_string(index + 1) + " of " +
                                       std::to_string(split.count) +
                                       " (its split.no/split.count "
                                       "say otherwise)");
      for (TensorView& tensor : more.tensors) file.tensors.push_back(std::move(tensor));
      for (auto& tensor : more.unsupported) file.unsupported.push_back(std::move(tensor));
    }
  }

  void add_npy(const fs::path& path) {
    tensors_.push_back(
        parse_npy(map(path).bytes(), path.string(), path.stem().string(), options_.npy));
  }

  void add_npz(const fs::path& path) {
    for (NpzMember& member : parse_npz(map(path).bytes(), path.string(), options_.npy)) {
      tensors_.push_back(std::move(member.tensor));
    }
  }

  // Every shard the index names is opened once; every tensor it maps must be in its shard.
  void add_index(const fs::path& index_path) {
    const nlohmann::json index = read_json_object(index_path);
    const std::string index_name = index_path.string();
    auto weight_map = index.find("weight_map");
    if (weight_map == index.end() || !weight_map->is_object()) {
      throw Error(index_name, "no \"weight_map\" object mapping tensor names to shard files");
    }
    std::map<std::string, std::set<std::string>> tensors_by_shard;
    for (const auto& [tensor, shard] : weight_map->items()) {
      if (!shard.is_string()) {
        throw Error(index_name, tensor,
                    "weight_map value is not a file name (found " + detail::json_kind(shard) + ")");
      }
      const std::string shard_name = shard.get<std::string>();
      if (!is_inside_folder(shard_name)) {
        throw Error(index_name, tensor,
                    "weight_map names shard \"" + shard_name +
                        "\", which is not a file name inside the index's folder");
      }
      if (!tensors_by_shard.contains(shard_name) &&
          !fs::is_regular_file(index_path.parent_path() / shard_name)) {
        throw Error(index_name,
                    "shard " + shard_name + " (for tensor " + tensor + ") does not exist");
      }
      tensors_by_shard[shard_name].insert(tensor);
    }
    for (const auto& [shard_name, expected] : tensors_by_shard) {
      const fs::path shard_path = index_path.parent_path() / shard_name;
      std::set<std::string> found;
      for (std::size_t i = add_safetensors(shard_path); i < tensors_.size(); ++i) {
        found.insert(tensors_[i].name);
      }
      for (const std::string& tensor : expected) {
        if (!found.contains(tensor)) {
          throw Error(shard_path.string(), tensor,
                      "tensor is mapped to this shard by " + index_name + " but is not in it");
        }
      }
    }
  }

  std::vector<TensorView>& tensors_;
  std::vector<std::shared_ptr<const MappedFile>>& maps_;
  const OpenOptions& options_;
};

// Sorted by name for find(); a name twice is an error naming both places.
void sort_unique_by_name(std::vector<TensorView>& tensors) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].name == tensors[i - 1].name) {
      throw Error(tensors[i].file, tensors[i].name,
                  "tensor name also appears in " + tensors[i - 1].file);
    }
  }
}

// What every reader checks before it makes a view: the bytes are exactly the shape's.
void check_view_size(const TensorView& tensor) {
  const std::optional<std::uint64_t> expected = checked_byte_count(tensor.shape, tensor.dtype);
  if (!expected || *expected != tensor.byte_size())
    throw Error(tensor.file, tensor.name,
                std::to_string(tensor.byte_size()) + " bytes do not hold a " +
                    std::string(dtype_name(tensor.dtype)) + " tensor of shape " +
                    tensor.shape_string());
}

}  // namespace

Checkpoint Checkpoint::from_memory(const std::string& name, std::vector<TensorView> tensors,
                                   std::optional<nlohmann::json> config) {
  for (const TensorView& tensor : tensors) check_view_size(tensor);
  if (config && !config->is_object())
    throw Error("config", "expected a JSON object, found " + detail::json_kind(*config));
  Checkpoint checkpoint;
  checkpoint.path_ = name;
  checkpoint.tensors_ = std::move(tensors);
  sort_unique_by_name(checkpoint.tensors_);
  if (config) {
    checkpoint.config_ = std::move(config);
    checkpoint.config_path_ = "config";
  }
  return checkpoint;
}

Checkpoint Checkpoint::open(const fs::path& path, const OpenOptions& options) {
  Checkpoint checkpoint;
  checkpoint.path_ = path;
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) throw Error(path.string(), "no such file or folder");

  CheckpointLoader loader(checkpoint.tensors_, checkpoint.maps_, options);
  const bool is_folder = fs::is_directory(status);
  if (is_folder) {
    loader.add_folder(path);
  } else {
    loader.add_file(path);
  }

  sort_unique_by_name(checkpoint.tensors_);

  const fs::path config = (is_folder ? path : path.parent_path()) / kConfigName;
  if (loader.gguf_config) {
    checkpoint.config_ = std::move(loader.gguf_config);
    checkpoint.config_path_ = path;
  } else if (fs::is_regular_file(config)) {
    checkpoint.config_ = read_json_object(config);
    checkpoint.config_path_ = config;
  }
  return checkpoint;
}

const TensorView* Checkpoint::find(std::string_view name) const noexcept {
  auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const TensorView& t, std::string_view key) { return t.name < key; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

const TensorView& Checkpoint::at(std::string_view name) const {
  if (const TensorView* tensor = find(name)) return *tensor;
  throw Error(path_.string(), std::string(name), "no such tensor in the checkpoint");
}

void Checkpoint::release(const TensorView& tensor) const noexcept {
  if (tensor.deferred) {
    tensor.deferred->release();
    return;
  }
  for (const auto& map : maps_) {
    std::span<const std::byte> bytes = map->bytes();
    // std::less: a total order even for pointers into different buffers.
    std::less<const std::byte*> before;
    if (!bytes.empty() && !before(tensor.bytes.data(), bytes.data()) &&
        !before(bytes.data() + bytes.size(), tensor.bytes.data() + tensor.bytes.size())) {
      map->release(tensor.bytes);
      return;
    }
  }
}

}  // namespace kvrank

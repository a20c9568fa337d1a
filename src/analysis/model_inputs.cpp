// Command-line model arguments → paths and unique labels (model_inputs.hpp).
#include "kvrank/analysis/model_inputs.hpp"

#include <algorithm>
#include <optional>
#include <set>
#include <system_error>

#include "kvrank/base/error.hpp"

namespace kvrank {
namespace fs = std::filesystem;

namespace {

// The file types of PyTorch's pickle format (torch.save), which kvrank does not read: loading a
// pickle can run code.
bool is_pytorch_pickle(const fs::path& path) {
  const std::string extension = path.extension().string();
  return extension == ".bin" || extension == ".pt" || extension == ".pth" || extension == ".ckpt";
}

bool is_checkpoint_file(const fs::path& path) {
  const std::string extension = path.extension().string();
  return extension == ".safetensors" || extension == ".gguf" || extension == ".npy" ||
         extension == ".npz" || path.filename().string().ends_with(".safetensors.index.json");
}

std::string pickle_advice(const fs::path& file) {
  const std::string name = file.string();
  return "a PyTorch pickle (torch.save), which kvrank does not read (loading one can run code): "
         "convert it to safetensors, e.g. python3 -c \"import torch; from safetensors.torch "
         "import save_file; save_file(torch.load('" +
         name + "', weights_only=True), '" +
         fs::path(name).replace_extension(".safetensors").string() +
         "')\" (a Lightning .ckpt keeps the weights under \"state_dict\"; for a Hugging Face "
         "folder, model.save_pretrained(DIR, safe_serialization=True) writes safetensors)";
}

/// What a folder kvrank cannot read holds instead: PyTorch pickles, or model folders.
struct FolderContents {
  std::optional<fs::path> pickle;  ///< the first PyTorch pickle, when there is no checkpoint file
  bool model_folders = false;      ///< only subfolders that hold checkpoints or a config.json
};

FolderContents folder_contents(const fs::path& folder) {
  FolderContents contents;
  std::error_code error;
  bool checkpoint_files = false;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    const fs::path& entry = it->path();
    if (it->is_regular_file(ignored)) {
      checkpoint_files = checkpoint_files || is_checkpoint_file(entry);
      if (is_pytorch_pickle(entry) && (!contents.pickle || entry < *contents.pickle))
        contents.pickle = entry;
    } else if (it->is_directory(ignored)) {
      contents.model_folders = contents.model_folders ||
                               fs::is_regular_file(entry / "config.json", ignored) ||
                               fs::is_regular_file(entry / "model.safetensors", ignored);
    }
  }
  if (checkpoint_files) return {};
  return contents;
}

/// Refuses, with what to do instead, an input kvrank can tell it will not read.
void check_readable(const fs::path& path, const std::string& argument) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) {
    if (is_pytorch_pickle(path)) throw Error(argument, pickle_advice(path));
    return;
  }
  if (!fs::is_directory(path, error)) return;
  const FolderContents contents = folder_contents(path);
  if (contents.pickle)
    throw Error(argument, "holds no safetensors, only " + contents.pickle->filename().string() +
                              ", " + pickle_advice(*contents.pickle));
  if (contents.model_folders) {
    const std::string pattern = (path / "*" / "").string();
    throw Error(argument, "a folder of model folders: give each model folder, e.g. " + pattern);
  }
}

/// Edit distance, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// The existing entry of `path`'s folder whose name is nearest to its name (a typo's fix).
std::optional<fs::path> nearest_existing(const fs::path& path) {
  fs::path clean = path;
  if (!clean.has_filename()) clean = clean.parent_path();
  const fs::path folder = clean.parent_path();
  const std::string name = clean.filename().string();
  std::error_code error;
  std::optional<fs::path> best;
  std::size_t best_distance = std::max<std::size_t>(2, name.size() / 3) + 1;  // farther: no guess
  for (fs::directory_iterator it(folder.empty() ? "." : folder, error), end; !error && it != end;
       it.increment(error)) {
    const std::string candidate = it->path().filename().string();
    const std::size_t distance = edit_distance(name, candidate);
    if (distance < best_distance ||
        (distance == best_distance && best && candidate < best->string())) {
      best_distance = distance;
      best = folder / candidate;
    }
  }
  return best;
}

/// A path that is meant as one: it names a folder (./, ../, /, ~), a checkpoint file or a
/// PyTorch pickle, or sits in a folder that exists — never a Hugging Face repo id.
bool looks_local(const std::string& argument) {
  const fs::path path = argument;
  std::error_code error;
  return argument.starts_with("/") || argument.starts_with("./") || argument.starts_with("../") ||
         argument.starts_with("~") || is_checkpoint_file(path) || is_pytorch_pickle(path) ||
         (path.has_parent_path() && fs::is_directory(path.parent_path(), error));
}

[[noreturn]] void no_such_path(const std::string& argument) {
  std::string detail = "no such file or folder";
  if (const auto nearest = nearest_existing(argument))
    detail += " (nearest existing name: " + nearest->string() + ")";
  throw Error(argument, detail);
}

}  // namespace

std::string default_label(const fs::path& path) {
  fs::path clean = path;
  if (!clean.has_filename()) clean = clean.parent_path();  // "ckpts/mha/"
  if (auto name = hub_model_name_of(clean)) return *name;
  std::error_code error;
  if (fs::is_directory(clean, error)) return clean.filename().string();
  // A file of a Hugging Face folder ("ckpts/run-7/model.safetensors") is named after the folder:
  // its stem is the same "model" in every such folder.
  const fs::path folder = clean.parent_path();
  if (!folder.empty() && fs::is_regular_file(folder / "config.json", error))
    return fs::absolute(folder, error).lexically_normal().filename().string();
  return clean.stem().string();
}

ModelInput resolve_model_argument(const std::string& argument, const EnvLookup& env) {
  std::error_code error;
  const fs::path path = argument;
  if (fs::exists(path, error)) {
    check_readable(path, argument);
    return {path, default_label(path), argument, {}, {}};
  }
  const std::optional<HubModelId> id = parse_hub_model_id(argument);
  if (!id || looks_local(argument)) no_such_path(argument);
  std::string label = id->name;
  if (!id->revision.empty()) label += "@" + id->revision;
  const HubCacheDir cache = hub_cache_dir(env);
  try {
    const fs::path snapshot = resolve_hub_snapshot(*id, cache);
    return {snapshot, label, argument, id->repo(), snapshot.filename().string()};
  } catch (const Error& missing) {  // unless the cache has the model, a mistyped path: say both
    if (hub_model_cached(*id, cache)) throw;
    throw Error(missing.file(), missing.tensor(),
                "no such file or folder, and " + missing.detail());
  }
}

std::vector<std::string> unique_labels(const std::vector<LabelChoice>& choices,
                                       const std::function<void(const std::string&)>& note) {
  std::set<std::string> taken;
  for (const LabelChoice& choice : choices) {
    if (choice.given && !taken.insert(choice.label).second)
      throw Error("", "--label \"" + choice.label +
                          "\" is given twice (models are told apart by their labels)");
  }
  std::vector<std::string> labels;
  for (const LabelChoice& choice : choices) {
    if (choice.given || taken.insert(choice.label).second) {
      labels.push_back(choice.label);
      continue;
    }
    std::string unique;
    for (int number = 2; unique.empty() || !taken.insert(unique).second; ++number)
      unique = choice.label + "-" + std::to_string(number);
    if (note)
      note(choice.path + " is labelled \"" + unique + "\": \"" + choice.label +
           "\" is taken by an earlier model (choose with --label)");
    labels.push_back(unique);
  }
  return labels;
}

}  // namespace kvrank

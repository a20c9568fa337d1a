// Command-line model arguments → paths and unique labels (model_inputs.hpp).
#include "kvrank/analysis/model_inputs.hpp"

#include <set>
#include <system_error>

#include "kvrank/base/error.hpp"

namespace kvrank {
namespace fs = std::filesystem;

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
  if (fs::exists(path, error)) return {path, default_label(path)};
  const std::optional<HubModelId> id = parse_hub_model_id(argument);
  if (!id) return {path, default_label(path)};
  std::string label = id->name;
  if (!id->revision.empty()) label += "@" + id->revision;
  try {
    return {resolve_hub_snapshot(*id, hub_cache_dir(env)), label};
  } catch (const Error& missing) {  // it may as well be a mistyped path: say both
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

std::vector<ModelInput> resolve_models(const std::vector<std::string>& arguments,
                                       const std::vector<std::string>& labels,
                                       const std::function<void(const std::string&)>& note) {
  if (labels.size() > arguments.size())
    throw Error("", "--label given " + std::to_string(labels.size()) + " times for " +
                        std::to_string(arguments.size()) + " input(s)");
  std::vector<ModelInput> inputs;
  std::vector<LabelChoice> choices;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    inputs.push_back(resolve_model_argument(arguments[i]));
    const bool given = i < labels.size();
    choices.push_back({given ? labels[i] : inputs.back().label, given, arguments[i]});
  }
  const std::vector<std::string> unique = unique_labels(choices, note);
  for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i].label = unique[i];
  return inputs;
}

}  // namespace kvrank

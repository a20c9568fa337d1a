#include "kvrank/report/training_run.hpp"

#include <filesystem>
#include <vector>

#include "kvrank/base/text.hpp"

namespace kvrank {
namespace {

// Longest prefix first: "global_step_" must be tried before "global_step".
constexpr std::string_view kStepPrefixes[] = {"checkpoint-", "step-", "global_step_",
                                              "global_step"};

/// The components of `path` without empty ones (a trailing '/') or ".".
std::vector<std::string> components(std::string_view path) {
  std::vector<std::string> parts;
  for (const auto& part : std::filesystem::path(path)) {
    const std::string name = part.string();
    if (!name.empty() && name != "." && name != "/") parts.push_back(name);
  }
  return parts;
}

/// Index of the component naming a step — the last one (a checkpoint folder) or the one before
/// (the folder of a checkpoint file) — or parts.size(). Folders further up are not asked: a
/// "step-5" three levels above is not this checkpoint's step.
std::size_t step_component(const std::vector<std::string>& parts) {
  for (std::size_t back = 1; back <= 2 && back <= parts.size(); ++back) {
    if (step_from_folder_name(parts[parts.size() - back])) return parts.size() - back;
  }
  return parts.size();
}

}  // namespace

std::optional<std::int64_t> step_from_folder_name(std::string_view name) {
  for (std::string_view prefix : kStepPrefixes) {
    if (name.substr(0, prefix.size()) != prefix) continue;
    // Decimal as --step reads it (text.hpp): checkpoint-000500 is step 500.
    return decimal_value(name.substr(prefix.size()));
  }
  return std::nullopt;
}

std::optional<std::int64_t> step_from_path(std::string_view path) {
  const std::vector<std::string> parts = components(path);
  const std::size_t at = step_component(parts);
  if (at == parts.size()) return std::nullopt;
  return step_from_folder_name(parts[at]);
}

std::string training_run(const ModelReport& model) {
  if (model.run) return *model.run;
  const std::vector<std::string> parts = components(model.path);
  std::size_t checkpoint = step_component(parts);
  if (checkpoint == parts.size()) checkpoint = parts.empty() ? 0 : parts.size() - 1;
  return checkpoint == 0 ? "." : parts[checkpoint - 1];
}

}  // namespace kvrank

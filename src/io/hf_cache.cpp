// Hugging Face hub cache lookup (hf_cache.hpp): repo ids, the cache folder, snapshots.
#include "kvrank/io/hf_cache.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"

namespace kvrank {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kMaxRepoIdLength = 96;  // the Hub's limit on ORG/NAME
constexpr std::string_view kModelsPrefix = "models--";

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

/// One half of ORG/NAME as the Hub allows it. "--" would be ambiguous in the cache folder name.
bool is_repo_part(std::string_view part) {
  return !part.empty() && std::all_of(part.begin(), part.end(), is_name_char) &&
         part.front() != '-' && part.front() != '.' && part.find("--") == std::string_view::npos &&
         part.find("..") == std::string_view::npos;
}

/// A branch, tag ("v1.0", "refs/pr/1") or commit hash; never a path that leaves its folder.
bool is_revision(std::string_view revision) {
  if (revision.empty() || revision.front() == '/' || revision.back() == '/') return false;
  if (revision.find("..") != std::string_view::npos) return false;
  return std::all_of(revision.begin(), revision.end(),
                     [](char c) { return is_name_char(c) || c == '/'; });
}

bool is_commit_hash(std::string_view text) {
  return text.size() == 40 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool is_folder(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

std::string trim(std::string text) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; };
  while (!text.empty() && space(text.back())) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && space(text[start])) ++start;
  return text.substr(start);
}

/// The commit hash a refs/ file holds, or nullopt when there is no such file. The file is read
/// with a cap, like every other text input (a 64 MB one-line ref took 330 MB and gave a 64 MB error
/// line), and anything but a regular file holding one commit hash is an error saying so.
std::optional<std::string> read_ref(const fs::path& ref_file) {
  std::error_code error;
  const fs::file_status status = fs::status(ref_file, error);
  if (status.type() == fs::file_type::not_found) return std::nullopt;
  const std::string file = ref_file.string();
  if (error || status.type() != fs::file_type::regular)
    throw Error(file, "not a regular file (a ref holds one 40-digit commit hash)");
  std::ifstream in(ref_file, std::ios::binary);
  std::string text(kMaxHubRefBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad() || (!in && !in.eof())) throw Error(file, "cannot be read");
  text.resize(static_cast<std::size_t>(in.gcount()));
  try {
    return parse_hub_ref(text, file);
  } catch (const Error& bad) {  // the file is there: say that its content is what is wrong
    throw Error(file, "this ref is not a commit hash: " + bad.detail());
  }
}

/// The snapshot folder names, sorted (for the message when the wanted one is missing).
std::string snapshot_list(const fs::path& snapshots) {
  std::vector<std::string> names;
  std::error_code error;
  for (fs::directory_iterator it(snapshots, error), end; !error && it != end; it.increment(error))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  if (names.empty()) return "no snapshots at all";
  std::string text = "snapshots present: ";
  for (std::size_t i = 0; i < names.size(); ++i) text += (i ? ", " : "") + names[i];
  return text;
}

std::string never_downloads(const HubModelId& id) {
  return "kvrank reads the local cache only and never downloads: fetch it first (hf download " +
         id.repo() + " --include \"*.safetensors\" \"*.json\") or give a path";
}

}  // namespace

std::optional<HubModelId> parse_hub_model_id(std::string_view text) {
  std::string_view repo = text;
  std::string_view revision;
  if (const auto at = text.find('@'); at != std::string_view::npos) {
    repo = text.substr(0, at);
    revision = text.substr(at + 1);
    if (!is_revision(revision)) return std::nullopt;
  }
  const auto slash = repo.find('/');
  if (slash == std::string_view::npos || repo.size() > kMaxRepoIdLength) return std::nullopt;
  const std::string_view org = repo.substr(0, slash);
  const std::string_view name = repo.substr(slash + 1);
  if (!is_repo_part(org) || !is_repo_part(name)) return std::nullopt;
  return HubModelId{std::string(org), std::string(name), std::string(revision)};
}

std::string parse_hub_ref(std::string_view text, const std::string& file) {
  if (text.size() > kMaxHubRefBytes)
    throw Error(file, "longer than " + std::to_string(kMaxHubRefBytes) +
                          " bytes (a ref holds one 40-digit commit hash)");
  const std::string commit = trim(std::string(text));
  if (!is_commit_hash(commit))
    throw Error(file, "expected a 40-digit commit hash, found \"" + excerpt(commit) + "\"");
  return commit;
}

EnvLookup process_environment() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

HubCacheDir hub_cache_dir(const EnvLookup& env) {
  if (auto cache = env("HF_HUB_CACHE")) return {*cache, "$HF_HUB_CACHE"};
  if (auto cache = env("HUGGINGFACE_HUB_CACHE")) return {*cache, "$HUGGINGFACE_HUB_CACHE"};
  if (auto home = env("HF_HOME")) return {fs::path(*home) / "hub", "$HF_HOME/hub"};
  if (auto xdg = env("XDG_CACHE_HOME"))
    return {fs::path(*xdg) / "huggingface" / "hub", "$XDG_CACHE_HOME/huggingface/hub"};
  const fs::path home = env("HOME").value_or("~");
  return {home / ".cache" / "huggingface" / "hub", "~/.cache/huggingface/hub"};
}

namespace {

fs::path model_folder(const HubModelId& id, const HubCacheDir& cache) {
  return cache.path / (std::string(kModelsPrefix) + id.org + "--" + id.name);
}

}  // namespace

bool hub_model_cached(const HubModelId& id, const HubCacheDir& cache) {
  return is_folder(model_folder(id, cache));
}

fs::path resolve_hub_snapshot(const HubModelId& id, const HubCacheDir& cache) {
  const fs::path model = model_folder(id, cache);
  const std::string where = " (the Hugging Face cache, from " + cache.source + ")";
  if (!is_folder(model))
    throw Error(id.repo(), "not in the local Hugging Face cache: no folder " + model.string() +
                               where + "; " + never_downloads(id));
  const std::string revision = id.revision.empty() ? "main" : id.revision;
  const fs::path ref_file = model / "refs" / revision;
  const fs::path snapshots = model / "snapshots";
  std::string commit = revision;
  if (auto ref = read_ref(ref_file)) {
    commit = *ref;
  } else if (!is_commit_hash(revision)) {
    throw Error(id.repo(), "the cache has no revision \"" + revision + "\": no file " +
                               ref_file.string() + " and no folder " +
                               (snapshots / revision).string() + "; " + snapshot_list(snapshots) +
                               " (pick one with " + id.repo() + "@REV)");
  }
  const fs::path snapshot = snapshots / commit;
  if (!is_folder(snapshot))
    throw Error(id.repo(), "no snapshot folder " + snapshot.string() +
                               (commit == revision ? "" : " (" + ref_file.string() + " names it)") +
                               "; " + snapshot_list(snapshots) + "; " + never_downloads(id));
  return snapshot;
}

std::optional<std::string> hub_model_name_of(const fs::path& path) {
  std::error_code error;
  const fs::path absolute = fs::absolute(path, error).lexically_normal();
  if (error) return std::nullopt;
  std::vector<std::string> parts;
  for (const fs::path& part : absolute)
    if (!part.empty()) parts.push_back(part.string());
  if (!parts.empty() && parts.back().empty()) parts.pop_back();
  // …/models--ORG--NAME/snapshots/<rev> or …/snapshots/<rev>/<file>
  for (std::size_t tail = 2; tail <= 3; ++tail) {
    if (parts.size() < tail + 1) continue;
    const std::string& models = parts[parts.size() - tail - 1];
    if (parts[parts.size() - tail] != "snapshots" || !models.starts_with(kModelsPrefix)) continue;
    const auto separator = models.find("--", kModelsPrefix.size());
    if (separator == std::string::npos) continue;
    const std::string name = models.substr(separator + 2);
    if (!name.empty()) return name;
  }
  return std::nullopt;
}

}  // namespace kvrank

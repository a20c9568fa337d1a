// Hugging Face repo ids ("Qwen/Qwen3-0.6B") resolved in the local hub cache — never downloaded.
//
// huggingface_hub keeps one cache folder, chosen from the environment in this order:
//   $HF_HUB_CACHE (or the older $HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub,
//   else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
// Inside it a model repo ORG/NAME is
//   models--ORG--NAME/refs/main          the commit hash the branch `main` pointed at when fetched
//   models--ORG--NAME/snapshots/<hash>/  the files of that commit: symlinks into ../../blobs/
// so `ORG/NAME` resolves to snapshots/<refs/main>/, `ORG/NAME@REV` to snapshots/<refs/REV> when
// REV is a branch or tag that was fetched, else to snapshots/REV (a commit hash).
//
//   auto id = parse_hub_model_id("Qwen/Qwen3-0.6B");
//   std::filesystem::path snapshot = resolve_hub_snapshot(*id,
//   hub_cache_dir(process_environment()));
//   // ~/.cache/huggingface/hub/models--Qwen--Qwen3-0.6B/snapshots/<hash>
// model_inputs.hpp turns a command-line argument into a path and a label with this.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kvrank {

/// A repo id ORG/NAME, optionally pinned to a revision (branch, tag or commit hash).
struct HubModelId {
  std::string org;
  std::string name;
  std::string revision;  ///< empty: "main"

  std::string repo() const { return org + "/" + name; }
};

/// Parses "ORG/NAME" or "ORG/NAME@REV" (ORG and NAME: letters, digits, '-', '_', '.'; not starting
/// with '-' or '.', no "--" or ".."; at most 96 characters together, as on the Hub). nullopt when
/// `text` does not look like a repo id.
std::optional<HubModelId> parse_hub_model_id(std::string_view text);

/// An environment variable's value; nullopt when unset or empty. Tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
/// The process environment (getenv).
EnvLookup process_environment();

/// The hub cache folder, and which rule chose it ("$HF_HUB_CACHE", "$HF_HOME/hub", ...).
struct HubCacheDir {
  std::filesystem::path path;
  std::string source;
};
HubCacheDir hub_cache_dir(const EnvLookup& env);

/// The snapshot folder of `id` in `cache`. Throws kvrank::Error (naming the repo id and every path
/// it looked at, and that kvrank never downloads) when the model, the ref or the snapshot is not
/// there.
std::filesystem::path resolve_hub_snapshot(const HubModelId& id, const HubCacheDir& cache);
/// Whether the cache has a folder for the model (models--ORG--NAME), whatever its revisions: an
/// argument that names it means the Hub id, and resolve_hub_snapshot's error alone says what is
/// wrong (a refs/main that is not a hash is no missing file).
bool hub_model_cached(const HubModelId& id, const HubCacheDir& cache);

/// Longest refs/<rev> file read: a ref is a 40-digit commit hash and a newline.
inline constexpr std::size_t kMaxHubRefBytes = 1024;

/// The commit hash held by the text of a refs/<rev> file (surrounding whitespace ignored). Throws
/// kvrank::Error naming `file` when the text is longer than kMaxHubRefBytes or is not one 40-digit
/// hexadecimal hash (quoting an excerpt).
std::string parse_hub_ref(std::string_view text, const std::string& file);

/// When `path` lies in a hub cache snapshot (…/models--ORG--NAME/snapshots/<rev>[/file]): NAME.
std::optional<std::string> hub_model_name_of(const std::filesystem::path& path);

}  // namespace kvrank

// Hugging Face cache lookup on fake cache trees built here: repo ids, the cache folder chosen from
// the environment, refs → snapshots, the errors, and reading a snapshot whose files are symlinks
// into blobs/ (as huggingface_hub stores them).
#include "kvrank/io/hf_cache.hpp"

#include <map>
#include <string>

#include "kvrank/io/checkpoint.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

namespace fs = std::filesystem;
using test::error_message;
using test::TempDir;

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
constexpr const char* kOtherCommit = "fedcba9876543210fedcba9876543210fedcba98";

EnvLookup fake_env(std::map<std::string, std::string> values) {
  return [values](const char* name) -> std::optional<std::string> {
    auto it = values.find(name);
    if (it == values.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

/// hub/models--ORG--NAME with refs/main → kCommit and an (empty) snapshot folder per commit.
fs::path make_cached_model(const fs::path& hub, const std::string& folder,
                           std::initializer_list<const char*> snapshots, const char* main_ref) {
  const fs::path model = hub / folder;
  fs::create_directories(model / "blobs");
  for (const char* commit : snapshots) fs::create_directories(model / "snapshots" / commit);
  if (main_ref) {
    fs::create_directories(model / "refs");
    test::write_file(model / "refs" / "main", std::string(main_ref));  // no newline, as the Hub
  }
  return model;
}

}  // namespace

TEST_CASE("parse_hub_model_id: ORG/NAME[@REV], nothing that is not one", "[hf_cache]") {
  auto id = parse_hub_model_id("Qwen/Qwen3-0.6B");
  REQUIRE(id);
  CHECK(id->org == "Qwen");
  CHECK(id->name == "Qwen3-0.6B");
  CHECK(id->revision.empty());
  CHECK(id->repo() == "Qwen/Qwen3-0.6B");

  id = parse_hub_model_id("allenai/OLMo-2-1124-7B@stage1-step1000");
  REQUIRE(id);
  CHECK(id->name == "OLMo-2-1124-7B");
  CHECK(id->revision == "stage1-step1000");
  CHECK(parse_hub_model_id("org/name@refs/pr/1")->revision == "refs/pr/1");

  for (const char* text :
       {"model.safetensors", "ckpts/mha/", "/abs/org/name", "a/b/c", "org/", "/name", "./model",
        "../x", "org/na me", "org/-name", "org/.hidden", "org/a--b", "org/a..b", "org/name@",
        "org/name@../../etc", "org/name@/x", "ckpts\\mha"}) {
    INFO(text);
    CHECK_FALSE(parse_hub_model_id(text));
  }
  CHECK_FALSE(parse_hub_model_id("o/" + std::string(95, 'n')));  // over the Hub's 96 characters
  CHECK(parse_hub_model_id("o/" + std::string(94, 'n')));
}

TEST_CASE("hub_cache_dir follows huggingface_hub's order", "[hf_cache]") {
  CHECK(hub_cache_dir(fake_env({{"HF_HUB_CACHE", "/c"}, {"HF_HOME", "/h"}})).path == "/c");
  CHECK(hub_cache_dir(fake_env({{"HF_HUB_CACHE", "/c"}})).source == "$HF_HUB_CACHE");
  CHECK(hub_cache_dir(fake_env({{"HUGGINGFACE_HUB_CACHE", "/old"}, {"HF_HOME", "/h"}})).path ==
        "/old");
  const HubCacheDir home = hub_cache_dir(fake_env({{"HF_HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}}));
  CHECK(home.path == "/h/hub");
  CHECK(home.source == "$HF_HOME/hub");
  CHECK(hub_cache_dir(fake_env({{"XDG_CACHE_HOME", "/x"}, {"HOME", "/u"}})).path ==
        "/x/huggingface/hub");
  const HubCacheDir fallback = hub_cache_dir(fake_env({{"HOME", "/u"}, {"HF_HUB_CACHE", ""}}));
  CHECK(fallback.path == "/u/.cache/huggingface/hub");
  CHECK(fallback.source == "~/.cache/huggingface/hub");
}

TEST_CASE("resolve_hub_snapshot: refs/main, a branch, a commit hash", "[hf_cache]") {
  TempDir dir;
  const fs::path hub = dir / "hub";
  const fs::path model =
      make_cached_model(hub, "models--Qwen--Qwen3-0.6B", {kCommit, kOtherCommit}, kCommit);
  test::write_file(model / "refs" / "dev", std::string(kOtherCommit) + "\n");
  const HubCacheDir cache{hub, "$HF_HUB_CACHE"};

  CHECK(resolve_hub_snapshot(*parse_hub_model_id("Qwen/Qwen3-0.6B"), cache) ==
        model / "snapshots" / kCommit);
  CHECK(resolve_hub_snapshot(*parse_hub_model_id("Qwen/Qwen3-0.6B@dev"), cache) ==
        model / "snapshots" / kOtherCommit);
  CHECK(resolve_hub_snapshot(*parse_hub_model_id(std::string("Qwen/Qwen3-0.6B@") + kOtherCommit),
                             cache) == model / "snapshots" / kOtherCommit);
}

TEST_CASE("resolve_hub_snapshot errors name the repo, every path tried and that nothing is fetched",
          "[hf_cache]") {
  TempDir dir;
  const fs::path hub = dir / "hub";
  const HubCacheDir cache{hub, "$HF_HOME/hub"};
  const auto resolve = [&](const std::string& text) {
    return error_message([&] { resolve_hub_snapshot(*parse_hub_model_id(text), cache); });
  };

  const fs::path absent = hub / "models--Qwen--Qwen3-8B";
  CHECK(resolve("Qwen/Qwen3-8B") ==
        "Qwen/Qwen3-8B: not in the local Hugging Face cache: no folder " + absent.string() +
            " (the Hugging Face cache, from $HF_HOME/hub); kvrank reads the local cache only and "
            "never downloads: fetch it first (hf download Qwen/Qwen3-8B --include "
            "\"*.safetensors\" \"*.json\") or give a path");

  const fs::path pinned = make_cached_model(hub, "models--org--pinned", {kCommit}, nullptr);
  CHECK(resolve("org/pinned") == "org/pinned: the cache has no revision \"main\": no file " +
                                     (pinned / "refs" / "main").string() + " and no folder " +
                                     (pinned / "snapshots" / "main").string() +
                                     "; snapshots present: " + kCommit +
                                     " (pick one with org/pinned@REV)");

  const fs::path broken = make_cached_model(hub, "models--org--broken", {}, kOtherCommit);
  CHECK(resolve("org/broken") == "org/broken: no snapshot folder " +
                                     (broken / "snapshots" / kOtherCommit).string() + " (" +
                                     (broken / "refs" / "main").string() +
                                     " names it); no snapshots at all; kvrank reads the local "
                                     "cache only and never downloads: fetch it first "
                                     "(hf download org/broken --include \"*.safetensors\" "
                                     "\"*.json\") or give a path");

  const fs::path odd = make_cached_model(hub, "models--org--odd", {kCommit}, "../../../etc");
  CHECK(resolve("org/odd") == (odd / "refs" / "main").string() +
                                  ": this ref is not a commit hash: expected a 40-digit commit "
                                  "hash, found \"../../../etc\"");
}

TEST_CASE("resolve_hub_snapshot reads a ref with a size cap and says what is wrong with it",
          "[hf_cache]") {
  TempDir dir;
  const HubCacheDir cache{dir / "hub", "$HF_HOME/hub"};
  const auto resolve = [&](const char* repo) {
    return error_message([&] { resolve_hub_snapshot(*parse_hub_model_id(repo), cache); });
  };
  // A 64 MB one-line ref was read whole (330 MB of memory) and quoted whole in the error.
  const fs::path huge = make_cached_model(cache.path, "models--org--huge", {kCommit}, "x");
  test::write_file(huge / "refs" / "main", std::string(std::size_t{8} << 20, 'a'));
  CHECK(resolve("org/huge") == (huge / "refs" / "main").string() +
                                   ": this ref is not a commit hash: longer than 1024 bytes (a ref "
                                   "holds one 40-digit commit "
                                   "hash)");
  const fs::path garbage = make_cached_model(cache.path, "models--org--garbage", {kCommit}, "x");
  test::write_file(garbage / "refs" / "main", std::string(100, 'z') + "\n\x01\x02");
  CHECK(resolve("org/garbage") ==
        (garbage / "refs" / "main").string() +
            ": this ref is not a commit hash: expected a 40-digit commit hash, found \"" +
            std::string(60, 'z') + "... (103 bytes)\"");
  // A folder (or FIFO) where the ref should be: not "no such file", and never blocks.
  const fs::path folder = make_cached_model(cache.path, "models--org--folder", {kCommit}, nullptr);
  fs::create_directories(folder / "refs" / "main");
  CHECK(resolve("org/folder") == (folder / "refs" / "main").string() +
                                     ": not a regular file (a ref holds one 40-digit commit hash)");
}

TEST_CASE("hub_model_name_of: NAME for a snapshot folder or a file in it", "[hf_cache]") {
  const std::string snapshot = std::string("/c/hub/models--Qwen--Qwen3-0.6B/snapshots/") + kCommit;
  CHECK(hub_model_name_of(snapshot) == "Qwen3-0.6B");
  CHECK(hub_model_name_of(snapshot + "/") == "Qwen3-0.6B");
  CHECK(hub_model_name_of(snapshot + "/model.safetensors") == "Qwen3-0.6B");
  CHECK_FALSE(hub_model_name_of("/c/hub/models--Qwen--Qwen3-0.6B"));
  CHECK_FALSE(hub_model_name_of("/c/hub/models--Qwen--Qwen3-0.6B/snapshots"));
  CHECK_FALSE(hub_model_name_of("/ckpts/snapshots/run1/model.safetensors"));
  CHECK_FALSE(hub_model_name_of("/ckpts/mha/model.safetensors"));
}

TEST_CASE("a snapshot whose files are symlinks into blobs/ opens like a folder", "[hf_cache]") {
  TempDir dir;
  const fs::path written = dir / "written";
  const auto result = test::run_test_writer(
      "write_family_checkpoints.py",
      "qwen3 " + written.string() + " " + (dir / "ref").string() + " --layers 2 --heads 4");
  REQUIRE(result.exit_code == 0);
  const fs::path model = make_cached_model(dir / "hub", "models--Qwen--tiny", {kCommit}, kCommit);
  const fs::path snapshot = model / "snapshots" / kCommit;
  for (const char* file : {"config.json", "model.safetensors"}) {
    const std::string blob = std::string("blob-of-") + file;  // the Hub names blobs by hash
    fs::rename(written / file, model / "blobs" / blob);
    fs::create_symlink(fs::path("../../blobs") / blob, snapshot / file);
  }
  const fs::path resolved =
      resolve_hub_snapshot(*parse_hub_model_id("Qwen/tiny"), {dir / "hub", "test"});
  const Checkpoint checkpoint = Checkpoint::open(resolved);
  REQUIRE(checkpoint.config());
  CHECK(checkpoint.config()->at("model_type") == "qwen3");
  REQUIRE(checkpoint.find("model.layers.1.self_attn.q_norm.weight"));
  CHECK(to_f32(checkpoint.at("model.layers.1.self_attn.q_proj.weight")).size() == 4 * 8 * 32);
}

}  // namespace kvrank

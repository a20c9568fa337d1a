// Model arguments → paths and labels: default labels (folder, HF folder file, cache snapshot),
// repo ids resolved in a fake hub cache, and labels made unique.
#include "kvrank/analysis/model_inputs.hpp"

#include <map>
#include <string>
#include <vector>

#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

namespace fs = std::filesystem;
using test::error_message;
using test::TempDir;

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

EnvLookup cache_env(const fs::path& hub) {
  return [hub](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "HF_HUB_CACHE") return hub.string();
    return std::nullopt;
  };
}

std::vector<std::string> labels_of(const std::vector<LabelChoice>& choices,
                                   std::vector<std::string>* notes = nullptr) {
  return unique_labels(choices, [&](const std::string& note) {
    if (notes) notes->push_back(note);
  });
}

}  // namespace

TEST_CASE("default_label: folder name, file stem, or the HF folder a file is in", "[labels]") {
  TempDir dir;
  fs::create_directories(dir / "mha-run");
  CHECK(default_label(dir / "mha-run") == "mha-run");
  CHECK(default_label((dir / "mha-run").string() + "/") == "mha-run");
  CHECK(default_label("ckpts/lrkv-r16.safetensors") == "lrkv-r16");
  CHECK(default_label("k_proj.npy") == "k_proj");

  // A file of a Hugging Face folder: config.json beside it → the folder's name, not "model".
  fs::create_directories(dir / "qwen3-step100");
  test::write_file(dir / "qwen3-step100" / "config.json", std::string("{}"));
  CHECK(default_label(dir / "qwen3-step100" / "model.safetensors") == "qwen3-step100");
  CHECK(default_label(dir / "mha-run" / "model.safetensors") == "model");  // no config.json

  // A hub cache snapshot (folder or file): the repo's NAME, not the commit hash.
  const fs::path snapshot = dir / "hub" / "models--Qwen--Qwen3-0.6B" / "snapshots" / kCommit;
  fs::create_directories(snapshot);
  test::write_file(snapshot / "config.json", std::string("{}"));
  CHECK(default_label(snapshot) == "Qwen3-0.6B");
  CHECK(default_label(snapshot / "model.safetensors") == "Qwen3-0.6B");
}

TEST_CASE("resolve_model_argument: existing paths first, then repo ids in the cache", "[labels]") {
  TempDir dir;
  const fs::path hub = dir / "hub";
  const fs::path model = hub / "models--Qwen--Qwen3-0.6B";
  fs::create_directories(model / "snapshots" / kCommit);
  fs::create_directories(model / "refs");
  test::write_file(model / "refs" / "main", std::string(kCommit) + "\n");

  ModelInput input = resolve_model_argument("Qwen/Qwen3-0.6B", cache_env(hub));
  CHECK(input.path == model / "snapshots" / kCommit);
  CHECK(input.label == "Qwen3-0.6B");
  input = resolve_model_argument(std::string("Qwen/Qwen3-0.6B@") + kCommit, cache_env(hub));
  CHECK(input.path == model / "snapshots" / kCommit);
  CHECK(input.label == std::string("Qwen3-0.6B@") + kCommit);

  // A folder that exists under the same name wins over the cache.
  const fs::path local = dir / "Qwen" / "Qwen3-0.6B";
  fs::create_directories(local);
  input = resolve_model_argument(local.string(), cache_env(hub));
  CHECK(input.path == local);
  CHECK(input.label == "Qwen3-0.6B");

  // A missing path that looks like one (a checkpoint extension) is named as missing, with no
  // hub hint even though it parses as ORG/NAME.
  CHECK(error_message([&] { resolve_model_argument("no/such.safetensors", cache_env(hub)); }) ==
        "no/such.safetensors: no such file or folder");
  CHECK(input.argument == local.string());

  CHECK(error_message([&] { resolve_model_argument("Qwen/Qwen3-8B", cache_env(hub)); })
            .starts_with("Qwen/Qwen3-8B: no such file or folder, and not in the local Hugging "
                         "Face cache: no folder " +
                         (hub / "models--Qwen--Qwen3-8B").string()));

  // The cache has the model, but its refs/main is no hash: said so, not "no such file or folder".
  test::write_file(model / "refs" / "main", "not-a-hash\n");
  CHECK(error_message([&] { resolve_model_argument("Qwen/Qwen3-0.6B", cache_env(hub)); }) ==
        (model / "refs" / "main").string() +
            ": this ref is not a commit hash: expected a 40-digit commit hash, found "
            "\"not-a-hash\"");
}

TEST_CASE("unique_labels: defaults get -2, -3 with a note, given labels are kept", "[labels]") {
  std::vector<std::string> notes;
  CHECK(labels_of({{"model", false, "a/model.safetensors"},
                   {"model", false, "b/model.safetensors"},
                   {"model", false, "c/model.safetensors"},
                   {"other", false, "d"}},
                  &notes) == std::vector<std::string>{"model", "model-2", "model-3", "other"});
  REQUIRE(notes.size() == 2);
  CHECK(notes[0] ==
        "b/model.safetensors is labelled \"model-2\": \"model\" is taken by an earlier model "
        "(choose with --label)");

  // A given label is reserved before the defaults, even when it comes later; "-2" may be taken.
  notes.clear();
  CHECK(labels_of({{"mha", false, "x/mha"}, {"mha-2", true, "y"}, {"mha", true, "z"}}, &notes) ==
        std::vector<std::string>{"mha-3", "mha-2", "mha"});
  CHECK(notes.size() == 1);

  CHECK(labels_of({{"a", true, "p"}, {"b", false, "q"}}) == std::vector<std::string>{"a", "b"});
  CHECK(error_message([] {
          labels_of({{"run", true, "p"}, {"run", true, "q"}});
        }) == "--label \"run\" is given twice (models are told apart by their labels)");
}

}  // namespace kvrank

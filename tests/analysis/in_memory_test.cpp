// Checkpoint::from_memory (the Python module's state dicts): views of the caller's bytes go
// through the same detection and analysis as files, and are checked like a reader's views.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvrank/analysis/analysis.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using test::error_message;

/// data/tiny/gqa's tensors viewed where its reader mapped them, as a caller's memory would be.
Checkpoint in_memory_copy_of(const Checkpoint& file) {
  return Checkpoint::from_memory("<in memory>", file.tensors(), file.config());
}

/// A tensor's bytes handed out on request, counting the requests and whether they are held.
class CountedBytes final : public DeferredBytes {
 public:
  explicit CountedBytes(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::size_t size() const noexcept override { return bytes_.size(); }
  std::span<const std::byte> get() const override {
    ++gets;
    held = true;
    return bytes_;
  }
  void release() const noexcept override { held = false; }
  mutable int gets = 0;
  mutable bool held = false;

 private:
  std::span<const std::byte> bytes_;
};

}  // namespace

TEST_CASE("from_memory: the same layout and numbers as the file", "[analysis][in_memory]") {
  const Checkpoint file = Checkpoint::open(test::tiny_model("gqa"));
  const Checkpoint memory = in_memory_copy_of(file);
  CHECK(memory.path() == "<in memory>");
  CHECK(memory.config_path() == "config");
  AnalyzeOptions options;
  options.reprs = {Repr::qk, Repr::ov};
  const std::vector<ModelReport> expected = analyze_checkpoint(file, "m", options);
  const std::vector<ModelReport> found = analyze_checkpoint(memory, "m", options);
  REQUIRE(found.size() == expected.size());
  for (std::size_t r = 0; r < found.size(); ++r) {
    CHECK(found[r].family == expected[r].family);
    CHECK(found[r].geometry.heads == expected[r].geometry.heads);
    REQUIRE(found[r].layers.size() == expected[r].layers.size());
    for (std::size_t l = 0; l < found[r].layers.size(); ++l)
      CHECK(found[r].layers[l].erank == expected[r].layers[l].erank);
  }
}

TEST_CASE("from_memory: deferred bytes are produced when read and released after the layer",
          "[analysis][in_memory]") {
  const Checkpoint file = Checkpoint::open(test::tiny_model("gqa"));
  std::vector<TensorView> tensors = file.tensors();
  std::vector<std::shared_ptr<const CountedBytes>> counted;
  for (TensorView& tensor : tensors) {
    counted.push_back(std::make_shared<CountedBytes>(tensor.bytes));
    tensor.deferred = counted.back();
    tensor.bytes = {};
  }
  const Checkpoint memory = Checkpoint::from_memory("<in memory>", tensors, file.config());
  AnalyzeOptions options;
  options.reprs = {Repr::qk, Repr::ov};  // every attention projection is read
  const std::vector<ModelReport> expected = analyze_checkpoint(file, "m", options);
  const std::vector<ModelReport> found = analyze_checkpoint(memory, "m", options);
  REQUIRE(found.size() == 2);
  for (std::size_t r = 0; r < found.size(); ++r)
    for (std::size_t l = 0; l < found[r].layers.size(); ++l)
      CHECK(found[r].layers[l].erank == expected[r].layers[l].erank);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].name);
    const bool attention = tensors[i].name.find("self_attn") != std::string::npos;
    // The embedding, norms and MLP are never read; the attention tensors are, then released.
    CHECK((counted[i]->gets > 0) == attention);
    CHECK_FALSE(counted[i]->held);
  }
}

TEST_CASE("from_memory: wrong sizes, twice the same name, a config that is no object",
          "[analysis][in_memory]") {
  const Checkpoint file = Checkpoint::open(test::tiny_model("gqa"));
  std::vector<TensorView> tensors = file.tensors();
  tensors.front().bytes = tensors.front().bytes.first(tensors.front().bytes.size() - 1);
  CHECK_THAT(error_message([&] { Checkpoint::from_memory("<in memory>", tensors, {}); }),
             Catch::Matchers::Contains(
                 "model.embed_tokens.weight: 65535 bytes do not hold a BF16 tensor"));
  tensors = file.tensors();
  tensors.push_back(tensors.front());
  CHECK_THAT(error_message([&] { Checkpoint::from_memory("<in memory>", tensors, {}); }),
             Catch::Matchers::Contains("tensor name also appears in"));
  CHECK(error_message([&] {
          Checkpoint::from_memory("<in memory>", file.tensors(), nlohmann::json::array());
        }) == "config: expected a JSON object, found array");
}

TEST_CASE("check_cancelled stops the analysis before a layer", "[analysis][in_memory]") {
  const Checkpoint file = Checkpoint::open(test::tiny_model("gqa"));
  AnalyzeOptions options;
  int layers_started = 0;
  options.check_cancelled = [&] {
    if (++layers_started == 3) throw Error("", "cancelled");
  };
  int layers_done = 0;
  options.progress = [&](int, int) { ++layers_done; };
  CHECK(error_message([&] { analyze_checkpoint(file, "m", options); }) == "cancelled");
  CHECK(layers_done == 2);
}

}  // namespace kvrank

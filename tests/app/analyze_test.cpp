// `analyze` in the application layer (kvrank/app/commands.hpp): --keep-going keeps each input's
// own --label and --step when another fails, and survives an input that runs out of memory; a
// tensor in memory is described by its dtype's name (memory_tensor).
#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "kvrank/app/commands.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using Catch::Matchers::Contains;
using test::error_message;

/// The repository's data/tiny/NAME, wherever the tests run from.
std::string tiny(const std::string& name) {
  return (test::source_dir() / "data/tiny" / name).string();
}

/// Two trained models of data/tiny around an input that fails.
app::AnalyzeRequest around(const std::string& failing) {
  app::AnalyzeRequest request;
  request.inputs = {tiny("mha"), failing, tiny("gqa")};
  request.labels = {"first", "second", "third"};
  request.steps = {100, 200, 300};
  request.keep_going = true;
  return request;
}

}  // namespace

TEST_CASE("keep-going: a missing input does not shift --step or --label", "[app][keep_going]") {
  std::vector<std::string> errors;
  app::Hooks hooks;
  hooks.error = [&](const std::string& line) { errors.push_back(line); };
  const app::AnalyzeOutcome outcome = app::analyze(around(tiny("absent")), hooks);
  REQUIRE(outcome.models.size() == 2);
  CHECK(outcome.failed_inputs == 1);
  CHECK(outcome.models[0].label == "first");
  CHECK(outcome.models[0].step == 100);
  CHECK(outcome.models[1].label == "third");
  CHECK(outcome.models[1].step == 300);  // not 200, the missing input's
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Contains("data/tiny/absent"));
}

TEST_CASE("keep-going: an input that runs out of memory is one failure", "[app][keep_going]") {
  app::AnalyzeRequest request = around(tiny("mqa"));
  std::size_t current = 0;
  std::vector<std::string> errors;
  app::Hooks hooks;
  hooks.model_started = [&](std::size_t index, std::size_t, const std::string&) {
    current = index;
  };
  hooks.check_cancelled = [&] {  // the second model's first layer cannot get its memory
    if (current == 1) throw std::bad_alloc();
  };
  hooks.error = [&](const std::string& line) { errors.push_back(line); };
  const app::AnalyzeOutcome outcome = app::analyze(request, hooks);
  REQUIRE(outcome.models.size() == 2);
  CHECK(outcome.failed_inputs == 1);
  CHECK(outcome.models[0].label == "first");
  CHECK(outcome.models[1].label == "third");
  CHECK(outcome.models[1].step == 300);
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0], Contains("data/tiny/mqa"));
  // Without --keep-going it ends the run, as before (the command line exits 2).
  request.keep_going = false;
  CHECK_THROWS_AS(app::analyze(request, hooks), std::bad_alloc);
}

TEST_CASE("keep-going: nothing analysable is an error", "[app][keep_going]") {
  app::AnalyzeRequest request;
  request.inputs = {"data/tiny/absent", "data/tiny/also-absent"};
  request.keep_going = true;
  CHECK_THAT(error_message([&] { app::analyze(request, {}); }),
             Contains("no input could be analysed"));
}

TEST_CASE("memory_tensor: a tensor in memory by its dtype's name, refused in one line",
          "[app][in_memory]") {
  const TensorView view = app::memory_tensor("q.weight", "BF16", {4, 8});
  CHECK(view.file == app::kInMemory);
  CHECK(view.dtype == DType::BF16);
  CHECK(view.shape == std::vector<std::int64_t>{4, 8});
  CHECK(view.bytes.empty());
  CHECK(error_message([] { app::memory_tensor("q.weight", "C64", {4}); }) ==
        "<in memory>: q.weight: unsupported dtype C64");
  CHECK_THAT(error_message([] {
               app::memory_tensor("q.weight", "F32", {std::int64_t{1} << 62, 8});
             }),
             Contains("q.weight: shape [") && Contains("is too large"));
}

}  // namespace kvrank

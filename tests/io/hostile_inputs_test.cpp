// The readers against hostile inputs (docs/input-limits.md), at the library level.
// The whole-binary side (exit code 2, one line, bounded time and memory) is
// tests/e2e/test_hostile_inputs.py; weight magnitude is tests/metric/weight_scale_test.cpp.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/guarded_read.hpp"
#include "base/json_strict.hpp"
#include "kvrank/analysis/analysis.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/mapped_file.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/io/npy.hpp"
#include "kvrank/io/safetensors.hpp"
#include "layout/layer_scan.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/readers_test_files.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using test::error_message;

std::string nested_array(int levels) {
  return std::string(static_cast<std::size_t>(levels), '[') +
         std::string(static_cast<std::size_t>(levels), ']');
}

/// A safetensors image: the 8-byte header size, `header`, then `data`.
std::vector<std::byte> safetensors_image(const std::string& header, const std::string& data = "") {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return test::to_bytes(bytes + header + data);
}

/// One F32 tensor "t" of `count` values 1.0f.
std::vector<std::byte> one_tensor_file(std::size_t count) {
  const std::string header = R"({"t":{"dtype":"F32","shape":[)" + std::to_string(count) +
                             R"(],"data_offsets":[0,)" + std::to_string(4 * count) + "]}}";
  std::string data;
  const float one = 1.0f;
  for (std::size_t i = 0; i < count; ++i) data.append(reinterpret_cast<const char*>(&one), 4);
  return safetensors_image(header, data);
}

}  // namespace

TEST_CASE("hostile input: deep JSON nesting is refused before anything recurses",
          "[hostile_inputs]") {
  using detail::kMaxJsonDepth;
  CHECK_NOTHROW(detail::parse_json_strict(nested_array(kMaxJsonDepth), "f.json", "file"));
  CHECK(error_message([] {
          detail::parse_json_strict(nested_array(kMaxJsonDepth + 1), "f.json", "file");
        }) == "f.json: file nests deeper than 64 levels of objects and arrays");
  CHECK(error_message([] { detail::parse_json_strict(nested_array(100'000), "f.json", "file"); }) ==
        "f.json: file nests deeper than 64 levels of objects and arrays");
  const std::string deep_object = std::string(100'000, '{') + std::string(100'000, '}');
  CHECK_THAT(error_message([&] { detail::parse_json_strict(deep_object, "f.json", "file"); }),
             Contains("f.json: file"));

  // In a safetensors header, in `shape` or `data_offsets`.
  for (const char* key : {"shape", "data_offsets"}) {
    INFO(key);
    nlohmann::json entry = {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}};
    std::string header = nlohmann::json{{"t", entry}}.dump();
    header.replace(header.find(entry[key].dump()), entry[key].dump().size(), nested_array(100'000));
    CHECK(error_message([&] { parse_safetensors(safetensors_image(header), "m.safetensors"); }) ==
          "m.safetensors: header nests deeper than 64 levels of objects and arrays");
  }
}

TEST_CASE("hostile input: deep JSON nesting — wrong values are quoted as a short excerpt",
          "[hostile_inputs]") {
  const nlohmann::json deep = detail::parse_json_strict(nested_array(60), "f.json", "file");
  const std::string excerpt = detail::json_excerpt(deep);
  CHECK(excerpt == std::string(60, '[') + "... (120 bytes)");
  CHECK(detail::json_excerpt(nlohmann::json::array({1, 2})) == "[1,2]");
  // Cut at a character boundary: "é" is two bytes, so a cut at byte 59 of `éé...` splits one.
  std::string accents;
  for (int i = 0; i < 59; ++i) accents += "é";
  const std::string cut = detail::json_excerpt(nlohmann::json(accents), 59);
  CHECK(cut == '"' + accents.substr(0, 58) + "... (118 bytes)\"");
  CHECK_FALSE(detail::first_invalid_utf8(cut));
  // A shape nested 60 levels deep (within the bound) is reported, not printed whole.
  const std::string header =
      R"({"t":{"dtype":"F32","shape":)" + nested_array(60) + R"(,"data_offsets":[0,0]}})";
  const std::string message =
      error_message([&] { parse_safetensors(safetensors_image(header), "m.safetensors"); });
  CHECK_THAT(message, Contains("\"shape\" is not a list of non-negative integers"));
  CHECK(message.size() < 200);
}

TEST_CASE("hostile input: regex recursion — layer names are parsed in one bounded pass",
          "[hostile_inputs]") {
  TensorView tensor;
  tensor.file = "m.safetensors";
  tensor.name = "model.layers.7.k_proj";
  CHECK(detail::layer_index(tensor, "7") == 7);
  CHECK(detail::layer_index(tensor, "0") == 0);
  CHECK(detail::layer_index(tensor, "99999") == 99'999);
  CHECK_FALSE(detail::layer_index(tensor, "07"));  // not how layer_name() writes index 7
  CHECK_FALSE(detail::layer_index(tensor, ""));
  CHECK_FALSE(detail::layer_index(tensor, "1a"));
  CHECK(error_message([&] { detail::layer_index(tensor, "1234567"); }) ==
        "m.safetensors: model.layers.7.k_proj: layer index 1234567 is too large (kvrank reads at "
        "most 100000 layers)");
  const std::string digits(100'000, '9');
  const std::string message = error_message([&] { detail::layer_index(tensor, digits); });
  CHECK_THAT(message, Contains("layer index 999999999999... (100000 digits) is too large"));

  // A 100,000-character name costs one pass.
  const std::string dots = [] {
    std::string text;
    for (int i = 0; i < 50'000; ++i) text += "x.";
    return text;
  }();
  CHECK_FALSE(detail::split_layer_name(dots + "k_proj", ".k_proj"));
  const std::string long_name = dots + "layers.12.k_proj";
  const auto split = detail::split_layer_name(long_name, ".k_proj");  // views into long_name
  REQUIRE(split);
  CHECK(split->digits == "12");
  CHECK(split->before == dots + "layers.");
}

TEST_CASE("hostile input: regex recursion — a 100000-character name beside a valid model",
          "[hostile_inputs]") {
  test::TempDir dir;
  std::string long_name;
  for (int i = 0; i < 50'000; ++i) long_name += "a.";
  long_name += "k_proj";
  const std::string entry = R"({"dtype":"F32","shape":[2,2],"data_offsets":[)";
  const std::string header = "{\"" + long_name + "\":" + entry +
                             "0,16]},\"layers.0.k_proj\":" + entry +
                             "16,32]},\"layers.0.v_proj\":" + entry + "32,48]}}";
  std::string data;
  for (int i = 0; i < 12; ++i) {
    const float value = static_cast<float>(i % 5) - 1.5f;
    data.append(reinterpret_cast<const char*>(&value), 4);
  }
  test::write_file(dir / "m.safetensors", safetensors_image(header, data));
  LayoutOverrides overrides;
  overrides.heads = 1;
  const ModelLayout layout = detect_layout(Checkpoint::open(dir / "m.safetensors"), overrides);
  CHECK(layout.num_layers == 1);
  CHECK(std::get<DenseTensors>(layout.tensors).names.at(ProjectionRole::k) == "layers.{i}.k_proj");
}

TEST_CASE("hostile input: truncation while mapped is an error naming the file and no SIGBUS",
          "[hostile_inputs]") {
  test::TempDir dir;
  const fs::path path = dir / "m.safetensors";
  test::write_file(path, one_tensor_file(64 * 1024));  // 256 KiB of data: many pages
  const Checkpoint checkpoint = Checkpoint::open(path);
  const TensorView& tensor = checkpoint.at("t");
  REQUIRE(to_f32(tensor).back() == 1.0f);
  checkpoint.release(tensor);  // drop the pages, so the next read faults them in from the file
  fs::resize_file(path, 4096);
  CHECK(error_message([&] { to_f32(tensor); }) == path.string() + ": t: " + detail::kFileShrank);
  // The guard is per read: later reads of memory still there work.
  CHECK(detail::guarded_read([] {}));
  // The jump out of the handler leaves SIGBUS unblocked, so a second fault is caught the same way
  // (a blocked SIGBUS from a fault would kill the process).
  sigset_t mask;
  REQUIRE(pthread_sigmask(SIG_BLOCK, nullptr, &mask) == 0);
  CHECK(sigismember(&mask, SIGBUS) == 0);
  checkpoint.release(tensor);
  CHECK(error_message([&] { to_f32(tensor); }) == path.string() + ": t: " + detail::kFileShrank);
}

TEST_CASE("hostile input: unbounded reads — JSON inputs must be regular files of bounded size",
          "[hostile_inputs]") {
  CHECK(error_message([] { read_json_object("/dev/zero"); }) == "/dev/zero: is not a regular file");
  test::TempDir dir;
  const fs::path fifo = dir / "results.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_message([&] { read_json_object(fifo); }) ==
        fifo.string() + ": is not a regular file");
  CHECK(error_message([&] { read_json_object(dir.path()); }) ==
        dir.path().string() + ": is a folder, expected a file");
  const fs::path big = dir / "big.json";
  test::write_file(big, "{}");
  fs::resize_file(big, kMaxJsonFileBytes + 1);  // sparse: no disk, nothing read
  CHECK(error_message([&] { read_json_object(big); }) ==
        big.string() + ": is 268435457 bytes, more than the 256 MiB kvrank reads as a JSON file");
}

TEST_CASE(
    "hostile input: NPZ deflate bomb — a member is inflated only when its tensor is converted",
    "[hostile_inputs]") {
  const fs::path folder = test::generated_files("valid");
  const Checkpoint stored = Checkpoint::open(folder / "stored.npz");
  const Checkpoint compressed = Checkpoint::open(folder / "compressed.npz");
  for (const char* name : {"q", "k", "big"}) {
    INFO(name);
    const TensorView& tensor = compressed.at(name);
    REQUIRE(tensor.deferred);
    CHECK(tensor.bytes.empty());
    CHECK(tensor.byte_size() == stored.at(name).byte_size());
    CHECK(to_matrix(tensor) == to_matrix(stored.at(name)));
    compressed.release(tensor);  // frees the inflated member; a later read inflates it again
    CHECK(to_matrix(tensor) == to_matrix(stored.at(name)));
  }
}

TEST_CASE("hostile input: huge counts — the baseline is bounded before it allocates",
          "[hostile_inputs]") {
  CHECK_THAT(error_message([] { fully_redundant_baseline(1'000'000'000, 1); }),
             Contains("limited to 1024 heads, 100000 layers"));
  CHECK_THAT(error_message([] { fully_redundant_baseline(2, 30'000); }),
             Contains("found 30000 heads and 2 layers"));
  CHECK_THAT(error_message([] { fully_redundant_baseline(100'000, 1000); }),
             Contains("4194304 layers × heads"));
  CHECK(fully_redundant_baseline(4, 1024).layers.size() == 4);
  CHECK_THAT(error_message([] { parse_layer_list("0-1234567"); }),
             Contains("--layers: layer index 1234567 is too large"));
}

TEST_CASE("hostile input: zero tokens and --repr listing one representation twice are refused",
          "[hostile_inputs]") {
  AnalyzeOptions options;
  options.reprs = {Repr::qk, Repr::ov, Repr::qk};
  // Refused before the (missing) checkpoint is opened.
  CHECK(error_message([&] { analyze_checkpoint("/nonexistent", "x", options); }) ==
        "--repr lists qk more than once (give each representation once)");
}

}  // namespace kvrank

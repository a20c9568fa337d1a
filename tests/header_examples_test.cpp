// The usage examples of the public headers, copied here verbatim between the `example:` markers,
// so that an example that stops compiling (or stops working) fails the build or this test. Each
// runs on the trained checkpoint data/tiny/gqa.
#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "kvrank/base/attention_series.hpp"
#include "kvrank/base/mapped_file.hpp"
#include "kvrank/base/name_table.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/io/safetensors.hpp"
#include "kvrank/layout/family.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/layout/model_type.hpp"
#include "kvrank/metric/compute.hpp"
#include "kvrank/metric/diversity.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

/// What the examples do with their results: collect them for the checks below.
struct Collected {
  std::vector<std::string> tensor_names;
  std::vector<LayerMetrics> layers;
  void operator()(const TensorView& t) { tensor_names.push_back(t.name); }
  void operator()(const LayerMetrics& m) { layers.push_back(m); }
};

std::string trimmed(const std::string& line) {
  const auto first = line.find_first_not_of(' ');
  return first == std::string::npos ? "" : line.substr(first);
}

/// include/kvrank/<layer>/<header>, whichever layer's folder holds it.
std::filesystem::path header_path(const std::string& header) {
  for (const auto& layer :
       std::filesystem::directory_iterator(test::source_dir() / "include" / "kvrank")) {
    if (std::filesystem::exists(layer.path() / header)) return layer.path() / header;
  }
  FAIL("no public header " << header);
  return {};
}

/// The code lines of the header comment of include/kvrank/<layer>/<header> (after "//", trimmed).
std::vector<std::string> header_comment_lines(const std::string& header) {
  std::istringstream text(test::read_file(header_path(header)));
  std::vector<std::string> lines;
  for (std::string line; std::getline(text, line) && line.starts_with("//");)
    lines.push_back(trimmed(line.substr(2)));
  return lines;
}

/// The lines of this file between "// example: <header>" and "// end of example", trimmed.
std::vector<std::string> example_lines(const std::string& header) {
  std::istringstream text(
      test::read_file(test::source_dir() / "tests" / "header_examples_test.cpp"));
  std::vector<std::string> lines;
  bool inside = false;
  for (std::string line; std::getline(text, line);) {
    const std::string code = trimmed(line);
    if (code == "// end of example") inside = false;
    if (inside) lines.push_back(code);
    if (code == "// example: " + header) inside = true;
  }
  return lines;
}

}  // namespace

TEST_CASE("header examples: this file holds each header's example verbatim", "[examples]") {
  for (const char* header :
       {"safetensors.hpp", "layout.hpp", "diversity.hpp", "compute.hpp", "family.hpp",
        "name_table.hpp", "model_type.hpp", "attention_series.hpp"}) {
    INFO(header);
    const std::vector<std::string> example = example_lines(header);
    const std::vector<std::string> comment = header_comment_lines(header);
    REQUIRE(!example.empty());
    auto start = std::search(comment.begin(), comment.end(), example.begin(), example.end());
    CHECK(start != comment.end());
  }
}

TEST_CASE("header examples: safetensors.hpp", "[examples]") {
  const std::filesystem::path folder = test::tiny_model("gqa");
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(folder);  // the example opens "model.safetensors"
  Collected use;
  // example: safetensors.hpp
  MappedFile file("model.safetensors");  // mapped_file.hpp
  SafetensorsFile st = parse_safetensors(file.bytes(), "model.safetensors");
  for (const TensorView& t : st.tensors) use(t);  // views into `file`
  // end of example
  std::filesystem::current_path(previous);
  CHECK(use.tensor_names.size() == 38);
}

TEST_CASE("header examples: layout.hpp and diversity.hpp", "[examples]") {
  const std::filesystem::path path = test::tiny_model("gqa");
  Collected use;
  // example: layout.hpp
  Checkpoint ckpt = Checkpoint::open(path);
  ModelLayout layout = detect_layout(ckpt, {});
  for (int layer = 0; layer < layout.num_layers; ++layer)
    use(analyze_layer(layer_factors(ckpt, layout, layer, Repr::qk)));  // diversity.hpp
  // end of example
  REQUIRE(use.layers.size() == 4);

  const int layer = 2;
  // example: diversity.hpp
  HeadFactors f = layer_factors(ckpt, layout, layer, Repr::qk);  // layout.hpp, or by hand
  LayerMetrics m = analyze_layer(f);  // m.erank, m.erank_centered, m.similarity, ...
  // end of example
  CHECK(m.erank == use.layers[2].erank);
  CHECK(m.similarity.rows() == 8);
}

TEST_CASE("header examples: compute.hpp", "[examples]") {
  Checkpoint ckpt = Checkpoint::open(test::tiny_model("gqa"));
  ModelLayout layout = detect_layout(ckpt, {});
  Collected use;
  // example: compute.hpp
  set_compute_threads(2);      // BLAS, kvrank's loops and oneDNN: one pool
  ComputeWorkspace workspace;  // owned by the layer loop
  for (int layer = 0; layer < layout.num_layers; ++layer)
    use(analyze_layer(layer_factors(ckpt, layout, layer, Repr::qk), workspace));
  // end of example
  set_compute_threads(0);
  REQUIRE(use.layers.size() == 4);
  CHECK(use.layers[2].erank == analyze_layer(layer_factors(ckpt, layout, 2, Repr::qk)).erank);
}

TEST_CASE("header examples: family.hpp", "[examples]") {
  // example: family.hpp
  std::string_view name = family_name(Family::gpt_neox);  // "gpt_neox"
  std::optional<Family> falcon = family_named("falcon");  // Family::falcon
  bool mha_only = family_info(Family::gpt2).mha_only;     // true: one fused [3·H·d_h, d]
  Variant variant = attention_variant(32, 8);             // Variant::gqa
  // end of example
  CHECK(name == "gpt_neox");
  CHECK(falcon == Family::falcon);
  CHECK(mha_only);
  CHECK(variant == Variant::gqa);
}

TEST_CASE("header examples: attention_series.hpp", "[examples]") {
  // example: attention_series.hpp
  AttentionSeries cross{AttentionStack::decoder, AttentionKind::cross};
  std::string text = series_text(cross);                         // "decoder cross"
  std::optional<AttentionStack> vision = stack_named("vision");  // AttentionStack::vision
  // end of example
  CHECK(text == "decoder cross");
  CHECK(vision == AttentionStack::vision);
}

TEST_CASE("header examples: model_type.hpp", "[examples]") {
  // example: model_type.hpp
  const ModelTypeInfo* qwen3 = model_type_named("qwen3");      // reader Family::llama
  NormGain gemma = model_type_named("gemma3")->norm_gain;      // NormGain::one_plus_weight
  const ModelTypeInfo* mla = model_type_of_gguf("deepseek2");  // the "deepseek_v2" row
  // end of example
  CHECK(qwen3->family == Family::llama);
  CHECK(gemma == NormGain::one_plus_weight);
  CHECK(mla->name == "deepseek_v2");
}

TEST_CASE("header examples: name_table.hpp", "[examples]") {
  // example: name_table.hpp
  enum class Colour { red, green };
  constexpr std::array<Named<Colour>, 2> kColours{{{Colour::red, "red"}, {Colour::green, "g"}}};
  static_assert(in_enum_order(kColours));
  std::string_view green = name_of(kColours, Colour::green);  // "g"
  std::optional<Colour> red = value_named(kColours, "red");   // Colour::red
  std::string both = name_list(kColours);                     // "red or g"
  std::string same = name_list(names_of(kColours));           // "red or g"
  // end of example
  CHECK(green == "g");
  CHECK(red == Colour::red);
  CHECK(both == "red or g");
  CHECK(same == "red or g");
  CHECK_FALSE(value_named(kColours, "blue"));
}

}  // namespace kvrank

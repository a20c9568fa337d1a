// Layer lists, layer shards and layer numbers in tensor names (kvrank/base/layer_list.hpp).
#include "kvrank/base/layer_list.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank {
namespace {

using test::error_message;

}  // namespace

TEST_CASE("layers_with_heads: a hybrid's attention layers, else every layer", "[layers]") {
  CHECK(layers_with_heads({}, 4) == std::vector<int>{0, 1, 2, 3});
  CHECK(layers_with_heads({}, 0).empty());
  CHECK(layers_with_heads({2, 6}, 8) == std::vector<int>{2, 6});
}

TEST_CASE("parse_layer_list: ranges and single layers, sorted and unique", "[layers]") {
  CHECK(parse_layer_list("0-3,20") == std::vector<int>{0, 1, 2, 3, 20});
  CHECK(parse_layer_list("5,1,1,2-3") == std::vector<int>{1, 2, 3, 5});
  CHECK(parse_layer_list("7") == std::vector<int>{7});
  CHECK(parse_layer_list("4-4") == std::vector<int>{4});
  CHECK(parse_layer_list(" 1 , 3 ") == std::vector<int>{1, 3});
}

TEST_CASE("parse_layer_list: bad syntax is a usage error naming the part", "[layers]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_message([] { parse_layer_list("3-1"); }), Contains("\"3-1\" runs backwards"));
  CHECK_THAT(error_message([] { parse_layer_list("x"); }), Contains("found \"x\""));
  CHECK_THAT(error_message([] { parse_layer_list(""); }), Contains("empty entry"));
  CHECK_THAT(error_message([] { parse_layer_list("1,,2"); }), Contains("empty entry"));
  CHECK_THAT(error_message([] { parse_layer_list("1,"); }), Contains("empty entry"));
  CHECK_THAT(error_message([] { parse_layer_list("2-"); }), Contains("found \"2-\""));
  CHECK_THAT(error_message([] { parse_layer_list("-2"); }), Contains("found \"-2\""));
  CHECK_THAT(error_message([] { parse_layer_list("1.5"); }), Contains("found \"1.5\""));
  CHECK_THAT(error_message([] { parse_layer_list("0-99999999999"); }), Contains("--layers"));
  CHECK_THAT(error_message([] { parse_layer_list("0-5000000"); }), Contains("too large"));
}

TEST_CASE("format_layer_list: compact ranges, the inverse of parse_layer_list", "[layers]") {
  CHECK(format_layer_list({}) == "");
  CHECK(format_layer_list({3}) == "3");
  CHECK(format_layer_list({0, 1, 2, 3, 7, 9, 10}) == "0-3,7,9-10");
  for (const char* text : {"0-11,20", "5", "1,3,5-6"})
    CHECK(format_layer_list(parse_layer_list(text)) == text);
}

TEST_CASE("shard_layers: N shards cover every layer once, in order, sizes within one", "[layers]") {
  for (int size = 0; size <= 10; ++size) {
    std::vector<int> layers;
    for (int layer = 0; layer < size; ++layer) layers.push_back(3 * layer + 1);  // a selection
    for (int count = 1; count <= 12; ++count) {
      std::vector<int> joined;
      std::size_t smallest = layers.size(), largest = 0;
      for (int index = 0; index < count; ++index) {
        const std::vector<int> shard = shard_layers(layers, {index, count});
        joined.insert(joined.end(), shard.begin(), shard.end());
        smallest = std::min(smallest, shard.size());
        largest = std::max(largest, shard.size());
      }
      CHECK(joined == layers);
      CHECK(largest - smallest <= 1);
    }
  }
  CHECK(shard_layers({0, 1, 2, 3, 4}, {0, 2}) == std::vector<int>{0, 1, 2});
  CHECK(shard_layers({0, 1, 2, 3, 4}, {1, 2}) == std::vector<int>{3, 4});
  CHECK(error_message([] {
          shard_layers({0, 1}, {0, 0});
        }) == "--layer-shard: expected I/N with 0 <= I < N (e.g. 0/4), found \"0/0\"");
  CHECK(error_message([] {
          shard_layers({0, 1}, {-1, 2});
        }) == "--layer-shard: expected I/N with 0 <= I < N (e.g. 0/4), found \"-1/2\"");
}

TEST_CASE("parse_layer_shard: I/N with 0 <= I < N", "[layers]") {
  CHECK(parse_layer_shard("0/4").index == 0);
  CHECK(parse_layer_shard("3/4").index == 3);
  CHECK(parse_layer_shard("3/4").count == 4);
  for (const char* bad : {"4/4", "0/0", "1", "-1/4", "a/4", "1/", "/4", "1/4/2", "1.5/4", ""})
    CHECK(error_message([&] { parse_layer_shard(bad); }) ==
          std::string("--layer-shard: expected I/N with 0 <= I < N (e.g. 0/4), found \"") + bad +
              "\"");
}

TEST_CASE("layer_number: digits without a leading zero, below kMaxLayers", "[layers]") {
  CHECK(layer_number("0") == 0);
  CHECK(layer_number("7") == 7);
  CHECK(layer_number("99999") == 99999);
  CHECK_FALSE(layer_number("07"));
  CHECK_FALSE(layer_number(""));
  CHECK_FALSE(layer_number("7a"));
  CHECK_FALSE(layer_number("-1"));
  CHECK_FALSE(layer_number("100000"));
  CHECK_FALSE(layer_number(std::string(1000, '9')));  // no overflow, whatever the length
  CHECK(is_layer_number("100000"));
  CHECK_FALSE(is_layer_number("00"));
}

}  // namespace kvrank

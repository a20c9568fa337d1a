// The malformed corpus of tests/writers/write_test_files.py: every broken input must be refused
// with a one-line kvrank::Error that starts with the file (or folder) it is about.
#include <string>

#include "kvrank/base/error.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "support/catch.hpp"
#include "support/readers_test_files.hpp"

namespace kvrank {

TEST_CASE("malformed corpus: each input is refused with a message naming it",
          "[readers][malformed]") {
  const auto root = test::generated_files("malformed");
  const nlohmann::json cases = test::generated_manifest("malformed")["cases"];
  REQUIRE(cases.size() >= 25);
  for (const nlohmann::json& entry : cases) {
    const auto path = root / entry["path"].get<std::string>();
    const std::string expect = entry["expect"];
    INFO(entry["path"].get<std::string>() << " should say: " << expect);
    const std::string message = test::error_message([&] { Checkpoint::open(path); });
    INFO("kvrank said: " << message);
    CHECK(message.starts_with(path.string()));
    CHECK(message.find(expect) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
  }
}

}  // namespace kvrank

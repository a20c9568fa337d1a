// Files written by tests/writers/write_test_files.py (an independent numpy writer) for the reader
// tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank::test {

/// The folder holding `write_test_files.py <kind>` output ("valid" or "malformed"), read only.
/// Under ctest the fixture unit.write_inputs has written both once for the whole run into
/// $KVRANK_TEST_INPUTS (tests/CMakeLists.txt); a test binary run by hand writes them itself, once
/// per process, into a temporary folder removed at exit.
inline const std::filesystem::path& generated_files(const std::string& kind) {
  static std::map<std::string, std::filesystem::path> folders;
  static std::map<std::string, std::unique_ptr<TempDir>> written_here;
  std::filesystem::path& folder = folders[kind];
  if (!folder.empty()) return folder;
  if (const char* inputs = std::getenv("KVRANK_TEST_INPUTS")) {
    folder = std::filesystem::path(inputs) / kind;
    REQUIRE(std::filesystem::is_regular_file(folder / (kind + ".json")));
    return folder;
  }
  std::unique_ptr<TempDir>& temp = written_here[kind];
  temp = std::make_unique<TempDir>();
  CommandResult result = run_test_writer("write_test_files.py", kind + " " + temp->path().string());
  REQUIRE(result.exit_code == 0);
  folder = temp->path();
  return folder;
}

/// `<kind>.json`, the manifest that describes the generated files.
inline nlohmann::json generated_manifest(const std::string& kind) {
  return nlohmann::json::parse(read_file(generated_files(kind) / (kind + ".json")));
}

}  // namespace kvrank::test

// Files written by scripts/write_test_files.py (an independent numpy writer) for the reader tests.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank::test {

/// The folder holding `write_test_files.py <kind>` output ("valid" or "malformed"); written once
/// per test run and removed at exit.
inline const std::filesystem::path& generated_files(const std::string& kind) {
  static std::map<std::string, std::unique_ptr<TempDir>> folders;
  std::unique_ptr<TempDir>& folder = folders[kind];
  if (!folder) {
    folder = std::make_unique<TempDir>();
    CommandResult result =
        run_python_script("write_test_files.py", kind + " " + folder->path().string());
    REQUIRE(result.exit_code == 0);
  }
  return folder->path();
}

/// `<kind>.json`, the manifest that describes the generated files.
inline nlohmann::json generated_manifest(const std::string& kind) {
  return nlohmann::json::parse(read_file(generated_files(kind) / (kind + ".json")));
}

}  // namespace kvrank::test

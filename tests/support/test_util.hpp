// Shared helpers for the unit tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace kvrank::test {

/// A fresh temporary folder, removed (with its contents) when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// Bytes of a string (to build file images in memory).
std::vector<std::byte> to_bytes(const std::string& text);
void write_file(const std::filesystem::path& path, const std::vector<std::byte>& bytes);
void write_file(const std::filesystem::path& path, const std::string& text);
std::string read_file(const std::filesystem::path& path);

struct CommandResult {
  int exit_code = -1;
  std::string out;  ///< stdout
};
/// Runs a shell command, capturing stdout (stderr passes through).
CommandResult run_command(const std::string& command);

/// `python3 scripts/<script> args...` from the source tree, with the Python CMake found.
CommandResult run_python_script(const std::string& script, const std::string& args);
/// `python3 tests/writers/<writer> args...`: the independent numpy writers of test inputs.
CommandResult run_test_writer(const std::string& writer, const std::string& args);

/// The project's source folder, and ../shared/fixtures when present (empty path when absent).
std::filesystem::path source_dir();
std::filesystem::path fixtures_dir();

/// The real trained checkpoint `data/tiny/<name>` shipped in the repository (data/README.md):
/// the in-repo fixture every test can rely on.
std::filesystem::path tiny_model(const std::string& name);

/// stories260K from ../shared/fixtures for the `[.shared]` tests (tests/CMakeLists.txt runs them
/// only when the folder exists and reports a skip otherwise); fails the test when it is absent.
std::filesystem::path shared_stories260k();

/// The message of the kvrank::Error `action` throws, or "(no error)".
std::string error_message(const std::function<void()>& action);

/// A little-endian NPY v1.0 file of `shape` in C order: float32 ('<f4') or float64 ('<f8').
void write_npy(const std::filesystem::path& path, const std::vector<std::int64_t>& shape,
               std::span<const float> values);
void write_npy(const std::filesystem::path& path, const std::vector<std::int64_t>& shape,
               std::span<const double> values);

}  // namespace kvrank::test

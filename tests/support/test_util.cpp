#include "support/test_util.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "kvrank/base/error.hpp"
#include "support/catch.hpp"

namespace kvrank::test {

TempDir::TempDir() {
  std::random_device device;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto candidate = std::filesystem::temp_directory_path() /
                     ("kvrank-test-" + std::to_string(device()) + std::to_string(attempt));
    if (std::filesystem::create_directory(candidate)) {
      path_ = candidate;
      return;
    }
  }
  throw std::runtime_error("cannot create a temporary folder");
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::vector<std::byte> to_bytes(const std::string& text) {
  std::vector<std::byte> bytes(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) bytes[i] = static_cast<std::byte>(text[i]);
  return bytes;
}

void write_file(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  write_file(path, to_bytes(text));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  std::array<char, 4096> chunk{};
  std::size_t n = 0;
  while ((n = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0)
    result.out.append(chunk.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::filesystem::path source_dir() { return KVRANK_SOURCE_DIR; }

namespace {

CommandResult run_python(const std::filesystem::path& program, const std::string& args) {
  return run_command(std::string(KVRANK_PYTHON) + " " + program.string() + " " + args);
}

}  // namespace

CommandResult run_python_script(const std::string& script, const std::string& args) {
  return run_python(source_dir() / "scripts" / script, args);
}

CommandResult run_test_writer(const std::string& writer, const std::string& args) {
  return run_python(source_dir() / "tests" / "writers" / writer, args);
}

std::filesystem::path fixtures_dir() {
  auto dir = source_dir().parent_path() / "shared" / "fixtures";
  return std::filesystem::exists(dir) ? dir : std::filesystem::path();
}

std::filesystem::path tiny_model(const std::string& name) {
  return source_dir() / "data" / "tiny" / name;
}

std::filesystem::path shared_stories260k() {
  const auto fixtures = fixtures_dir();
  const bool present = !fixtures.empty() && std::filesystem::exists(fixtures / "stories260K");
  if (!present)
    FAIL("../shared/fixtures/stories260K is absent (ctest reports these tests skipped)");
  return fixtures / "stories260K";
}

std::string error_message(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

namespace {

void write_npy_bytes(const std::filesystem::path& path, const char* descr,
                     const std::vector<std::int64_t>& shape, const void* data, std::size_t size) {
  std::string dims;
  for (std::int64_t dim : shape) dims += std::to_string(dim) + ", ";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";  // 64-byte aligned data
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  std::string payload(size, '\0');
  std::memcpy(payload.data(), data, size);  // little-endian host
  write_file(path, bytes + payload);
}

}  // namespace

void write_npy(const std::filesystem::path& path, const std::vector<std::int64_t>& shape,
               std::span<const float> values) {
  write_npy_bytes(path, "<f4", shape, values.data(), values.size_bytes());
}

void write_npy(const std::filesystem::path& path, const std::vector<std::int64_t>& shape,
               std::span<const double> values) {
  write_npy_bytes(path, "<f8", shape, values.data(), values.size_bytes());
}

}  // namespace kvrank::test

// libFuzzer target: layout detection on arbitrary safetensors headers (and config.json).
//
// The input is a safetensors file, optionally preceded by a config.json and a NUL byte
// ("{...}\0<safetensors>"). Both are written to a private folder, opened as a checkpoint, and the
// layout is detected; then the first layers' factors are built (shape checks, name templates)
// for every representation the layout supports. kvrank::Error is the expected way to fail.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "kvrank/base/error.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/layout/layout.hpp"

namespace {

namespace fs = std::filesystem;

// A folder of this process's own, removed at exit (libFuzzer ends with exit()).
class WorkFolder {
 public:
  WorkFolder()
      : path_(fs::temp_directory_path() / ("kvrank-fuzz-layout-" + std::to_string(getpid()))) {
    fs::create_directories(path_);
  }
  ~WorkFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

const fs::path& work_folder() {
  static const WorkFolder folder;
  return folder.path();
}

void write(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void exercise(const kvrank::Checkpoint& checkpoint) {
  const kvrank::ModelLayout layout = kvrank::detect_layout(checkpoint);
  for (int layer = 0; layer < std::min(layout.num_layers, 2); ++layer) {
    (void)kvrank::layer_tensor_names(layout, layer);
    for (kvrank::Repr repr : {kvrank::Repr::qk, kvrank::Repr::ov, kvrank::Repr::k}) {
      try {
        (void)kvrank::layer_factors(checkpoint, layout, layer, repr);
      } catch (const kvrank::Error&) {
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const fs::path& folder = work_folder();
  const fs::path config = folder / "config.json";
  std::error_code ignored;
  fs::remove(config, ignored);
  const std::size_t nul = input.find('\0');
  if (input.starts_with('{') && nul != std::string_view::npos) {
    write(config, input.substr(0, nul));
    input.remove_prefix(nul + 1);
  }
  write(folder / "model.safetensors", input);
  try {
    exercise(kvrank::Checkpoint::open(folder / "model.safetensors"));
  } catch (const kvrank::Error&) {
  }
  return 0;
}

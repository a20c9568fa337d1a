// Where a command's result goes, and the closing line that says what was written (private to the
// application layer).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kvrank/app/commands.hpp"
#include "kvrank/base/atomic_file.hpp"

namespace kvrank::app::detail {

/// Where the data goes: stdout, or `-o FILE` (none, or "-": stdout). The file is claimed when the
/// command starts — a wrong -o fails at once rather than after the analysis — and published whole
/// by emit(); a failed or interrupted run leaves no partial file (atomic_file.hpp).
class Destination {
 public:
  Destination(const std::string& path, const std::vector<std::filesystem::path>& inputs);

  void emit(const std::string& content);

  /// The claimed file; nullptr when the data goes to stdout.
  OutputFile* file() { return file_ ? &*file_ : nullptr; }

 private:
  std::optional<OutputFile> file_;
};

/// The closing line of a run that wrote a file, through hooks.info: "wrote FILE: WHAT in 0.4 s".
void report_written(const Hooks& hooks, const std::string& output, const std::string& what,
                    std::chrono::steady_clock::time_point started);

/// "1 layer", "12 layers".
std::string layers_text(std::size_t layers);

/// "3 models × 12 layers", or "3 models, 40 layers in all" when they differ.
std::string count_text(const std::vector<ModelReport>& models);

/// A figure's SVG written to `file` in `format` (PNG and PDF through rsvg-convert, PNG at `dpi`),
/// then committed.
void write_figure(const std::string& svg, FigureFormat format, int dpi, OutputFile& file);

/// Calls `hook` with `line` when it is set.
void tell(const std::function<void(const std::string&)>& hook, const std::string& line);

}  // namespace kvrank::app::detail

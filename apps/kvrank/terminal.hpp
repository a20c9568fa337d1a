// The terminal side of the command line: the progress bar and the log/error lines on stderr.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "kvrank/app/commands.hpp"

namespace kvrank::cli {

/// How progress is shown on stderr: a bar redrawn in place (a terminal), plain lines at a modest
/// rate (Slurm logs, nohup, notebooks), or nothing.
enum class ProgressMode { bar, plain, none };

/// The choices of `--progress`.
inline constexpr const char* kProgressChoices[] = {"auto", "bar", "plain", "none"};

/// `--progress auto|bar|plain|none`: auto is a bar when stderr is a terminal, plain lines
/// otherwise; -q (configure_logging) is none whatever was chosen.
ProgressMode progress_mode(const std::string& choice);

/// Progress over models, each a number of layers.
class Progress {
 public:
  explicit Progress(ProgressMode mode);
  ~Progress() { finish(); }

  /// Model `index` (0-based) of `models`, called `label`, starts.
  void start_model(std::size_t index, std::size_t models, const std::string& label);
  /// `done` of the current model's `total` layers are analysed.
  void update(int done, int total);
  /// Clears the bar (before any other line is printed, and at the end).
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  void draw_bar(int done, int total);
  void print_line(int done, int total);

  ProgressMode mode_;
  int models_ = 0;
  int model_ = 0;
  std::string label_;
  bool drawn_ = false;
  Clock::time_point started_ = Clock::now();
  Clock::time_point last_line_ = Clock::now();
};

/// Log lines on stderr ("kvrank: warning: ..."): -1 = warnings only (-q: no progress either),
/// 0 = info, 1 = debug.
void configure_logging(int verbosity);

/// The application layer's hooks on this terminal: notes, warnings and debug lines as log lines,
/// errors as print_error lines (after clearing `progress`'s bar), progress into `progress`.
app::Hooks terminal_hooks(Progress* progress = nullptr);

/// The one error line on stderr: "kvrank: error: <message>".
void print_error(const std::string& message);

}  // namespace kvrank::cli

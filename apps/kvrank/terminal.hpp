// The terminal side of the command line: the progress bar and the log/error lines on stderr.
#pragma once

#include <string>

namespace kvrank::cli {

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled);
  ~ProgressBar() { finish(); }

  void update(const std::string& label, int done, int total);
  void finish();

 private:
  bool enabled_;
  bool drawn_ = false;
};

/// Log lines on stderr ("kvrank: warning: ..."): -1 = warnings only, 0 = info, 1 = debug.
void configure_logging(int verbosity);

/// The one error line on stderr: "kvrank: error: <message>".
void print_error(const std::string& message);

}  // namespace kvrank::cli

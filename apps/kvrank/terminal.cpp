// The terminal side of the command line (terminal.hpp).
#include "terminal.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace kvrank::cli {

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {}

void ProgressBar::update(const std::string& label, int done, int total) {
  if (!enabled_ || total <= 0) return;
  constexpr int kWidth = 30;
  const int filled = done * kWidth / total;
  std::fprintf(stderr, "\r%-24.24s [%s%s] %d/%d layers", label.c_str(),
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), done, total);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_) std::fputs("\r\033[K", stderr);
  drawn_ = false;
}

void configure_logging(int verbosity) {
  auto logger = spdlog::stderr_color_st("kvrank");
  logger->set_pattern("kvrank: %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(verbosity < 0    ? spdlog::level::warn
                    : verbosity == 0 ? spdlog::level::info
                                     : spdlog::level::debug);
}

void print_error(const std::string& message) { std::cerr << "kvrank: error: " << message << "\n"; }

}  // namespace kvrank::cli

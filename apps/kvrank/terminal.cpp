// The terminal side of the command line (terminal.hpp).
#include "terminal.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "kvrank/base/text.hpp"

namespace kvrank::cli {
namespace {

/// The log pattern's `%*`: the message with control characters escaped (kvrank::printable), so a
/// label or tensor name in a log line cannot move the cursor or forge another line.
class PrintableMessage : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& message, const std::tm&,
              spdlog::memory_buf_t& out) override {
    const std::string text = printable({message.payload.data(), message.payload.size()});
    out.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<PrintableMessage>();
  }
};

}  // namespace

ProgressBar::ProgressBar(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {}

void ProgressBar::update(const std::string& label, int done, int total) {
  if (!enabled_ || total <= 0) return;
  constexpr int kWidth = 30;
  const int filled = done * kWidth / total;
  std::fprintf(stderr, "\r%-24.24s [%s%s] %d/%d layers", printable(label).c_str(),
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
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<PrintableMessage>('*').set_pattern("kvrank: %^%l%$: %*");
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(logger);
  spdlog::set_level(verbosity < 0    ? spdlog::level::warn
                    : verbosity == 0 ? spdlog::level::info
                                     : spdlog::level::debug);
}

// Escaped here too: a kvrank::Error is escaped already (printable() is idempotent), a CLI11 message
// that quotes an argument is not.
void print_error(const std::string& message) {
  std::cerr << "kvrank: error: " << printable(message) << "\n";
}

}  // namespace kvrank::cli

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

namespace {

// Plain lines come at most this often (and at the end of each model), so that a log of a long
// job stays readable.
constexpr auto kPlainLineInterval = std::chrono::seconds(10);

std::string seconds_text(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f s", seconds);
  return buffer;
}

bool quiet_logging = false;  // -q: configure_logging(-1)

}  // namespace

ProgressMode progress_mode(const std::string& choice) {
  if (quiet_logging || choice == "none") return ProgressMode::none;
  if (choice == "bar") return ProgressMode::bar;
  if (choice == "plain") return ProgressMode::plain;
  return isatty(STDERR_FILENO) ? ProgressMode::bar : ProgressMode::plain;
}

Progress::Progress(ProgressMode mode) : mode_(mode) {}

void Progress::start_model(std::size_t index, std::size_t models, const std::string& label) {
  model_ = static_cast<int>(index);
  models_ = static_cast<int>(models);
  label_ = printable(label);
}

void Progress::update(int done, int total) {
  if (total <= 0) return;
  if (mode_ == ProgressMode::bar) draw_bar(done, total);
  if (mode_ == ProgressMode::plain &&
      (done == total || Clock::now() - last_line_ >= kPlainLineInterval))
    print_line(done, total);
}

void Progress::draw_bar(int done, int total) {
  constexpr int kWidth = 30;
  const int filled = done * kWidth / total;
  std::fprintf(stderr, "\r%-24.24s [%s%s] %d/%d layers", label_.c_str(),
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(), done, total);
  drawn_ = true;
}

// "kvrank: model 2/5 mha: 8/12 layers, 41.0 s elapsed, ETA 61.5 s": the ETA assumes the models
// still to come take as long as the ones so far.
void Progress::print_line(int done, int total) {
  last_line_ = Clock::now();
  const double elapsed = std::chrono::duration<double>(last_line_ - started_).count();
  const double finished = model_ + static_cast<double>(done) / total;  // models' worth done
  std::string line = "kvrank: model " + std::to_string(model_ + 1) + "/" + std::to_string(models_) +
                     " " + label_ + ": " + std::to_string(done) + "/" + std::to_string(total) +
                     " layers, " + seconds_text(elapsed) + " elapsed";
  if (finished > 0 && finished < models_)
    line += ", ETA " + seconds_text(elapsed / finished * (models_ - finished));
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Progress::finish() {
  if (drawn_) std::fputs("\r\033[K", stderr);
  drawn_ = false;
}

void configure_logging(int verbosity) {
  auto logger = spdlog::stderr_color_st("kvrank");
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<PrintableMessage>('*').set_pattern("kvrank: %^%l%$: %*");
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(logger);
  quiet_logging = verbosity < 0;
  spdlog::set_level(verbosity < 0    ? spdlog::level::warn
                    : verbosity == 0 ? spdlog::level::info
                                     : spdlog::level::debug);
}

// Escaped here too: a kvrank::Error is escaped already (printable() is idempotent), a CLI11 message
// that quotes an argument is not.
void print_error(const std::string& message) {
  std::cerr << "kvrank: error: " << printable(message) << "\n";
}

app::Hooks terminal_hooks(Progress* progress) {
  app::Hooks hooks;
  hooks.info = [](const std::string& line) { spdlog::info("{}", line); };
  hooks.warning = [](const std::string& line) { spdlog::warn("{}", line); };
  hooks.debug = [](const std::string& line) { spdlog::debug("{}", line); };
  hooks.error = [progress](const std::string& line) {
    if (progress) progress->finish();
    print_error(line);
  };
  if (progress) {
    hooks.model_started = [progress](std::size_t index, std::size_t models,
                                     const std::string& label) {
      progress->start_model(index, models, label);
    };
    hooks.layers_done = [progress](int done, int total) { progress->update(done, total); };
  }
  return hooks;
}

}  // namespace kvrank::cli

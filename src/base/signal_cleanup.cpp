#include "base/signal_cleanup.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <mutex>

namespace kvrank::detail {
namespace {

constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};

// A few slots suffice: kvrank writes one output (and a PNG conversion one more) at a time.
std::array<std::atomic<const char*>, 8> temp_files{};
std::atomic<pid_t> child{0};
static_assert(std::atomic<const char*>::is_always_lock_free);
static_assert(std::atomic<pid_t>::is_always_lock_free);

void clean_up_and_reraise(int signal_number) {
  for (auto& slot : temp_files) {
    if (const char* path = slot.load()) ::unlink(path);
  }
  if (const pid_t pid = child.load(); pid > 0) ::kill(pid, SIGTERM);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(signal_number, &default_action, nullptr);
  ::raise(signal_number);  // delivered when the handler returns (the signal is blocked in it)
}

void install_handlers_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signal_number : kSignals) {
      struct sigaction current {};
      if (::sigaction(signal_number, nullptr, &current) != 0) continue;
      const bool is_default = !(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_DFL;
      if (!is_default) continue;  // ignored (nohup) or handled by someone else: left alone
      struct sigaction action {};
      action.sa_handler = clean_up_and_reraise;
      sigemptyset(&action.sa_mask);
      for (int other : kSignals) sigaddset(&action.sa_mask, other);  // one cleanup at a time
      ::sigaction(signal_number, &action, nullptr);
    }
  });
}

}  // namespace

bool register_temp_file(const std::string& path) {
  install_handlers_once();
  for (auto& slot : temp_files) {
    const char* empty = nullptr;
    if (slot.compare_exchange_strong(empty, path.c_str())) return true;
  }
  return false;
}

void unregister_temp_file(const std::string& path) {
  for (auto& slot : temp_files) {
    const char* mine = path.c_str();
    slot.compare_exchange_strong(mine, nullptr);
  }
}

void register_child(pid_t pid) {
  install_handlers_once();
  child.store(pid);
}

}  // namespace kvrank::detail

#include "base/guarded_read.hpp"

#include <setjmp.h>
#include <signal.h>

#include <cstring>

#include "kvrank/base/error.hpp"

namespace kvrank::detail {
namespace {

// The innermost guarded read of this thread (SIGBUS from a memory access goes to the thread that
// made it), or null.
thread_local sigjmp_buf* active_guard = nullptr;
struct sigaction previous_action {};

void on_sigbus(int signal, siginfo_t* info, void* /*context*/) {
  if (active_guard != nullptr) siglongjmp(*active_guard, 1);
  // Not a guarded read: hand the signal back to whoever handled it before (the default action
  // or a sanitizer). A faulting access runs again on return and faults again; a sent signal is
  // sent again.
  sigaction(SIGBUS, &previous_action, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(signal);
}

void install_handler_once() noexcept {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    // SA_NODEFER: SIGBUS stays unblocked in the handler, so the jump out of it leaves the signal
    // mask as it was and run_guarded need not save and restore it (a system call per read).
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGBUS, &action, &previous_action) == 0;
  }();
  (void)installed;
}

}  // namespace

bool run_guarded(void (*read)(void*), void* context) noexcept {
  install_handler_once();
  sigjmp_buf guard;
  sigjmp_buf* const outer = active_guard;
  // savemask = 0: the handler runs with SIGBUS unblocked (SA_NODEFER), nothing to restore.
  if (sigsetjmp(guard, 0) != 0) {
    active_guard = outer;
    return false;
  }
  active_guard = &guard;
  read(context);
  active_guard = outer;
  return true;
}

std::string guarded_text_copy(std::span<const std::byte> bytes, const std::string& file_name) {
  std::string text(bytes.size(), '\0');
  char* out = text.data();
  const bool complete = guarded_read([&] {
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
  });
  if (!complete) throw Error(file_name, kFileShrank);
  return text;
}

}  // namespace kvrank::detail

// fit_library_threads_at_start: runs from the command line's .preinit_array, before any shared
// library's constructor and before the C library sets `environ` (getenv finds nothing yet, and a
// setenv would be undone when it does), so the environment is read from `envp` and passed on with
// execve, and only fixed buffers and system calls are used.

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/memory_limit_text.hpp"
#include "kvrank/base/memory_limit.hpp"

namespace kvrank {
namespace {

// OpenBLAS's OpenMP build starts OMP_NUM_THREADS threads; its pthreads build OPENBLAS_NUM_THREADS,
// else GOTO_NUM_THREADS, else OMP_NUM_THREADS. Both stop at the processors this process may use.
constexpr const char* kThreadVariables[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                            "GOTO_NUM_THREADS"};

/// The value of `name` in `envp`, nullptr when absent.
const char* env_value(char** envp, const char* name) noexcept {
  const std::size_t length = std::strlen(name);
  for (char** entry = envp; entry != nullptr && *entry != nullptr; ++entry) {
    if (std::strncmp(*entry, name, length) == 0 && (*entry)[length] == '=')
      return *entry + length + 1;
  }
  return nullptr;
}

/// The thread count `name` in `envp` asks for, 0 when unset or not a positive number.
int env_threads(char** envp, const char* name) noexcept {
  return detail::parse_thread_count(env_value(envp, name));
}

/// The most threads OpenBLAS (either build) would start with this environment.
int threads_libraries_start(char** envp, int processors) noexcept {
  int threads = env_threads(envp, "OMP_NUM_THREADS");
  if (threads == 0) threads = processors;
  for (const char* name : kThreadVariables) threads = std::max(threads, env_threads(envp, name));
  return std::min(threads, processors);
}

[[noreturn]] void exit_too_small(std::uint64_t limit, std::uint64_t in_use) noexcept {
  char message[512];
  detail::format_too_small(message, sizeof message, "ulimit -v", limit, in_use, kBlasBufferBytes,
                           "OpenBLAS's first buffer");
  char line[600];
  const int length = std::snprintf(line, sizeof line, "kvrank: error: %s\n", message);
  if (length > 0) (void)!::write(STDERR_FILENO, line, static_cast<std::size_t>(length));
  ::_exit(2);  // invalid input or usage: nothing usable (apps/kvrank/main.cpp)
}

/// Whether the environment entry `entry` ("NAME=value") sets `name`.
bool sets(const char* entry, const char* name) noexcept {
  const std::size_t length = std::strlen(name);
  return std::strncmp(entry, name, length) == 0 && entry[length] == '=';
}

/// Whether start_again_with replaces the environment entry `entry`.
bool replaced(const char* entry) noexcept {
  if (sets(entry, detail::kThreadsFittedVariable)) return true;  // one inherited from elsewhere
  for (const char* name : kThreadVariables) {
    if (sets(entry, name)) return true;
  }
  return false;
}

/// execve of this program with each thread variable at most `threads`, and the marker.
void start_again_with(char** argv, char** envp, int threads) noexcept {
  static char marker[64];
  if (!detail::own_process_marker(marker, sizeof marker)) return;  // no /proc: nothing to execute
  std::size_t count = 0;
  while (envp[count] != nullptr) ++count;
  auto** env = static_cast<char**>(std::malloc((count + 5) * sizeof(char*)));
  if (env == nullptr) return;
  static char settings[4][96];
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (!replaced(envp[i])) env[kept++] = envp[i];
  }
  int slot = 0;
  for (const char* name : kThreadVariables) {
    const int current = env_threads(envp, name);
    if (current == 0 && std::strcmp(name, "GOTO_NUM_THREADS") == 0) continue;  // never needed
    std::snprintf(settings[slot], sizeof settings[slot], "%s=%d", name,
                  current == 0 ? threads : std::min(current, threads));
    env[kept++] = settings[slot++];
  }
  std::snprintf(settings[slot], sizeof settings[slot], "%s=%s", detail::kThreadsFittedVariable,
                marker);
  env[kept++] = settings[slot];
  env[kept] = nullptr;
  ::execve("/proc/self/exe", argv, env);
  std::free(env);  // no /proc: start as we are, fit_compute_threads still sizes the threads
}

}  // namespace

void fit_library_threads_at_start(int /*argc*/, char** argv, char** envp) noexcept {
  // The second start: the marker this process wrote before it executed itself again. A marker
  // inherited from another process (a parent kvrank, a job script) does not count.
  if (envp == nullptr ||
      detail::is_own_process_marker(env_value(envp, detail::kThreadsFittedVariable)))
    return;
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return;
  const auto bytes = static_cast<std::uint64_t>(limit.rlim_cur);
  // The libraries are mapped now, and their constructors have not run yet.
  const std::uint64_t in_use = process_status_bytes("VmSize") + kWorkingReserve;
  // Starting needs one OpenBLAS buffer; computing (analyze) needs a whole thread, which
  // fit_compute_threads checks, so that merge, plot and check still run in less. The message
  // quotes what starting needs.
  if (threads_that_fit(bytes, in_use, kBlasBufferBytes, 1) == 0) exit_too_small(bytes, in_use);
  const int starting = threads_libraries_start(envp, detail::usable_processors());
  const int fitting = std::max(compute_threads_that_fit(bytes, in_use, starting), 1);
  if (fitting < starting) start_again_with(argv, envp, fitting);
}

}  // namespace kvrank

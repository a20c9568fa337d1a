#include "kvrank/base/memory_limit.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/memory_limit_text.hpp"
#include "kvrank/base/error.hpp"

namespace kvrank {

namespace detail {

void format_byte_size(char* out, std::size_t size, std::uint64_t bytes) noexcept {
  constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
  if (bytes >= kGiB && bytes % kGiB != 0) {
    std::snprintf(out, size, "%.1f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  } else if (bytes >= kGiB) {
    std::snprintf(out, size, "%" PRIu64 " GiB", bytes / kGiB);
  } else {
    std::snprintf(out, size, "%" PRIu64 " MiB", (bytes + kMiB - 1) / kMiB);
  }
}

void format_too_small(char* out, std::size_t size, const char* source, std::uint64_t limit,
                      std::uint64_t in_use, std::uint64_t per_thread) noexcept {
  char limit_text[32], need_text[32], in_use_text[32], thread_text[32];
  format_byte_size(limit_text, sizeof limit_text, limit);
  format_byte_size(need_text, sizeof need_text, in_use + per_thread);
  format_byte_size(in_use_text, sizeof in_use_text, in_use);
  format_byte_size(thread_text, sizeof thread_text, per_thread);
  std::snprintf(out, size,
                "memory limit %s (%s) is too small: kvrank needs %s with one thread (%s for the "
                "program and the analysis, %s per thread); raise the limit",
                limit_text, source, need_text, in_use_text, thread_text);
}

int parse_thread_count(const char* value) noexcept {
  if (value == nullptr) return 0;
  const long threads = std::strtol(value, nullptr, 10);
  return threads > 0 && threads < 1 << 20 ? static_cast<int>(threads) : 0;
}

int usable_processors() noexcept {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return static_cast<int>(std::max(::sysconf(_SC_NPROCESSORS_ONLN), 1L));
}

}  // namespace detail

int threads_that_fit(std::uint64_t limit, std::uint64_t in_use, std::uint64_t per_thread,
                     int requested) {
  const int wanted = std::max(requested, 1);
  if (in_use >= limit) return 0;
  if (per_thread == 0) return wanted;
  const std::uint64_t room = (limit - in_use) / per_thread;
  return static_cast<int>(std::min<std::uint64_t>(room, static_cast<std::uint64_t>(wanted)));
}

std::optional<MemoryLimit> address_space_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return MemoryLimit{static_cast<std::uint64_t>(limit.rlim_cur), "ulimit -v", true};
}

std::optional<std::uint64_t> parse_cgroup_limit(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty() || text.size() > 20 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;  // "max" (v2) and anything unexpected
  const std::uint64_t value = std::strtoull(std::string(text).c_str(), nullptr, 10);
  // cgroup v1 writes "no limit" as the largest page-aligned signed 64-bit value.
  if (value >= (std::uint64_t{1} << 62)) return std::nullopt;
  return value;
}

namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

/// The cgroup folders whose limits apply to this process, innermost first: its own (from
/// /proc/self/cgroup) and each above it, under the v2 mount and the v1 memory mount. In a
/// container the mounts show the container's cgroup at their root, so the root files count too.
std::vector<std::string> cgroup_limit_files() {
  std::vector<std::string> files;
  std::istringstream lines(read_small_file("/proc/self/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    // "0::/path" (v2) or "N:memory:/path" (v1; controllers may be listed together)
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    std::string path = line.substr(second + 1);
    std::string mount, file;
    if (controllers.empty()) {
      mount = "/sys/fs/cgroup", file = "memory.max";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      mount = "/sys/fs/cgroup/memory", file = "memory.limit_in_bytes";
    } else {
      continue;
    }
    for (;;) {
      files.push_back(mount + (path == "/" ? "" : path) + "/" + file);
      if (path.empty() || path == "/") break;
      path = path.substr(0, std::max<std::size_t>(path.rfind('/'), 1));
    }
  }
  return files;
}

}  // namespace

std::optional<MemoryLimit> cgroup_memory_limit() {
  std::optional<MemoryLimit> smallest;
  for (const std::string& file : cgroup_limit_files()) {
    const auto bytes = parse_cgroup_limit(read_small_file(file));
    if (bytes && (!smallest || *bytes < smallest->bytes))
      smallest = MemoryLimit{*bytes, file, false};
  }
  return smallest;
}

std::uint64_t process_status_bytes(const char* field) {
  const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[4096];
  const ssize_t size = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (size <= 0) return 0;
  text[size] = '\0';
  const std::size_t length = std::strlen(field);
  for (const char* line = text; line != nullptr && *line != '\0';) {
    if (std::strncmp(line, field, length) == 0 && line[length] == ':')
      return std::strtoull(line + length + 1, nullptr, 10) * 1024;  // "VmSize:   350928 kB"
    line = std::strchr(line, '\n');
    if (line != nullptr) ++line;
  }
  return 0;
}

std::string byte_size_text(std::uint64_t bytes) {
  char text[32];
  detail::format_byte_size(text, sizeof text, bytes);
  return text;
}

namespace {

/// Fits `fit` to one limit: `in_use` bytes taken, `per_thread` each.
void fit_to(ThreadFit& fit, const MemoryLimit& limit, std::uint64_t in_use,
            std::uint64_t per_thread) {
  const int threads = threads_that_fit(limit.bytes, in_use, per_thread, fit.threads);
  if (threads == 0) {
    char message[512];
    detail::format_too_small(message, sizeof message, limit.source.c_str(), limit.bytes, in_use,
                             per_thread);
    throw Error("", message);
  }
  if (threads == fit.threads) return;
  fit.reason = std::to_string(threads) + " compute thread(s) fit in the memory limit " +
               byte_size_text(limit.bytes) + " (" + limit.source + "), " +
               byte_size_text(per_thread) + " each";
  fit.threads = threads;
}

}  // namespace

ThreadFit fit_compute_threads(int requested, int blas_buffers_held) {
  ThreadFit fit{std::max(requested, 1), ""};
  if (const auto limit = address_space_limit()) {
    // The buffers OpenBLAS already holds are part of kThreadAddressSpace, not extra.
    const std::uint64_t held =
        static_cast<std::uint64_t>(std::max(blas_buffers_held, 0)) * kBlasBufferBytes;
    const std::uint64_t mapped = process_status_bytes("VmSize");
    fit_to(fit, *limit, (mapped > held ? mapped - held : 0) + kWorkingReserve, kThreadAddressSpace);
  }
  if (const auto limit = cgroup_memory_limit()) {
    fit_to(fit, *limit, process_status_bytes("VmRSS") + kWorkingReserve, kThreadResident);
  }
  return fit;
}

std::string out_of_memory_message() {
  std::string limits;
  for (const auto& limit : {address_space_limit(), cgroup_memory_limit()}) {
    if (limit)
      limits +=
          (limits.empty() ? "" : ", ") + byte_size_text(limit->bytes) + " (" + limit->source + ")";
  }
  if (limits.empty()) return "out of memory";
  return "out of memory under the memory limit " + limits + "; raise it";
}

}  // namespace kvrank

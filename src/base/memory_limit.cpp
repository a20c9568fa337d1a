#include "kvrank/base/memory_limit.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/memory_limit_text.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/text.hpp"

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
                      std::uint64_t in_use, std::uint64_t extra, const char* extra_use) noexcept {
  char limit_text[32], need_text[32], in_use_text[32], extra_text[32];
  format_byte_size(limit_text, sizeof limit_text, limit);
  format_byte_size(need_text, sizeof need_text, in_use + extra);
  format_byte_size(in_use_text, sizeof in_use_text, in_use);
  format_byte_size(extra_text, sizeof extra_text, extra);
  std::snprintf(out, size,
                "memory limit %s (%s) is too small: kvrank needs %s (%s for the program and the "
                "analysis, %s for %s); raise the limit",
                limit_text, source, need_text, in_use_text, extra_text, extra_use);
}

namespace {

/// "PID:START" of this process into `out` (see own_process_marker); false when /proc/self/stat
/// cannot be read. System calls and fixed buffers only: it runs before the C library starts.
bool write_process_marker(char* out, std::size_t size) noexcept {
  const int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[1024];
  const ssize_t length = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (length <= 0) return false;
  text[length] = '\0';
  // "PID (COMMAND) STATE PPID ...": the command may hold spaces and parentheses, so the fields
  // are counted from its last ')'; the start time is field 22, the 20th after it.
  const char* field = std::strrchr(text, ')');
  for (int skipped = 0; field != nullptr && skipped < 20; ++skipped) {
    field = std::strchr(field + 1, ' ');
  }
  if (field == nullptr) return false;
  const unsigned long long start = std::strtoull(field + 1, nullptr, 10);
  const int written = std::snprintf(out, size, "%ld:%llu", static_cast<long>(::getpid()), start);
  return written > 0 && static_cast<std::size_t>(written) < size;
}

}  // namespace

bool own_process_marker(char* out, std::size_t size) noexcept {
  return write_process_marker(out, size);
}

bool is_own_process_marker(const char* value) noexcept {
  char own[64];
  return value != nullptr && write_process_marker(own, sizeof own) && std::strcmp(value, own) == 0;
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

std::uint64_t compute_threads_address_space(int threads) {
  const auto extra = static_cast<std::uint64_t>(std::max(threads, 1) - 1);
  return kFirstThreadAddressSpace + extra * kThreadAddressSpace;
}

int compute_threads_that_fit(std::uint64_t limit, std::uint64_t in_use, int requested) {
  if (in_use >= limit || limit - in_use < kFirstThreadAddressSpace) return 0;
  if (requested <= 1) return 1;
  // Each thread beside the calling one: its buffers, a stack and a malloc arena.
  const std::uint64_t after_first = in_use + kFirstThreadAddressSpace;
  return 1 + threads_that_fit(limit, after_first, kThreadAddressSpace, requested - 1);
}

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

std::optional<std::uint64_t> parse_memory_size(std::string_view text) noexcept {
  int shift = 0;
  if (!text.empty()) {
    const std::string_view units = "KMGT";
    const char last = static_cast<char>(text.back() & ~0x20);  // upper case for letters
    if (const auto unit = units.find(last); unit != std::string_view::npos) {
      shift = 10 * static_cast<int>(unit + 1);
      text.remove_suffix(1);
    }
  }
  const std::optional<std::int64_t> value = decimal_value(text);
  if (!value || *value == 0) return std::nullopt;
  const auto bytes = static_cast<std::uint64_t>(*value);
  if (shift > 0 && bytes > (~std::uint64_t{0} >> shift)) return std::nullopt;
  return bytes << shift;
}

std::optional<MemoryLimit> stated_memory_limit() {
  const char* value = std::getenv(kMemoryLimitVariable);
  if (value == nullptr) return std::nullopt;
  const std::optional<std::uint64_t> bytes = parse_memory_size(value);
  if (!bytes)
    throw Error("", std::string(kMemoryLimitVariable) + "=\"" + excerpt(value) +
                        "\": expected a size in bytes, or with a suffix K, M, G or T (powers of "
                        "1024), e.g. 16G");
  return MemoryLimit{*bytes, kMemoryLimitVariable, false};
}

std::optional<MemoryLimit> resident_memory_limit() {
  std::optional<MemoryLimit> limit = cgroup_memory_limit();
  const std::optional<MemoryLimit> stated = stated_memory_limit();
  if (stated && (!limit || stated->bytes < limit->bytes)) limit = stated;
  return limit;
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

/// The one-line reason why not even one compute thread fits under `limit`.
[[noreturn]] void throw_too_small(const MemoryLimit& limit, std::uint64_t in_use,
                                  std::uint64_t first_thread) {
  char message[512];
  detail::format_too_small(message, sizeof message, limit.source.c_str(), limit.bytes, in_use,
                           first_thread, "one compute thread");
  throw Error("", message);
}

/// Lowers `fit` to `threads` when fewer fit under `limit`, saying why.
void lower_to(ThreadFit& fit, int threads, const MemoryLimit& limit, std::uint64_t per_thread) {
  if (threads >= fit.threads) return;
  fit.reason = std::to_string(threads) + " compute thread(s) fit in the memory limit " +
               byte_size_text(limit.bytes) + " (" + limit.source + "), " +
               byte_size_text(per_thread) + " each";
  fit.threads = threads;
}

}  // namespace

ThreadFit fit_compute_threads(int requested, int blas_buffers_held) {
  ThreadFit fit{std::max(requested, 1), ""};
  if (const auto limit = address_space_limit()) {
    // The buffers OpenBLAS already holds are part of the threads' cost, not extra.
    const std::uint64_t held =
        static_cast<std::uint64_t>(std::max(blas_buffers_held, 0)) * kBlasBufferBytes;
    const std::uint64_t mapped = process_status_bytes("VmSize");
    const std::uint64_t in_use = (mapped > held ? mapped - held : 0) + kWorkingReserve;
    const int threads = compute_threads_that_fit(limit->bytes, in_use, fit.threads);
    if (threads == 0) throw_too_small(*limit, in_use, kFirstThreadAddressSpace);
    lower_to(fit, threads, *limit, kThreadAddressSpace);
  }
  if (const auto limit = resident_memory_limit()) {
    const std::uint64_t in_use = process_status_bytes("VmRSS") + kWorkingReserve;
    const int threads = threads_that_fit(limit->bytes, in_use, kThreadResident, fit.threads);
    if (threads == 0) throw_too_small(*limit, in_use, kThreadResident);
    lower_to(fit, threads, *limit, kThreadResident);
  }
  return fit;
}

namespace {
std::atomic<std::uint64_t> promised_bytes{0};
}  // namespace

MemoryPromise::MemoryPromise(std::uint64_t bytes) noexcept : bytes_(bytes) {
  promised_bytes += bytes_;
}

MemoryPromise::~MemoryPromise() { promised_bytes -= bytes_; }

std::optional<MemoryRoom> memory_room() {
  std::optional<MemoryRoom> room;
  const std::uint64_t promised = promised_bytes.load();
  auto consider = [&room, promised](const std::optional<MemoryLimit>& limit, std::uint64_t used) {
    if (!limit) return;
    const std::uint64_t in_use = used + promised;
    const std::uint64_t free = limit->bytes > in_use ? limit->bytes - in_use : 0;
    if (!room || free < room->free) room = MemoryRoom{free, *limit};
  };
  const auto address_space = address_space_limit();
  if (address_space) consider(address_space, process_status_bytes("VmSize"));
  // Resident memory: the anonymous part; pages of the mapped checkpoints can be dropped again.
  const auto resident = resident_memory_limit();
  if (resident) consider(resident, process_status_bytes("RssAnon"));
  return room;
}

void require_memory(std::uint64_t bytes, const std::string& what) {
  const std::optional<MemoryRoom> room = memory_room();
  if (!room || bytes <= room->free) return;
  throw Error("", "memory limit " + byte_size_text(room->limit.bytes) + " (" + room->limit.source +
                      ") is too small for " + what + ": " + byte_size_text(bytes) +
                      " more needed, " + byte_size_text(room->free) + " free; raise the limit");
}

bool memory_fits(std::uint64_t bytes) {
  const std::optional<MemoryRoom> room = memory_room();
  return !room || bytes <= room->free;
}

std::string out_of_memory_message() {
  std::optional<MemoryLimit> stated;
  try {
    stated = stated_memory_limit();
  } catch (const Error&) {  // refused when the threads were fitted, before any allocation
  }
  std::string limits;
  for (const auto& limit : {address_space_limit(), cgroup_memory_limit(), stated}) {
    if (limit)
      limits +=
          (limits.empty() ? "" : ", ") + byte_size_text(limit->bytes) + " (" + limit->source + ")";
  }
  if (limits.empty()) return "out of memory";
  return "out of memory under the memory limit " + limits + "; raise it";
}

}  // namespace kvrank

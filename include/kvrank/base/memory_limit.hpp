// The memory limits kvrank runs under, and how many compute threads fit in them
// (docs/input-limits.md, "Memory limits").
//
// Under an address-space limit (`ulimit -v`, RLIMIT_AS; Slurm passes it on to jobs) every thread
// costs address space whether it touches it or not, and the libraries do not fail cleanly when it
// runs out: OpenBLAS retries a failed buffer allocation forever (a hang), libgomp exits 1 when it
// cannot create a thread. So the thread count is sized to the limit twice:
//  - before any library starts (fit_library_threads_at_start, from the command line's
//    .preinit_array): OpenBLAS maps one buffer per thread in its constructor, so when more threads
//    than fit would start, kvrank executes itself again with OMP_NUM_THREADS and
//    OPENBLAS_NUM_THREADS set to the count that fits; when not even one fits it exits 2;
//  - when the compute threads are set (fit_compute_threads, from set_compute_threads): with the
//    address space actually in use then, and the cgroup memory limit too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvrank {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

/// Address space one compute thread can take: two OpenBLAS buffers (Debian 12's 0.3.21 maps
/// 128 MiB for each of its threads when it is loaded, and one more for each thread that calls it),
/// a thread stack (8 MiB) and a malloc arena (64 MiB). Measured: docs/input-limits.md.
inline constexpr std::uint64_t kThreadAddressSpace = 2 * 128 * kMiB + 8 * kMiB + 64 * kMiB;
/// One OpenBLAS buffer (the first part of kThreadAddressSpace).
inline constexpr std::uint64_t kBlasBufferBytes = 128 * kMiB;
/// Address space the first compute thread (the calling one) takes: its two OpenBLAS buffers. Its
/// stack and the main malloc arena exist before it computes.
inline constexpr std::uint64_t kFirstThreadAddressSpace = 2 * kBlasBufferBytes;
/// Memory one compute thread can keep resident (what a cgroup limit counts): the parts of its
/// buffer that packing touches and its stack.
inline constexpr std::uint64_t kThreadResident = 32 * kMiB;
/// Kept free besides the threads, for the analysis itself (one layer's float32 copies, results).
inline constexpr std::uint64_t kWorkingReserve = 64 * kMiB;

/// The most threads, at most `requested`, each costing `per_thread` bytes, that fit in `limit`
/// bytes beside `in_use` bytes: 0 when not even one does. `requested` < 1 is taken as 1.
int threads_that_fit(std::uint64_t limit, std::uint64_t in_use, std::uint64_t per_thread,
                     int requested);

/// Address space `threads` (≥ 1) compute threads take: kFirstThreadAddressSpace, and
/// kThreadAddressSpace for each beside the calling thread.
std::uint64_t compute_threads_address_space(int threads);

/// The most compute threads, at most `requested`, whose compute_threads_address_space() fits in
/// `limit` bytes beside `in_use`: 0 when not even the first does.
int compute_threads_that_fit(std::uint64_t limit, std::uint64_t in_use, int requested);

/// A limit on this process's memory, where it was found, and what it counts.
struct MemoryLimit {
  std::uint64_t bytes = 0;
  std::string source;         ///< "ulimit -v", or the cgroup file it was read from
  bool address_space = true;  ///< RLIMIT_AS counts every mapping; a cgroup resident memory
};

/// The address-space limit (RLIMIT_AS, soft), nullopt when unlimited.
std::optional<MemoryLimit> address_space_limit();

/// The smallest cgroup memory limit over this process's cgroup and the ones above it (v2
/// memory.max, v1 memory.limit_in_bytes; a Slurm job sets it on the job's cgroup, above the
/// task's), nullopt when none is set or none can be read.
std::optional<MemoryLimit> cgroup_memory_limit();

/// A cgroup limit file's value: bytes, or nullopt for "max", v1's "no limit" (≥ 2^62) and text
/// that is not a number.
std::optional<std::uint64_t> parse_cgroup_limit(std::string_view text);

/// The environment variable that states the memory kvrank must fit in, for limits the process
/// cannot see: a batch system that polls the job's resident memory and kills it when over (PBS,
/// LSF, Slurm's JobAcctGather without a cgroup), or a sanitizer build, where RLIMIT_AS cannot
/// apply. Counted like a cgroup limit, against resident memory; the smallest limit found counts.
inline constexpr const char* kMemoryLimitVariable = "KVRANK_MEMORY_LIMIT";

/// A memory size: decimal digits, optionally followed by one of K, M, G, T (powers of 1024, either
/// case), as Slurm's --mem writes it: "16G", "16384M", "17179869184". nullopt for anything else
/// (an empty text, spaces, a sign, "1.5G", "16GB"), for 0, and past 2^64 − 1 bytes.
std::optional<std::uint64_t> parse_memory_size(std::string_view text) noexcept;

/// The limit KVRANK_MEMORY_LIMIT states (resident memory, source "KVRANK_MEMORY_LIMIT"), nullopt
/// when the variable is unset. Throws kvrank::Error naming the variable for a value that
/// parse_memory_size refuses, an empty one too (an unset scheduler variable must not mean "no
/// limit").
std::optional<MemoryLimit> stated_memory_limit();

/// The smaller of cgroup_memory_limit() and stated_memory_limit(): the limit on resident memory.
std::optional<MemoryLimit> resident_memory_limit();

/// A field in kB of /proc/self/status (VmSize, VmRSS) in bytes, 0 when it cannot be read.
std::uint64_t process_status_bytes(const char* field);

/// "640 MiB", "1.5 GiB": a size for messages.
std::string byte_size_text(std::uint64_t bytes);

/// The compute thread count for `requested` threads under this process's memory limits.
struct ThreadFit {
  int threads = 0;     ///< ≥ 1
  std::string reason;  ///< why fewer than requested, empty when all fit
};

/// Sizes `requested` (≥ 1) compute threads to the address-space and resident (cgroup,
/// KVRANK_MEMORY_LIMIT) limits.
/// `blas_buffers_held` OpenBLAS buffers are already mapped and are counted as part of the threads,
/// not as in use; the address space is fitted with compute_threads_that_fit. Throws kvrank::Error
/// when not even one thread fits, saying which limit was found and what one thread needs.
ThreadFit fit_compute_threads(int requested, int blas_buffers_held);

/// The room left under the tightest of this process's memory limits: the address-space limit less
/// VmSize, the resident limit (cgroup or KVRANK_MEMORY_LIMIT) less the anonymous resident memory
/// (RssAnon), each less what MemoryPromises hold. nullopt without limits.
struct MemoryRoom {
  std::uint64_t free = 0;
  MemoryLimit limit;  ///< the limit that leaves the least room
};
std::optional<MemoryRoom> memory_room();

/// Memory promised to work already started but not done allocating (a thread compiling oneDNN's
/// kernels aside, gram_backend.hpp): while it is held, memory_room() leaves it out of the room, so
/// that a step sized meanwhile does not count on it. Promises add up; each lasts its lifetime.
class MemoryPromise {
 public:
  explicit MemoryPromise(std::uint64_t bytes) noexcept;
  ~MemoryPromise();
  MemoryPromise(const MemoryPromise&) = delete;
  MemoryPromise& operator=(const MemoryPromise&) = delete;

 private:
  std::uint64_t bytes_;
};

/// Throws kvrank::Error ("memory limit 1.2 GiB (ulimit -v) is too small for WHAT: 147 MiB more
/// needed, 55 MiB free; raise the limit") when `bytes` more
/// do not fit in memory_room(). For sizing a step before it starts: libraries that cannot fail
/// cleanly (OpenBLAS retries a failed allocation forever, oneDNN may crash) must not meet the
/// limit.
void require_memory(std::uint64_t bytes, const std::string& what);

/// Whether `bytes` more fit in memory_room() (always without limits).
bool memory_fits(std::uint64_t bytes);

/// The message for an allocation that failed: names the memory limits found, if any.
std::string out_of_memory_message();

/// Run before any shared library's constructor (the command line's .preinit_array; the C library
/// is not initialised yet, so it reads `envp`, never getenv): under an address-space limit in
/// which fewer threads fit than the libraries would start, executes /proc/self/exe again with
/// OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set to the count that fits (once: the variable
/// KVRANK_THREADS_FITTED, holding this process's id and start time, marks the second start; the
/// variable inherited with another value is ignored and replaced); when not even OpenBLAS's first
/// buffer fits, prints one line quoting that need and exits 2.
void fit_library_threads_at_start(int argc, char** argv, char** envp) noexcept;

}  // namespace kvrank

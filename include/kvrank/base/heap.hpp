// How the process's heap treats the large buffers kvrank frees after each layer.
#pragma once

namespace kvrank {

/// Keeps the memory kvrank frees for its own next allocations instead of handing it back to the
/// system (glibc: no mmap for large blocks, no trimming of the heap's top). Each layer allocates
/// the same large buffers as the one before — converted weights, per-head coefficients, hundreds
/// of MB for DeepSeek-V3 — and a fresh mapping costs a page fault (and the kernel's zeroing) per
/// 4 KiB page, on a VM several microseconds each. Reused, the second layer onward fault almost
/// nothing; the peak stays the one layer's (docs/performance.md). A process-wide choice, so the
/// command line makes it at start; a program embedding the library may call it too. The Python
/// module does not: in a notebook's process it would keep every large block that anything frees
/// (numpy's, torch's) for the life of the process. Returns whether
/// it took effect: false without glibc's allocator (a sanitizer's replaces it).
bool reuse_freed_memory() noexcept;

}  // namespace kvrank

// The compute threads, sized to the memory limits the process runs under (memory_limit.hpp).
#pragma once

#include "kvrank/base/memory_limit.hpp"

namespace kvrank {

/// Sets the number of threads used by the BLAS and by kvrank's own loops (0 = all cores), at most
/// as many as fit in the process's memory limits (fit_compute_threads), and returns the count set
/// and why it is smaller than asked. Throws kvrank::Error when not even one fits.
/// set_compute_threads (diversity.hpp) is this without the answer.
ThreadFit apply_compute_threads(int threads);

}  // namespace kvrank

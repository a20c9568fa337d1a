// Threads and the description of what runs the products (see compute.hpp); the BLAS behind them is
// metric/blas.hpp's.
#include "kvrank/metric/compute.hpp"

#include <algorithm>
#include <thread>

#include "kvrank/base/error.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "metric/blas.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank {

ThreadFit apply_compute_threads(int threads) {
  const int asked = threads > 0 ? threads : detail::default_thread_count();
  const ThreadFit fit = fit_compute_threads(asked, detail::blas_buffers_held());
  detail::set_thread_count(fit.threads);
  if (address_space_limit()) detail::map_thread_memory(fit.threads);
  return fit;
}

void set_compute_threads(int threads) { apply_compute_threads(threads); }

CallingThreadOnly::CallingThreadOnly(bool engaged) {
  if (!engaged) return;
  const detail::HeldThreads held = detail::hold_calling_thread();
  saved_openmp_ = held.openmp;
  saved_blas_ = held.blas;
}

CallingThreadOnly::~CallingThreadOnly() {
  detail::release_calling_thread({saved_openmp_, saved_blas_});
}

LayerThreads::LayerThreads(std::int64_t weight_elements)
    : calling_thread_only_(weight_elements < kThreadedLayerWeights) {
  if (weight_elements >= kThreadedLayerWeights) detail::place_thread_pool();
}

void check_thread_count(int threads) {
  if (threads < 0)
    throw Error("", "--threads " + std::to_string(threads) + ": expected 0 (all cores) or more");
  const unsigned processors = std::max(1u, std::thread::hardware_concurrency());
  const long long limit = 4LL * processors;
  if (threads > limit)
    throw Error("", "--threads " + std::to_string(threads) + ": at most " + std::to_string(limit) +
                        " (4 × the " + std::to_string(processors) + " processors of this machine)");
}

std::string compute_backend_description() {
  const std::string text =
      detail::openblas_kernels().value_or("Eigen's own products (no OpenBLAS)");
  return text + "; " + gram_backend_description();
}

std::optional<std::string> generic_blas_kernels_advice() {
  // Without OpenBLAS there is no variable to set.
  if (!detail::openblas_kernels() || !detail::blas_kernels_are_generic()) return std::nullopt;
  // On oneDNN's float32 kernels (gram_backend.hpp) the run is already about as fast.
  if (float_products_on_onednn()) return std::nullopt;
  const bool avx512 = detail::cpu_has_avx512();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!avx2 && !avx512) return std::nullopt;  // Prescott is the right choice there
  // SkylakeX and Haswell are the float kernels OpenBLAS runs on every CPU it knows with AVX-512,
  // respectively AVX2 (its Cooperlake and Sapphire Rapids targets differ only in bf16 routines).
  return std::string(
             "OpenBLAS does not recognise this CPU and runs its generic Prescott kernels, "
             "3-5x slower than the CPU allows; set OPENBLAS_CORETYPE=") +
         (avx512 ? "SkylakeX" : "Haswell") + " to use its " + (avx512 ? "AVX-512" : "AVX2") +
         " kernels";
}

}  // namespace kvrank

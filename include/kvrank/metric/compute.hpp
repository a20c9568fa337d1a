// Compute state: how many threads the products use, what runs them, and the buffers one layer
// leaves to the next.
//
//   set_compute_threads(2);      // BLAS, kvrank's loops and oneDNN: one pool
//   ComputeWorkspace workspace;  // owned by the layer loop
//   for (int layer = 0; layer < layout.num_layers; ++layer)
//     use(analyze_layer(layer_factors(ckpt, layout, layer, Repr::qk), workspace));
// (this example is compiled and run by tests/header_examples_test.cpp)
//
// Threads. kvrank links OpenBLAS's OpenMP build when it is found, so BLAS, kvrank's own parallel
// loops and oneDNN share libgomp's threads: set_compute_threads() sets the one count all of them
// use. It is process-wide because that pool is (OpenMP's and OpenBLAS's own settings are). A
// layer too small to gain from them runs on the calling thread alone (LayerThreads).
//
// Workspace. A layer's Grams are as large as the layer's weights (m × m floats per side), and an
// MLA layer's contraction needs hundreds of MB more; allocated afresh, every layer pays the page
// faults of them again. A ComputeWorkspace keeps them: a loop over layers of one shape allocates
// once. It is not shared between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kvrank/base/eigen.hpp"
#include "kvrank/base/memory_limit.hpp"

namespace kvrank {

/// Sets the number of threads used by the BLAS and by kvrank's own loops (0 = all cores), at
/// most as many as fit in the memory limits (apply_compute_threads).
void set_compute_threads(int threads);

/// set_compute_threads(), at most as many threads as fit in the process's memory limits
/// (fit_compute_threads, memory_limit.hpp), returning the count set and why it is smaller than
/// asked. Throws kvrank::Error when not even one fits.
ThreadFit apply_compute_threads(int threads);

/// The attention weights a layer needs before it runs on more than the calling thread: below
/// this, a second thread never paid on the shapes measured (Llama d 384 and 512, a d 512 MLA, a
/// d 512 LRKV: 0.70–1.04× the one-thread time on 2 threads, the small latent ones the slowest);
/// from it on it gains (d 640: 1.3×; docs/performance.md, "Fourth round").
inline constexpr std::int64_t kThreadedLayerWeights = std::int64_t(1) << 20;

/// While it lives (when `engaged`), BLAS/LAPACK calls and parallel loops started from the calling
/// thread run on it alone: for work too small to pay for waking the other threads. It sets this
/// thread's own OpenMP count (which kvrank's loops, oneDNN and the OpenMP OpenBLAS read per call)
/// and a pthreads OpenBLAS's count, and restores both after. Inside a parallel region, where all of
/// them already run on the calling thread, it changes nothing.
class CallingThreadOnly {
 public:
  explicit CallingThreadOnly(bool engaged = true);
  ~CallingThreadOnly();
  CallingThreadOnly(const CallingThreadOnly&) = delete;
  CallingThreadOnly& operator=(const CallingThreadOnly&) = delete;

 private:
  int saved_openmp_ = 1;  ///< this thread's OpenMP count before, restored when > 1
  int saved_blas_ = 1;    ///< a pthreads OpenBLAS's count before, restored when > 1
};

/// While it lives, the compute threads suit one layer whose attention tensors hold
/// `weight_elements` weights: fewer than kThreadedLayerWeights, and it runs on the calling thread
/// alone (CallingThreadOnly) — a small model then never starts the thread pool; else on the
/// threads set_compute_threads() set, the pool started (the first time) and its workers moved off
/// the calling thread's CPU (a new thread may start on its creator's CPU and stay there for
/// milliseconds; thread_pool.cpp).
class LayerThreads {
 public:
  explicit LayerThreads(std::int64_t weight_elements);

 private:
  CallingThreadOnly calling_thread_only_;
};

/// More threads than 4 × the processors only cost memory and start-up (100000 crashed OpenMP, 64
/// under a memory limit hung it): refused (kvrank::Error naming the limit) before any thread
/// exists, like a negative count.
void check_thread_count(int threads);

/// What runs the products, for `-v`: the BLAS and the kernels it picked for this CPU, and what
/// runs on oneDNN (gram_backend_description()).
std::string compute_backend_description();

/// A one-line advice when OpenBLAS did not recognise this CPU and runs its generic (Prescott)
/// kernels although the CPU has AVX2 — Debian 12's OpenBLAS 0.3.21 on CPUs newer than it (5th
/// generation Xeon, AMD Zen 5): every product is then several times slower than it could be
/// (docs/performance.md), and only the OPENBLAS_CORETYPE variable, read when OpenBLAS is loaded,
/// can change that. nullopt otherwise, and when kvrank runs its float32 products on oneDNN's own
/// kernels instead (float_products_on_onednn(), gram_backend.hpp).
std::optional<std::string> generic_blas_kernels_advice();

/// The buffers analyze_layer() reuses from one layer to the next (see the file comment).
struct ComputeWorkspace {
  MatrixF left_gram;   ///< the left side's basis Gram (column-major, m × m)
  MatrixF right_gram;  ///< the right side's, unused for symmetric factors
  // The latent contraction (MLA, LRKV; src/metric/contraction.cpp): hundreds of MB a layer.
  RowMatrixF left_coordinates;   ///< every head's coordinates X_hᵀ, stacked
  RowMatrixF right_coordinates;  ///< the same for the right side
  RowMatrixF contracted_rows;    ///< one chunk of the flattened M_h
};

}  // namespace kvrank

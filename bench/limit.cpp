// kvrank_bench_limit — the compute limit of `kvrank analyze` on a shape (docs/performance.md):
// the multiply-adds no method can skip — one symmetric Gram of the query rows and one of the key
// rows per layer — at the GEMM rate this machine reaches, measured in the same run with the
// library kvrank's own kernels run on.
//
//   the work:  L × (M²·D + N²·D) / 2 multiply-adds — a symmetric Gram of M rows counted as half the
//              M × M × D square product (its triangle, the diagonal's share ignored);
//   the rate:  the best of 5 timed runs (after one untimed) of one square product C = A·B of
//              n × n × n, n = 2048 (8.6 G multiply-adds), on --threads T threads:
//                bf16  oneDNN's matmul, bf16 × bf16 → f32 (the kernel of kvrank's bf16 Grams)
//                f16   oneDNN's matmul, f16 × f16 → f32 (where this oneDNN has such a kernel)
//                f32   the faster of the BLAS's SGEMM (OpenBLAS) and oneDNN's float32 matmul: the
//                      two libraries kvrank's float32 products run on (gram_backend.hpp: `auto`
//                      takes oneDNN's where OpenBLAS's kernels are narrower than the CPU's)
//   prints:    "<limit seconds> <rate G-MAC/s> <what ran: onednn or blas>" on one line.
//
//   kvrank_bench_limit --rate bf16 --layers 32 --d 4096 --q-rows 4096 --k-rows 1024 --threads 2
//   kvrank_bench_limit --rate f32 --gemm-gmacs 72 --threads 2    (seconds of G·10⁹ MACs at the
//   rate)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_flags.hpp"
#include "onednn_square.hpp"

#ifdef KVRANK_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using kvrank_bench::parse_flag;
using kvrank_bench::parse_text;
using kvrank_bench::set_threads;

constexpr long kRateSize = 2048;
constexpr int kRateRuns = 5;

/// Seconds of the fastest of kRateRuns calls of `product`, after one untimed call (kernel
/// compilation, thread start, first-touch page faults).
double fastest(const std::function<void()>& product) {
  product();
  double best = 1e300;
  for (int run = 0; run < kRateRuns; ++run) {
    const auto start = std::chrono::steady_clock::now();
    product();
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    best = std::min(best, elapsed.count());
  }
  return best;
}

#ifdef KVRANK_HAVE_DNNL
/// Seconds of one n × n × n oneDNN matmul with inputs of `type` and a float32 result; negative when
/// this oneDNN has no kernel for it here.
double time_onednn(long n, dnnl::memory::data_type type) {
  try {
    kvrank_bench::OnednnSquare square(n, type);
    return fastest([&] { square.seconds(); });
  } catch (const dnnl::error&) {
    return -1;
  }
}
#endif

/// Seconds of one n × n × n float32 GEMM through the BLAS kvrank links.
double time_sgemm(long n) {
  std::vector<float> a(static_cast<std::size_t>(n * n), 1.0f), b(a), c(a.size());
#ifdef KVRANK_HAVE_OPENBLAS
  const auto size = static_cast<blasint>(n);
  return fastest([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, size, size, size, 1.0f, a.data(), size,
                b.data(), size, 0.0f, c.data(), size);
  });
#else
  (void)n;
  return -1;
#endif
}

/// A rate: multiply-adds per second (G), negative when no such kernel is available here, and the
/// library that ran it.
struct Rate {
  double gmacs = -1;
  const char* library = "-";
};

/// The square product's rate from its seconds (≤ 0: not available).
Rate rate_of(double seconds, const char* library) {
  if (seconds <= 0) return {};
  const double macs = static_cast<double>(kRateSize) * kRateSize * kRateSize;
  return {macs / seconds / 1e9, library};
}

/// The rate of the named kernel: bf16 and f16 on oneDNN, f32 the faster of the BLAS and oneDNN.
Rate rate_gmacs(const std::string& kernel) {
  Rate rate;
  if (kernel == "f32") rate = rate_of(time_sgemm(kRateSize), "blas");
#ifdef KVRANK_HAVE_DNNL
  const dnnl::memory::data_type type = kernel == "bf16"  ? dnnl::memory::data_type::bf16
                                       : kernel == "f16" ? dnnl::memory::data_type::f16
                                                         : dnnl::memory::data_type::f32;
  const Rate onednn = rate_of(time_onednn(kRateSize, type), "onednn");
  if (onednn.gmacs > rate.gmacs) rate = onednn;
#endif
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kernel = parse_text(argc, argv, "--rate");
  if (kernel != "bf16" && kernel != "f16" && kernel != "f32") {
    std::fprintf(stderr,
                 "usage: kvrank_bench_limit --rate bf16|f16|f32 (--layers L --d D --q-rows M "
                 "--k-rows N | --gemm-gmacs G) [--threads T]\n");
    return 2;
  }
  const long layers = parse_flag(argc, argv, "--layers", 1);
  const long d = parse_flag(argc, argv, "--d", 768);
  const long q_rows = parse_flag(argc, argv, "--q-rows", d);
  const long k_rows = parse_flag(argc, argv, "--k-rows", d);
  const long gemm_gmacs = parse_flag(argc, argv, "--gemm-gmacs", 0);
  const long threads = parse_flag(argc, argv, "--threads", 0);
  if (layers < 1 || d < 1 || q_rows < 1 || k_rows < 1 || threads < 0 || gemm_gmacs < 0) {
    std::fprintf(stderr, "kvrank_bench_limit: every size must be positive\n");
    return 2;
  }
  set_threads(threads);
  const Rate rate = rate_gmacs(kernel);
  if (rate.gmacs <= 0) {
    std::printf("- - -\n");  // no such kernel in this build or on this CPU
    return 0;
  }
  const auto gram_macs = [d](long rows) {
    return static_cast<double>(rows) * static_cast<double>(rows) * static_cast<double>(d) / 2;
  };
  const double gmacs =
      gemm_gmacs > 0 ? static_cast<double>(gemm_gmacs)
                     : static_cast<double>(layers) * (gram_macs(q_rows) + gram_macs(k_rows)) / 1e9;
  std::printf("%.3f %.1f %s\n", gmacs / rate.gmacs, rate.gmacs, rate.library);
  return 0;
}

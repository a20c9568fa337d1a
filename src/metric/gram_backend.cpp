// The Gram backends of gram_backend.hpp: selection, and the Grams each one runs — kvrank's own bf16
// kernel (bf16_gram_kernel.hpp), the bf16 Gram on oneDNN (onednn_bf16_gram.hpp) and the onednn-f32
// Gram (metric/blas.hpp's syrk_upper_tiled on oneDNN's SGEMM: column tiles of the triangle).
#include "kvrank/metric/gram_backend.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "base/pages.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/memory_limit.hpp"
#include "kvrank/base/name_table.hpp"
#include "metric/bf16_bits.hpp"
#include "metric/bf16_gram_kernel.hpp"
#include "metric/blas.hpp"
#include "metric/onednn_bf16_gram.hpp"
#include "metric/thread_pool.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef KVRANK_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace kvrank {
namespace {

constexpr const char* kBackendVariable = "KVRANK_GRAM_BACKEND";

constexpr std::array<Named<GramBackend>, 5> kBackends{{{GramBackend::automatic, "auto"},
                                                       {GramBackend::f32, "f32"},
                                                       {GramBackend::bf16, "bf16"},
                                                       {GramBackend::bf16_onednn, "bf16-onednn"},
                                                       {GramBackend::onednn_f32, "onednn-f32"}}};
static_assert(in_enum_order(kBackends));

// Below this many multiply-adds (m²·d) `auto` keeps the f32 path: oneDNN's per-call set-up and its
// first-call JIT cost more than the bf16 kernel saves on a small Gram.
constexpr double kMinAutoWork = 256.0 * 256.0 * 256.0;

// -1: not chosen yet (read KVRANK_GRAM_BACKEND at the first use); else a GramBackend.
std::atomic<int> chosen_backend{-1};

/// The bf16 backends: bf16 Grams for bf16-exact bases (`bf16-onednn`: on oneDNN's matmul).
bool is_bf16(GramBackend backend) {
  return backend == GramBackend::bf16 || backend == GramBackend::bf16_onednn;
}

void require_supported(GramBackend backend, const std::string& origin) {
  if (is_bf16(backend) && !bf16_gram_supported()) {
    throw Error("", origin + std::string(name_of(kBackends, backend)) +
                        ": this kvrank has no bf16 Gram kernel (it needs oneDNN at build time "
                        "and a CPU with AVX512-BF16); use auto or f32");
  }
  if (backend == GramBackend::onednn_f32 && !onednn_f32_supported()) {
    throw Error("", origin +
                        "onednn-f32: this kvrank has no oneDNN float32 kernel (it needs oneDNN at "
                        "build time and a CPU with AVX2); use auto or f32");
  }
}

/// Whether an `auto` Gram of m × m over d columns is large enough for the bf16 kernel.
bool large_enough(Index m, Index d) {
  return static_cast<double>(m) * static_cast<double>(m) * static_cast<double>(d) >= kMinAutoWork;
}

/// Whether bf16_gram_upper() forms the Gram of an m × d bf16-exact basis under the backend in
/// force.
bool bf16_gram_chosen(Index m, Index d) {
  const GramBackend backend = gram_backend();
  if (backend == GramBackend::f32 || backend == GramBackend::onednn_f32 || !bf16_gram_supported())
    return false;
  return is_bf16(backend) || (large_enough(m, d) && bf16_gram_in_auto());
}

}  // namespace

GramBackend parse_gram_backend(std::string_view name) {
  if (const auto backend = value_named(kBackends, name)) return *backend;
  throw Error("", std::string(kBackendVariable) + ": " + expected_name(kBackends, name));
}

void set_gram_backend(GramBackend backend) {
  require_supported(backend, "set_gram_backend: ");
  chosen_backend.store(static_cast<int>(backend));
}

GramBackend gram_backend() {
  const int chosen = chosen_backend.load();
  if (chosen >= 0) return static_cast<GramBackend>(chosen);
  const char* text = std::getenv(kBackendVariable);
  const GramBackend backend = text ? parse_gram_backend(text) : GramBackend::automatic;
  require_supported(backend, std::string(kBackendVariable) + "=");
  chosen_backend.store(static_cast<int>(backend));
  return backend;
}

#ifdef KVRANK_HAVE_DNNL
/// Whether oneDNN's effective ISA includes `wanted` (the ISA values nest: AMX includes
/// AVX512-BF16).
bool dnnl_isa_has(dnnl::cpu_isa wanted) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & static_cast<unsigned>(wanted)) == static_cast<unsigned>(wanted);
}

namespace {

/// Whether the CPU is AMD's. AMD's cores with AVX512-BF16 (Zen 4 and later) run its dot product at
/// twice the float32 FMA rate: on the development machine (CPUID family 19h model 11h, a Zen 4
/// EPYC) oneDNN's bf16 Gram beat OpenBLAS's float32 SSYRK on its AVX2 and on its AVX-512 kernels
/// alike (2.5B shape: 1.9× and 1.65×). On Intel's AVX512-BF16 without AMX the bf16 kernel was 2–3×
/// slower than the AVX-512 SSYRK (docs/choices.md).
bool amd_cpu() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_is("amd");  // the vendor string, as compute.cpp's __builtin_cpu_supports
#else
  return false;
#endif
}

/// Whether oneDNN runs AMX kernels here (its tile products are many times faster than any
/// AVX-512 kernel).
bool onednn_has_amx() {
  static const bool amx = dnnl_isa_has(dnnl::cpu_isa::avx512_core_amx);
  return amx;
}

}  // namespace
#endif

namespace {

/// Why `auto` takes oneDNN's float32 kernels over OpenBLAS's: OpenBLAS runs its generic kernels
/// (or kvrank has none), or AVX2 kernels on a CPU whose AVX-512 oneDNN uses (OPENBLAS_CORETYPE set
/// to Haswell, as some machines do to avoid 0.3.21's AVX-512 kernels: on the development machine,
/// a Zen 5 EPYC with two 512-bit FMA pipes, oneDNN's SGEMM ran 200 G-MAC/s on 2 threads against
/// OpenBLAS's 110 there; docs/choices.md). nullopt where OpenBLAS's kernels are as wide as
/// oneDNN's.
std::optional<std::string> blas_shortfall() {
  if (detail::blas_kernels_are_generic()) return "the BLAS runs generic kernels here";
#ifdef KVRANK_HAVE_DNNL
  // oneDNN's effective ISA holds only what the CPU runs (and ONEDNN_MAX_CPU_ISA allows).
  if (!detail::blas_kernels_use_avx512() && dnnl_isa_has(dnnl::cpu_isa::avx512_core))
    return "the BLAS runs AVX2 kernels on this AVX-512 CPU";
#endif
  return std::nullopt;
}

bool blas_kernels_below_onednn() {
  static const bool below = blas_shortfall().has_value();
  return below;
}

}  // namespace

bool bf16_gram_supported() {
#ifdef KVRANK_HAVE_DNNL
  static const bool supported = dnnl_isa_has(dnnl::cpu_isa::avx512_core_bf16);
  return supported;
#else
  return false;
#endif
}

bool bf16_grams_on_own_kernel() {
#ifdef KVRANK_HAVE_DNNL
  return !onednn_has_amx() && bf16_gram_supported() && detail::bf16_kernel_supported() &&
         gram_backend() != GramBackend::bf16_onednn;
#else
  return false;
#endif
}

bool own_kernel_takes_bf16(Index m, Index d) {
  return bf16_grams_on_own_kernel() && bf16_gram_chosen(m, d);
}

bool bf16_gram_in_auto() {
#ifdef KVRANK_HAVE_DNNL
  return bf16_gram_supported() && (onednn_has_amx() || amd_cpu() ||
                                   (detail::blas_kernels_are_generic() && !onednn_f32_supported()));
#else
  return false;
#endif
}

bool onednn_f32_supported() {
#ifdef KVRANK_HAVE_DNNL
  static const bool supported = dnnl_isa_has(dnnl::cpu_isa::avx2);
  return supported;
#else
  return false;
#endif
}

bool onednn_f32_in_auto() { return onednn_f32_supported() && blas_kernels_below_onednn(); }

bool float_products_on_onednn() {
  const GramBackend backend = gram_backend();
  return backend == GramBackend::onednn_f32 ||
         (backend == GramBackend::automatic && onednn_f32_in_auto());
}

bool latent_products_on_onednn() {
  return float_products_on_onednn() ||
         (gram_backend() == GramBackend::automatic && onednn_f32_supported());
}

std::string gram_backend_description() {
  const GramBackend backend = gram_backend();
  const bool automatic = backend == GramBackend::automatic;
  const bool bf16 = is_bf16(backend) || (automatic && bf16_gram_in_auto());
  // Whether a model's Grams take bf16 depends on its weights: gram_kernel_description() says.
  if (float_products_on_onednn()) {
    return automatic ? "float32 products on oneDNN (onednn-f32: " + *blas_shortfall() + ")"
                     : "float32 products on oneDNN (onednn-f32)";
  }
  const std::string on_blas = latent_products_on_onednn()
                                  ? "float32 products on the BLAS, the latent contraction's M_h "
                                    "products on oneDNN"
                                  : "float32 products on the BLAS";
  if (bf16) return on_blas;
  if (backend == GramBackend::f32) return "float32 products on the BLAS (KVRANK_GRAM_BACKEND=f32)";
  if (!bf16_gram_supported() && !onednn_f32_supported()) return "float32 Grams only";
  return on_blas + " (oneDNN for the rest only when asked: not faster here)";
}

std::string gram_kernel_description(Index m, Index d, bool bf16_values) {
  const bool bf16 = bf16_gram_chosen(m, d);
  if (bf16 && bf16_values) {
    return bf16_grams_on_own_kernel() ? "bf16 Grams (kvrank's AVX512-BF16 kernel)"
                                      : "bf16 Grams on oneDNN";
  }
  const std::string float32 = float_products_on_onednn() ? "float32 Grams on oneDNN (onednn-f32)"
                                                         : "float32 Grams (SYRK) on the BLAS";
  // A float32 basis whose every value is a bfloat16 still takes the bf16 kernel (is_bf16_exact).
  return bf16 ? float32 + "; bf16 only for bases of bfloat16 values" : float32;
}

bool is_bf16_exact(const RowMatrixF& rows) noexcept {
  return detail::all_bf16(rows.data(), rows.size());
}

bool bf16_gram_upper(const RowMatrixF& basis, MatrixF& gram) {
  const Index m = basis.rows();
  const Index d = basis.cols();
  if (!bf16_gram_chosen(m, d)) return false;
#ifdef KVRANK_HAVE_DNNL
  if (bf16_grams_on_own_kernel()) return detail::bf16_kernel_gram_upper(basis, gram);
  // Per-thread buffer, reused layer after layer (as diversity.cpp's Gram workspaces).
  thread_local std::vector<std::uint16_t> packed;
  if (!detail::pack_bf16(basis, packed)) return false;
  try {
    detail::onednn_bf16_triangle(packed, m, d, gram);
  } catch (const dnnl::error&) {
    return false;  // no kernel for this shape after all: the f32 path overwrites the triangle
  }
  return true;
#else
  (void)gram;
  return false;
#endif
}

bool onednn_f32_gram_upper(const RowMatrixF& basis, MatrixF& gram) {
  // No size limit under `auto`, unlike bf16: oneDNN's SGEMM kernels are generated once per process,
  // not per shape, and every other float32 product takes them too.
  if (!float_products_on_onednn()) return false;
  // By column tiles, each on one thread: the same bits on any number of threads.
  detail::syrk_upper_tiled(detail::FloatKernels::onednn, basis.rows(), basis.cols(), basis.data(),
                           basis.cols(), gram.data(), basis.rows());
  return true;
}

bool onednn_gram_upper(const RowMatrixF& basis, MatrixF& gram) {
  return bf16_gram_upper(basis, gram) || onednn_f32_gram_upper(basis, gram);
}

std::jthread compile_gram_kernels_aside(Index m, Index d, bool bf16_values,
                                        bool latent_contraction) {
#ifdef KVRANK_HAVE_DNNL
  if (detail::available_threads() < 2 || m < 1 || d < 1) return {};
  const bool bf16 = bf16_values && bf16_gram_chosen(m, d);
  const bool bf16_on_onednn = bf16 && !bf16_grams_on_own_kernel();
  const bool sgemm_on_onednn =
      (!bf16 && float_products_on_onednn()) || (latent_contraction && latent_products_on_onednn());
  if (!bf16_on_onednn && !sgemm_on_onednn) return {};  // nothing to compile
  // Under a memory limit the compute threads were sized to it (memory_limit.hpp), and this thread
  // takes more: a stack and a malloc arena (72 MiB), its first product's buffers, and what oneDNN
  // takes to compile (as much as diversity.cpp sets aside for oneDNN on a layer's first thread).
  // It starts only where that fits, and the room stays promised to it until it ends, so that the
  // first layer, sized meanwhile, does not count on it.
  const Index tile = std::min(detail::kOnednnGramTile, m);
  const auto need = 72 * kMiB + detail::kOnednnFirstThread +
                    static_cast<std::uint64_t>(tile * d * 2 + tile * tile * 4);
  if (!memory_fits(need)) return {};
  auto promise = std::make_shared<const MemoryPromise>(need);
  auto compile = [m, d, bf16_on_onednn, sgemm_on_onednn, promise] {
    (void)promise;  // held until the compilation ends
#ifdef _OPENMP
    // A thread OpenMP has not seen gets the process's default team: the kernels are compiled and
    // tried on this one thread, not on a second pool beside kvrank's.
    omp_set_num_threads(1);
#endif
    try {
      if (bf16_on_onednn) detail::first_onednn_bf16_product(m, d);
      if (sgemm_on_onednn) {  // oneDNN's SGEMM compiles all its kernels in its first call
        const std::vector<float> zeros(16 * 16);
        std::vector<float> product(16 * 16);
        detail::onednn_syrk_lower(16, 16, zeros.data(), 16, product.data(), 16);
      }
    } catch (...) {  // an advance only: the Gram meets the same failure and says what it is
    }
  };
  try {
    return std::jthread(compile);
  } catch (const std::system_error&) {  // no thread to spare (a memory limit): the Gram compiles
    return {};
  }
#else
  (void)m, (void)d, (void)bf16_values, (void)latent_contraction;
  return {};
#endif
}

}  // namespace kvrank

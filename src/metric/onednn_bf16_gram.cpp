// The bf16 Gram on oneDNN's matmul (onednn_bf16_gram.hpp).
//
// The bf16 Gram. G = B·Bᵀ is symmetric, so only its upper triangle is formed, one column tile at a
// time: columns [j0, j1) of the upper triangle, rows [0, j1), are the product
//   B[j0:j1] · B[0:j1]ᵀ      (tile × j1, reduction over the d columns of B)
// and the column-major block of `gram` at column j0 is, read row-major with stride m, exactly that
// product's row-major layout — so each tile is a plain copy, and the tile's diagonal block (both of
// its triangles) is the only redundant work: m²d/2 + m·tile·d/2 multiply-adds in all.
#include "metric/onednn_bf16_gram.hpp"

#ifdef KVRANK_HAVE_DNNL

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>

#include "base/pages.hpp"
#include "metric/bf16_bits.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank::detail {
namespace {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Depth of one bf16 product. oneDNN's kernel sums a whole depth in float32 registers, one long
// chain: over d = 2304 that made head norms 2e-6 off the exact ones, 4× the f32 SSYRK's error
// (whose BLAS accumulates blocks of a few hundred into C). Products over slices of this depth, each
// added into the tile by oneDNN's sum post-op, keep the chains as short as the SSYRK's.
constexpr Index kDepthSlice = 256;

/// dst (rows × cols, row-major with leading dimension ld) = a · bᵀ, or dst += a · bᵀ when
/// `accumulate`, for row-major bf16 a (rows × depth) and b (cols × depth) with leading dimension
/// lda. oneDNN's primitive cache keeps the JIT-compiled kernel of every shape seen, so a model's
/// layers compile it once.
void matmul_abt(const std::uint16_t* a, const std::uint16_t* b, float* dst, Index rows, Index cols,
                Index depth, Index lda, Index ld, bool accumulate, dnnl::stream& stream) {
  using dnnl::memory;
  const memory::desc a_desc({rows, depth}, memory::data_type::bf16, memory::dims{lda, 1});
  const memory::desc b_desc({depth, cols}, memory::data_type::bf16, memory::dims{1, lda});
  const memory::desc dst_desc({rows, cols}, memory::data_type::f32, memory::dims{ld, 1});
  dnnl::primitive_attr attributes;
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.0f);
    attributes.set_post_ops(sum);
  }
#if DNNL_VERSION_MAJOR >= 3  // oneDNN 3 (Debian 13, Ubuntu 24.04) dropped the operation descriptor
  const dnnl::matmul::primitive_desc descriptor(cpu_engine(), a_desc, b_desc, dst_desc, attributes);
#else
  const dnnl::matmul::primitive_desc descriptor(dnnl::matmul::desc(a_desc, b_desc, dst_desc),
                                                attributes, cpu_engine());
#endif
  // oneDNN takes non-const handles but does not write to the inputs.
  memory a_memory(a_desc, cpu_engine(), const_cast<std::uint16_t*>(a));
  memory b_memory(b_desc, cpu_engine(), const_cast<std::uint16_t*>(b));
  memory dst_memory(dst_desc, cpu_engine(), dst);
  const dnnl::matmul product(descriptor);
  product.execute(
      stream, {{DNNL_ARG_SRC, a_memory}, {DNNL_ARG_WEIGHTS, b_memory}, {DNNL_ARG_DST, dst_memory}});
}

/// Product (j0, k0) of triangle_bf16 for the m × d rows `packed`: the column tile starting at j0
/// (rows [j0, j0 + tile) against rows [0, j0 + tile)) over the depth slice starting at k0, into
/// `tile_rows` (tile × (j0 + tile)), added to it after the first slice.
void triangle_product(const std::uint16_t* packed, Index m, Index d, Index j0, Index k0,
                      float* tile_rows, dnnl::stream& stream) {
  const Index tile = std::min(kOnednnGramTile, m - j0);
  const Index width = j0 + tile;
  matmul_abt(packed + j0 * d + k0, packed + k0, tile_rows, tile, width,
             std::min(kDepthSlice, d - k0), d, width, k0 > 0, stream);
}

/// Column tile `j0` of the bf16 Gram, formed over every depth slice in `tile_rows` (tile ×
/// (j0 + tile), reused) and copied into `gram`. oneDNN runs a product into a strided block of
/// `gram` on a slow generic kernel (gemm:jit) rather than its brgemm one, hence the dense tile.
void triangle_tile(const std::uint16_t* packed, Index m, Index d, Index j0,
                   std::vector<float>& tile_rows, MatrixF& gram) {
  const Index tile = std::min(kOnednnGramTile, m - j0);
  const Index width = j0 + tile;
  tile_rows.resize(static_cast<std::size_t>(tile * width));  // every element is written below
  dnnl::stream stream(cpu_engine());
  for (Index k0 = 0; k0 < d; k0 += kDepthSlice) {
    triangle_product(packed, m, d, j0, k0, tile_rows.data(), stream);
  }
  stream.wait();
  for (Index r = 0; r < tile; ++r) {
    std::copy_n(tile_rows.data() + r * width, width, gram.data() + (j0 + r) * m);
  }
}

}  // namespace

bool pack_bf16(const RowMatrixF& rows, std::vector<std::uint16_t>& out) {
  const Index count = rows.size();
  const float* in = rows.data();
  if (!detail::all_bf16(in, std::min(count, rows.cols()))) return false;  // before any allocation
  if (out.capacity() < static_cast<std::size_t>(count)) {
    // A fresh block's pages mapped in one call (pages.hpp), not faulted in one by one by resize's
    // zero fill: 8 000 faults for a 4096 × 4096 basis.
    out = std::vector<std::uint16_t>();
    out.reserve(static_cast<std::size_t>(count));
    detail::prefault_for_write(out.data(), static_cast<std::size_t>(count) * sizeof(std::uint16_t));
  }
  out.resize(static_cast<std::size_t>(count));
  std::uint16_t* packed = out.data();
  std::uint32_t low = 0;
#pragma omp parallel for reduction(| : low) schedule(static) if (detail::copy_worth_threads(count))
  for (Index i = 0; i < count; ++i) {
    const std::uint32_t bits = detail::float_bits(in[i]);
    low |= bits & detail::kLowHalf;
    packed[i] = static_cast<std::uint16_t>(bits >> 16);
  }
  return low == 0;
}

void onednn_bf16_triangle(const std::vector<std::uint16_t>& packed, Index m, Index d,
                          MatrixF& gram) {
  const Index tiles = (m + kOnednnGramTile - 1) / kOnednnGramTile;
  detail::ParallelFailure failure;
#pragma omp parallel for schedule(dynamic, 1) if (tiles > 1)
  for (Index t = 0; t < tiles; ++t) {
    failure.run([&] {
      // Per thread, reused Gram after Gram (as the packed copy).
      thread_local std::vector<float> tile_rows;
      triangle_tile(packed.data(), m, d, (tiles - 1 - t) * kOnednnGramTile, tile_rows, gram);
    });
  }
  failure.rethrow();
}

void first_onednn_bf16_product(Index m, Index d) {
  const Index tile = std::min(kOnednnGramTile, m);
  const std::vector<std::uint16_t> rows(static_cast<std::size_t>(tile * d));
  std::vector<float> product(static_cast<std::size_t>(tile * tile));
  dnnl::stream stream(cpu_engine());
  triangle_product(rows.data(), m, d, 0, 0, product.data(), stream);
  stream.wait();
}

}  // namespace kvrank::detail

#endif  // KVRANK_HAVE_DNNL

// Private: the bf16 Gram on oneDNN's matmul, gram_backend.cpp's `bf16-onednn` backend (and its
// `bf16` one on AMX): the upper triangle in column tiles, each tile's products on one thread.
#pragma once

#ifdef KVRANK_HAVE_DNNL

#include <cstdint>
#include <vector>

#include "kvrank/base/eigen.hpp"

namespace kvrank::detail {

/// Column tile of the triangle. Measured on AMX and AVX512-BF16 (d 768 – 4096): 256 is within a
/// few per cent of the best tile at every size, and keeps the redundant diagonal work at 256/m.
inline constexpr Index kOnednnGramTile = 256;

/// The high halves of `rows` into `out` (row-major, same shape); false when some value has a
/// non-zero low half (not a bf16), in which case `out` holds garbage. A float32 basis is usually
/// caught by its first row, before the full pass.
bool pack_bf16(const RowMatrixF& rows, std::vector<std::uint16_t>& out);

/// The column tiles go to the threads, the widest first, each tile's products on its thread alone:
/// oneDNN sharing every product over the threads forked and joined the pool once per product
/// (m/256 · d/256 of them, 256 for a 4096 × 4096 basis), and a thread the scheduler had taken
/// away for a tick left the other spinning at each join (3–5× slower on a loaded 2-core machine).
/// Called inside a parallel region (the two sides side by side), the loop runs on the calling
/// thread.
/// Throws dnnl::error where oneDNN has no kernel for the shape.
void onednn_bf16_triangle(const std::vector<std::uint16_t>& packed, Index m, Index d,
                          MatrixF& gram);

/// The first product onednn_bf16_triangle runs for an m × d basis, on zeros (it reads the first
/// tile's rows only): oneDNN picks its kernel by shape and strides, so this compiles the one that
/// Gram runs.
void first_onednn_bf16_product(Index m, Index d);

}  // namespace kvrank::detail

#endif  // KVRANK_HAVE_DNNL

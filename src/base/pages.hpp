// Private: mapping a large buffer's pages at once instead of one page fault at a time.
//
// The buffers a layer's weights are converted into are tens to hundreds of MB, written once per
// layer. Touched page by page, every 4 KiB costs a fault. These helpers ask the kernel to map
// a range in one call (a 128M-shaped run: 17 700 faults → 3 000). They are advice only — a kernel
// without it leaves the faults to the first touch, as before. They did not make fresh memory
// cheap on the VM measured (docs/performance.md: the first writes stayed slow), so buffers that
// recur layer after layer are better kept (ComputeWorkspace, compute.hpp).
#pragma once

#include <cstddef>

#include "kvrank/base/eigen.hpp"

namespace kvrank::detail {

/// Maps the pages of a fresh buffer about to be written (4 KiB pages: huge ones were slower to
/// zero, pages.cpp). A buffer whose first and last whole pages are mapped already (heap memory
/// used before) is left as it is.
void prefault_for_write(void* data, std::size_t bytes) noexcept;

/// Sizes a workspace buffer rows × cols: unchanged when it already has that size (the next layer
/// of a model: no new pages), else allocated afresh and prefaulted. Its values are unspecified.
template <typename Matrix>
void fit_buffer(Matrix& buffer, Index rows, Index cols) {
  if (buffer.rows() == rows && buffer.cols() == cols) return;
  buffer.resize(rows, cols);
  prefault_for_write(buffer.data(),
                     static_cast<std::size_t>(buffer.size()) * sizeof(typename Matrix::Scalar));
}

}  // namespace kvrank::detail

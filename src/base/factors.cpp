// Folding a side's row gains into its basis, and the float32 copy of a stored basis (factors.hpp).
#include "kvrank/base/factors.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/guarded_read.hpp"
#include "base/tiled_copy.hpp"  // copy_worth_threads

namespace kvrank {

void scale_rows(RowMatrixF& rows, const std::vector<double>& factors) {
  assert(static_cast<Index>(factors.size()) == rows.rows());
  // One pass over tens of MB a layer (DeepSeek-V3's q_a_proj: 44 MB): worth both threads.
#pragma omp parallel for if (detail::copy_worth_threads(rows.size()))
  for (Index i = 0; i < rows.rows(); ++i)
    rows.row(i) = (rows.row(i).cast<double>() * factors[i]).cast<float>();
}

std::vector<float> row_largest_magnitudes(const RowMatrixF& rows) {
  std::vector<float> largest(static_cast<std::size_t>(rows.rows()), 0.0f);
  if (rows.cols() == 0) return largest;
#pragma omp parallel for if (detail::copy_worth_threads(rows.size()))
  for (Index i = 0; i < rows.rows(); ++i)
    largest[static_cast<std::size_t>(i)] = rows.row(i).cwiseAbs().maxCoeff();
  return largest;
}

namespace {

/// The largest magnitude's bits of `count` bf16 values: the sign bit cleared, the order of the
/// magnitudes is that of the bits (an Inf or NaN at 0x7F80 and above). Signed 16-bit lanes (every
/// value ≤ 0x7FFF), which the compiler vectorises without SSE4.1's unsigned maximum.
std::int16_t largest_bf16_bits(const std::byte* values, Index count) noexcept {
  std::int16_t largest = 0;
  for (Index i = 0; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, values + 2 * i, sizeof bits);
    largest = std::max(largest, static_cast<std::int16_t>(bits & 0x7FFFu));
  }
  return largest;
}

}  // namespace

std::optional<std::vector<float>> row_largest_magnitudes(const StoredBf16Rows& rows) {
  // Whole rows, ~2^19 values a guarded read (its set-up is not paid a row at a time).
  const Index rows_per_read = std::max<Index>(1, (Index(1) << 19) / std::max<Index>(rows.cols, 1));
  const Index reads = (rows.rows + rows_per_read - 1) / rows_per_read;
  std::vector<std::int16_t> bits(static_cast<std::size_t>(rows.rows), 0);
  bool complete = true;
#pragma omp parallel for reduction(&& : complete) if (detail::copy_worth_threads(rows.rows * rows.cols))
  for (Index read = 0; read < reads; ++read) {
    const Index first = read * rows_per_read;
    const Index last = std::min(rows.rows, first + rows_per_read);
    complete = detail::guarded_read([&] {
                 for (Index i = first; i < last; ++i)
                   bits[static_cast<std::size_t>(i)] =
                       largest_bf16_bits(rows.bytes.data() + 2 * i * rows.cols, rows.cols);
               }) &&
               complete;
  }
  constexpr std::int16_t kInfinityBits = 0x7F80;
  if (!complete ||
      std::any_of(bits.begin(), bits.end(), [](std::int16_t b) { return b >= kInfinityBits; }))
    return std::nullopt;
  std::vector<float> largest(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i)
    largest[i] = std::bit_cast<float>(static_cast<std::uint32_t>(bits[i]) << 16);
  return largest;
}

std::optional<std::vector<float>> basis_row_largest_magnitudes(const FactorSide& side) {
  if (side.stored) return row_largest_magnitudes(*side.stored);
  return row_largest_magnitudes(side.basis);
}

double largest_scaled_magnitude(const std::vector<float>& row_largest,
                                const std::vector<double>& factors) {
  double largest = 0;
  for (std::size_t i = 0; i < row_largest.size(); ++i)
    largest = std::max(largest, std::abs(factors[i]) * static_cast<double>(row_largest[i]));
  return largest;
}

void StoredBf16Rows::throw_read_error(const char* reader) const {
  to_float();  // throws what is wrong, naming the tensor
  throw std::runtime_error(std::string(reader) + ": stored rows changed while they were read");
}

void keep_first_basis_rows(FactorSide& side, Index count) {
  if (!side.row_gains.empty()) side.row_gains.resize(static_cast<std::size_t>(count));
  if (!side.stored) {
    side.basis.conservativeResize(count, Eigen::NoChange);
    return;
  }
  StoredBf16Rows& rows = *side.stored;
  rows.bytes = rows.bytes.first(static_cast<std::size_t>(2 * count * rows.cols));
  rows.rows = count;
  rows.to_float = [whole = std::move(rows.to_float), count] {
    RowMatrixF first = whole();
    first.conservativeResize(count, Eigen::NoChange);
    return first;
  };
}

namespace {

/// The side's stored coefficient blocks pointed at float32 copies of their rows, one copy for each
/// stored matrix however many heads share it.
void copy_stored_coefficients(FactorSide& side) {
  std::map<const StoredBf16Rows*, std::shared_ptr<const RowMatrixF>> copies;
  for (std::vector<CoeffBlock>& blocks : side.heads) {
    for (CoeffBlock& block : blocks) {
      if (!block.is_stored()) continue;
      std::shared_ptr<const RowMatrixF>& copy = copies[block.stored.get()];
      if (!copy) copy = std::make_shared<const RowMatrixF>(block.stored->to_float());
      block.source = copy;
      block.stored.reset();
    }
  }
}

}  // namespace

FactorSide with_basis_copied(FactorSide side) {
  if (side.stored) {
    side.basis = side.stored->to_float();
    side.stored.reset();
  }
  return side;
}

FactorSide with_float_basis(FactorSide side) {
  copy_stored_coefficients(side);
  side = with_basis_copied(std::move(side));
  if (!side.row_gains.empty()) {
    scale_rows(side.basis, side.row_gains);
    side.row_gains.clear();
  }
  return side;
}

}  // namespace kvrank

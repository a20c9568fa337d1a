// The readers' shared construction of factors (family_detail.hpp): matrices loaded with their
// shape checked, and the sides whose heads are row or column blocks of one basis.
#include <span>
#include <string>
#include <utility>

#include "base/tiled_copy.hpp"
#include "kvrank/base/error.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {
namespace {

std::string shape_text(Index rows, Index cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

}  // namespace

void check_matrix_shape(const TensorView& tensor, Index rows, Index cols, const std::string& why) {
  if (tensor.shape.size() == 2 && tensor.shape[0] == rows && tensor.shape[1] == cols) return;
  throw Error(tensor.file, tensor.name,
              "expected shape " + shape_text(rows, cols) + " (" + why + "), found " +
                  tensor.shape_string());
}

RowMatrixF load_matrix(const Checkpoint& checkpoint, const std::string& name, Index rows,
                       Index cols, const std::string& why) {
  const TensorView& tensor = checkpoint.at(name);
  check_matrix_shape(tensor, rows, cols, why);
  return to_matrix(tensor);
}

StoredBf16Rows stored_bf16_rows(const TensorView& tensor, Index rows, Index cols,
                                std::function<RowMatrixF()> to_float) {
  return StoredBf16Rows{tensor.data(), rows, cols, std::move(to_float),
                        [&tensor, cols](Index first, Index count, float* out) {
                          return rows_to_f32(
                              tensor, first, count,
                              std::span<float>(out, static_cast<std::size_t>(count * cols)));
                        }};
}

FactorSide row_block_side(RowMatrixF rows, int heads, Index head_cols, int heads_per_block) {
  FactorSide side;
  side.basis = std::move(rows);
  side.head_cols = head_cols;
  side.heads.reserve(static_cast<std::size_t>(heads));
  for (int h = 0; h < heads; ++h) {
    const Index block = h / heads_per_block;
    side.heads.push_back({CoeffBlock::identity(block * head_cols, head_cols)});
  }
  return side;
}

FactorSide row_block_side(FoldedRows rows, int heads, Index head_cols, int heads_per_block) {
  FactorSide side = row_block_side(RowMatrixF(), heads, head_cols, heads_per_block);
  set_basis(side, std::move(rows));
  return side;
}

void set_basis(FactorSide& side, FoldedRows rows) {
  side.basis = std::move(rows.rows);
  side.exponent = rows.exponent;
  side.stored = std::move(rows.stored);
  side.row_gains = std::move(rows.row_gains);
}

FactorSide column_block_side(const RowMatrixF& matrix, int heads, Index head_cols) {
  return row_block_side(transposed(matrix), heads, head_cols, 1);
}

HeadFactors projection_factors(Repr repr, int heads, int kv_heads, Index head_dim,
                               const std::function<FoldedRows(ProjectionRole)>& projection) {
  using Role = ProjectionRole;
  const int group = heads / kv_heads;
  HeadFactors factors;
  switch (repr) {
    case Repr::qk:
      factors.left = row_block_side(projection(Role::q), heads, head_dim, 1);
      factors.right = row_block_side(projection(Role::k), heads, head_dim, group);
      break;
    case Repr::ov:
      factors.left = column_block_side(projection(Role::o).rows, heads, head_dim);
      factors.right = row_block_side(projection(Role::v), heads, head_dim, group);
      break;
    case Repr::k:
    case Repr::v:
      factors.left =
          row_block_side(projection(repr == Repr::k ? Role::k : Role::v), heads, head_dim, group);
      factors.symmetric = true;
      break;
  }
  return factors;
}

}  // namespace kvrank::detail

// Helpers shared by the unit tests of factors and errors (families, MLA, LRKV, activations,
// analysis).
#pragma once

#include <cmath>
#include <functional>
#include <string>

#include "kvrank/base/error.hpp"
#include "kvrank/base/factors.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/io/tensor.hpp"
#include "kvrank/layout/layout.hpp"
#include "support/catch.hpp"
#include "support/test_util.hpp"

namespace kvrank::test {

/// Head h's explicit n×k matrix: basisᵀ · C_h, with C_h assembled densely from its blocks.
inline MatrixD expand_head(const FactorSide& side, int head) {
  MatrixD coeff = MatrixD::Zero(side.basis.rows(), side.head_cols);
  for (const CoeffBlock& block : side.heads.at(static_cast<std::size_t>(head))) {
    coeff.block(block.basis_row, block.head_col, block.rows(), block.cols()) = block.in_double();
  }
  return std::ldexp(1.0, side.exponent) * side.basis.cast<double>().transpose() * coeff;
}

/// Head h of an [H, n, k] reference array (from the writer's npz) as an n×k matrix.
inline MatrixD reference_head(const Checkpoint& ref, const std::string& name, int head) {
  const TensorView& tensor = ref.at(name);
  REQUIRE(tensor.shape.size() == 3);
  const std::vector<float> values = to_f32(tensor);
  const Index rows = tensor.shape[1];
  const Index cols = tensor.shape[2];
  const ConstRowMapF map(values.data() + head * rows * cols, rows, cols);
  return map.cast<double>();
}

/// Runs an independent numpy writer (`tests/writers/WRITER FAMILY DIR/ckpt DIR/ref OPTIONS`):
/// the checkpoint goes to dir/ckpt, the writer's reference factors to dir/ref.
inline void write_reference_checkpoint(const TempDir& dir, const std::string& writer,
                                       const std::string& family, const std::string& options) {
  const auto result = run_test_writer(writer, family + " " + (dir / "ckpt").string() + " " +
                                                  (dir / "ref").string() + " " + options);
  REQUIRE(result.exit_code == 0);
}

/// Relative Frobenius distance.
inline double relative_error(const MatrixD& got, const MatrixD& want) {
  return (got - want).norm() / std::max(want.norm(), 1e-30);
}

/// Every head of every layer and representation of `layout`: basisᵀ·C_h of layer_factors() equals
/// the matrix the writer saved in dir/ref/<repr>.npz (layer<i>.L, layer<i>.R) within `tolerance`.
inline void check_factors_match_reference(const TempDir& dir, const Checkpoint& checkpoint,
                                          const ModelLayout& layout, double tolerance = 1e-5) {
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v}) {
    const Checkpoint ref = Checkpoint::open(dir / "ref" / (std::string(repr_name(repr)) + ".npz"));
    for (int layer : attention_layer_list(layout)) {  // a hybrid's attention layers
      const HeadFactors factors = layer_factors(checkpoint, layout, layer, repr);
      REQUIRE(factors.num_heads() == layout.heads);
      const FactorSide& right = factors.symmetric ? factors.left : factors.right;
      const std::string prefix = "layer" + std::to_string(layer);
      for (int h = 0; h < layout.heads; ++h) {
        INFO("repr " << repr_name(repr) << ", layer " << layer << ", head " << h);
        CHECK(relative_error(expand_head(factors.left, h), reference_head(ref, prefix + ".L", h)) <
              tolerance);
        CHECK(relative_error(expand_head(right, h), reference_head(ref, prefix + ".R", h)) <
              tolerance);
      }
    }
  }
}

}  // namespace kvrank::test

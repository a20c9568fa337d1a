// The one Eigen vocabulary of kvrank.
//
// Weights are stored as PyTorch Linear matrices, row-major `[out, in]`. A projection's rows are
// therefore what kvrank works with: the Gram of a set of rows is one SYRK (rows · rowsᵀ) in
// float32. The small H×H and d_h×d_h problems that follow are solved in double.
#pragma once

#include <Eigen/Core>
#include <Eigen/Eigenvalues>

namespace kvrank {

using Index = Eigen::Index;

/// Row-major float32 matrix: a tensor as it lies in a checkpoint, `[out, in]`.
using RowMatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
/// Read-only row-major float32 view over a buffer kvrank does not own.
using ConstRowMapF = Eigen::Map<const RowMatrixF>;
/// Column-major float32 matrix (Grams of float32 products).
using MatrixF = Eigen::MatrixXf;
/// Double-precision matrices and vectors for the small eigenproblems.
using MatrixD = Eigen::MatrixXd;
using VectorD = Eigen::VectorXd;

}  // namespace kvrank

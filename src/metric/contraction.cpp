// ⟨A_i, A_j⟩_F by contraction in per-head coordinates (the MLA / LRKV path of diversity.cpp).
//
// Algebra. A side's head h is L_h = Bᵀ C_h (basis B, m × n; coefficients C_h, m × k). Any k × p
// matrix X_hᵀ with X_hᵀ X_j = L_hᵀ L_j for all pairs is as good as L_h itself:
//   latent coordinates: X_hᵀ = C_hᵀ F with F Fᵀ = G = B Bᵀ (p = m, the size of what is cached);
//   raw coordinates:    X_hᵀ = C_hᵀ B = L_hᵀ (p = n), free when the head is a slice of B.
// Then A_h ≅ M_h = X_h Y_hᵀ (p × q, Y the other side's coordinates; Y = X when symmetric) and
//   ⟨A_i, A_j⟩_F = ⟨M_i, M_j⟩_F,
// so the H × H matrix is one SYRK over the flattened M_h, formed in row chunks so that memory stays
// at a few tens of MB whatever the shape. For a DeepSeek-V3 layer (qk) that is ~60 G multiply-adds
// in float32 BLAS, against ~640 G in small double products for the pairwise C_iᵀ G C_j of the other
// path. The per-head singular values need L_hᵀL_h = X_hᵀX_h and R_hᵀR_h, also read from X and Y.
//
// F: the Cholesky factor of G (lower triangular: C_hᵀF then costs half, as a TRMM). A G that is
// only semi-definite (more latent rows than d, a zero gain, repeated rows) may fail Cholesky in
// round-off; then F = Pᵀ L D^½ from the pivoted LDLᵀ with negative pivots (round-off) set to 0.
// Either way F Fᵀ = G to double round-off: the result is the same metric, not an approximation.
//
// Precision: the products are float32 like the Grams (docs/metric.md); each chunk's SYRK is summed
// into a double H × H, so the accumulation error does not grow with p·q, and runs over rows scaled
// and centred in double (centred_products.hpp), so that J S J keeps heads 0.999… alike apart.
// The per-head X_hᵀX_h are accumulated in double, as the pairwise path's C_hᵀ G C_h are: a head of
// exact low rank keeps it.
#include "metric/contraction.hpp"

#include <Eigen/Cholesky>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>

#include "base/pages.hpp"
#include "metric/blas.hpp"
#include "metric/latent_order.hpp"
#include "metric/side_gram.hpp"
#include "metric/thread_pool.hpp"

namespace kvrank::detail {
namespace {

using StridedMapF = Eigen::Map<RowMatrixF, 0, Eigen::OuterStride<>>;

/// A dense block's transpose (cols × rows) in float32: its float32 rows where they lie, or its
/// stored bf16 rows converted by the reader (StoredBf16Rows::rows_to_float) into a buffer of the
/// calling thread's (valid until its next call; a head's block, ~1 MB, not the 150 MB copy of V3's
/// q_b). A stored value that is an Inf or NaN, or a file that shrank under its map, is reported as
/// the reader's float32 copy reports it (StoredBf16Rows::to_float), so the error reads as on every
/// other path.
ConstRowMapF block_floats(const CoeffBlock& block) {
  if (!block.is_stored()) return block.transposed();
  thread_local RowMatrixF scratch;
  const StoredBf16Rows& stored = *block.stored;
  scratch.resize(block.cols(), block.rows());
  if (!stored.rows_to_float(block.source_row, block.cols(), scratch.data()))
    stored.throw_read_error("contraction");
  return ConstRowMapF(scratch.data(), block.cols(), block.rows());
}

}  // namespace

/// F with F Fᵀ = G (see the file comment); `lower` when F is the Cholesky factor.
struct LatentFactor {
  RowMatrixF f;
  bool lower = false;
};

/// `matrix` (column-major, double) as a row-major float32 matrix (copy_in_tiles).
RowMatrixF row_major_float(const MatrixD& matrix) {
  RowMatrixF out(matrix.rows(), matrix.cols());
  copy_in_tiles(matrix, out);
  return out;
}

/// The true basis's Gram in double: the float32 Gram of the rows, with a side's row gains
/// (FactorSide::row_gains) applied here as diag(g) G diag(g), where the rows kept their bf16 values
/// for kvrank's own bf16 kernel. Column by column over the threads (V3's 1536² took 4 ms serially,
/// the other thread waiting).
MatrixD true_gram(const FactorSide& side, const LayerKernels& kernels) {
  MatrixF gram_f;
  basis_gram(side, gram_f, kernels, Triangles::both);
  const Index m = gram_f.rows();
  MatrixD gram;
  fit_buffer(gram, m, m);  // mapped at once: V3's 19 MB faulted page by page, 3 % of a run
  const bool gains = !side.row_gains.empty();
#pragma omp parallel for schedule(static) if (copy_worth_threads(m * m))
  for (Index j = 0; j < m; ++j) {
    if (!gains) {
      gram.col(j) = gram_f.col(j).cast<double>();
      continue;
    }
    const Eigen::Map<const VectorD> g(side.row_gains.data(), m);
    gram.col(j) = g.cwiseProduct(gram_f.col(j).cast<double>()) * g[j];
  }
  return gram;
}

/// true_gram with its rows and columns in `order` (latent_order.hpp).
MatrixD ordered_gram(const FactorSide& side, const LayerKernels& kernels,
                     const LatentOrder& order) {
  MatrixD gram = true_gram(side, kernels);
  if (order.order().empty()) return gram;
  return gram(order.order(), order.order());
}

/// F for the basis rows in `order` from `lower`, their Gram G' (G's rows and columns in that
/// order): F Fᵀ = G'.
LatentFactor factor_of_gram(MatrixD lower, const FactorSide& side, const LayerKernels& kernels,
                            const LatentOrder& order) {
  if (cholesky_lower(lower)) return {row_major_float(lower), true};
  // Not positive definite (rare: rank-deficient rows): the Gram again, for LDLᵀ, rather than a copy
  // of every Gram kept for it.
  lower.resize(0, 0);
  Eigen::LDLT<MatrixD> ldlt(ordered_gram(side, kernels, order));  // G' = Pᵀ L D Lᵀ P
  const VectorD root_d = ldlt.vectorD().cwiseMax(0.0).cwiseSqrt();
  MatrixD l = ldlt.matrixL();
  const MatrixD f = ldlt.transpositionsP().transpose() * (l * root_d.asDiagonal());
  return {row_major_float(f), false};
}

/// F for the basis rows in `order`: F Fᵀ = G'.
LatentFactor latent_factor(const FactorSide& side, const LayerKernels& kernels,
                           const LatentOrder& order) {
  return factor_of_gram(ordered_gram(side, kernels, order), side, kernels, order);
}

/// Every head of one side as k × p row-major coordinates X_hᵀ (see the file comment), written by
/// tasks — a slab of heads one TRMM takes (heads_per_slab), else one head — that any thread takes
/// as it comes free (write_next).
class SideCoordinates {
 public:
  /// `storage`: a workspace buffer, used unless the heads are the basis's own rows.
  /// `prepared`: the latent factor (latent_sides), else formed here.
  SideCoordinates(const FactorSide& side, Coordinates how, RowMatrixF& storage,
                  const LayerKernels& kernels, std::optional<LatentFactor> prepared = std::nullopt)
      : side_(side), k_(side.head_cols), storage_(storage), kernels_(kernels.products) {
    if (how == Coordinates::raw && !side.row_gains.empty())  // analyze_layer folds them first
      throw std::logic_error("contraction: raw coordinates of a side with its gains beside it");
    const Index heads = static_cast<Index>(side.heads.size());
    dim_ = coordinate_dimension(side, how);
    if (how == Coordinates::raw && plain_slices(side)) {
      // The heads' own rows of the basis: nothing to compute or copy.
      base_ = side.basis.data();
      ld_ = dim_;
      for (const auto& blocks : side.heads) {
        offsets_.push_back(identity_slice_row(blocks, k_) * ld_);
        runs_.push_back(column_runs(blocks, k_, dim_, nullptr));
      }
      return;
    }
    if (how == Coordinates::latent) {
      ordered_ = &order_.emplace(side);
      factor_ = prepared ? std::move(*prepared) : latent_factor(side, kernels, *ordered_);
    }
    fit_storage(side, how, storage_);
    base_ = storage_.data();
    ld_ = dim_;
    for (Index h = 0; h < heads; ++h) {
      offsets_.push_back(h * k_ * ld_);
      runs_.push_back(column_runs(side.heads[h], k_, dim_, factor_.lower ? ordered_ : nullptr));
    }
    slab_ = factor_.lower ? heads_per_slab(side, *ordered_) : 1;
    tasks_ = heads == 0 ? 0 : (heads + slab_ - 1) / slab_;
  }

  /// Sizes `storage` for `side`'s coordinates in `how` (fit_buffer: pages mapped at once, over the
  /// threads where called outside a parallel region).
  static void fit_storage(const FactorSide& side, Coordinates how, RowMatrixF& storage) {
    fit_buffer(storage, static_cast<Index>(side.heads.size()) * side.head_cols,
               coordinate_dimension(side, how));
  }

  /// Writes the next task no thread has taken yet; false once every task is taken. Each task
  /// writes rows of its own, with the BLAS on the calling thread inside a parallel region: the
  /// same bits whichever thread takes it.
  bool write_next() {
    const Index task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= tasks_) return false;
    write_task(task);
    return true;
  }

  /// Frees F once every task is written: the rest of the layer reads the coordinates only (V3's
  /// query factor: 9 MB).
  void release_factor() { factor_ = LatentFactor{}; }

  Index head_cols() const noexcept { return k_; }
  Index dim() const noexcept { return dim_; }
  Index ld() const noexcept { return ld_; }
  /// Head h's k × p coordinates, row-major with leading dimension ld().
  const float* head(Index h) const { return base_ + offsets_[h]; }
  /// Head h's coordinate rows by width (latent_order.hpp): past it a row is zero.
  const std::vector<ColumnRun>& runs(Index h) const { return runs_[h]; }

 private:
  /// Writes task `task`: a slab of heads (write_slab), else one head's blocks.
  void write_task(Index task) {
    const RowMatrixF& rows = ordered_ ? factor_.f : side_.basis;
    const Index heads = static_cast<Index>(side_.heads.size());
    if (slab_ > 1)
      return write_slab(side_, *ordered_, rows, task * slab_, std::min(heads, (task + 1) * slab_));
    const Index h = task;
    // Blocks on columns of their own each write their rows whole (MLA's): no pass that zeroes
    // the rows first and none that adds to them (V3's queries: 150 MB each a layer).
    const bool assign = disjoint_columns(side_.heads[h], k_);
    if (!assign) storage_.middleRows(h * k_, k_).setZero();  // a head at a time, not 150 MB
    if (assign) zero_uncovered_rows(side_.heads[h], h);
    for (const CoeffBlock& block : side_.heads[h]) {
      const Index first = ordered_ ? ordered_->position(block.basis_row) : block.basis_row;
      add_block(block, first, rows, factor_.lower, h, assign);
    }
  }

  /// Whether no two blocks fill the same head column (the coordinate rows of one are then
  /// blockᵀ · rows alone).
  static bool disjoint_columns(const std::vector<CoeffBlock>& blocks, Index head_cols) {
    std::vector<bool> taken(static_cast<std::size_t>(head_cols), false);
    for (const CoeffBlock& block : blocks) {
      for (Index c = block.head_col; c < block.head_col + block.cols(); ++c) {
        if (taken[static_cast<std::size_t>(c)]) return false;
        taken[static_cast<std::size_t>(c)] = true;
      }
    }
    return true;
  }

  /// Heads a TRMM takes at once: kSlabHeads where every head is one dense block over all its
  /// columns, from the same basis rows of a lower-triangular F (MLA's queries: q_b's rows of each
  /// head over all of q_a's); else 1. The library packs F's triangle once a call: a head at a time,
  /// a DeepSeek-V3 layer packed 128 copies of 4.7 MB. Each row of the result is the same sum
  /// however many rows a call takes (tested against a head at a time).
  static Index heads_per_slab(const FactorSide& side, const LatentOrder& order) {
    constexpr Index kSlabHeads = 8;
    // (first basis row in the order, rows) of a head's one whole block; (-1, -1) for any other.
    auto shape = [&](const std::vector<CoeffBlock>& blocks) {
      const bool whole = blocks.size() == 1 && !blocks[0].is_identity() &&
                         blocks[0].head_col == 0 && blocks[0].cols() == side.head_cols;
      if (!whole) return std::pair{Index{-1}, Index{-1}};
      return std::pair{order.position(blocks[0].basis_row), blocks[0].rows()};
    };
    if (side.heads.empty() || shape(side.heads.front()).first < 0) return 1;
    const auto same = [&](const auto& blocks) { return shape(blocks) == shape(side.heads[0]); };
    return std::all_of(side.heads.begin(), side.heads.end(), same) ? kSlabHeads : 1;
  }

  /// Heads [begin, end) of a side heads_per_slab() takes at once: each head's rows placed for the
  /// TRMM (place_for_trmm), the triangle's TRMM one call for all of them.
  void write_slab(const FactorSide& side, const LatentOrder& order, const RowMatrixF& rows,
                  Index begin, Index end) {
    const CoeffBlock& shape = side.heads[begin].front();
    const Index first = order.position(shape.basis_row);
    for (Index h = begin; h < end; ++h)
      place_for_trmm(block_floats(side.heads[h].front()), first, rows,
                     storage_.data() + h * k_ * ld_);
    trmm_right_lower(kernels_, (end - begin) * k_, shape.rows(), rows.data() + first * ld_ + first,
                     ld_, storage_.data() + begin * k_ * ld_ + first, ld_);
  }

  /// A block's coordinate rows at `out`, written whole but for their TRMM by F's triangle (rows in
  /// the order of F from `first`): the GEMM for the columns before `first`, the coefficients
  /// (`coeffs_t`, the block's transpose: block_floats) where the triangle's product goes (the TRMM
  /// in place), zeros past it.
  void place_for_trmm(const ConstRowMapF& coeffs_t, Index first, const RowMatrixF& rows,
                      float* out) {
    const Index cols = coeffs_t.rows();
    const Index count = coeffs_t.cols();
    gemm(kernels_, false, cols, first, count, coeffs_t.data(), count, rows.data() + first * ld_,
         ld_, 0.0f, out, ld_);
    StridedMapF triangle_out(out + first, cols, dim_ - first, Eigen::OuterStride<>(ld_));
    triangle_out.leftCols(count) = coeffs_t;
    triangle_out.rightCols(dim_ - first - count).setZero();
  }

  /// Zeroes head h's coordinate rows of the head columns no block fills.
  void zero_uncovered_rows(const std::vector<CoeffBlock>& blocks, Index h) {
    std::vector<bool> covered(static_cast<std::size_t>(k_), false);
    for (const CoeffBlock& block : blocks)
      for (Index c = block.head_col; c < block.head_col + block.cols(); ++c)
        covered[static_cast<std::size_t>(c)] = true;
    for (Index c = 0; c < k_; ++c)
      if (!covered[static_cast<std::size_t>(c)]) storage_.row(h * k_ + c).setZero();
  }

  /// X_hᵀ rows [head_col, head_col + cols) += blockᵀ · rows[first, first + block rows) (or =,
  /// with `assign`), `first` the block's basis row in the order of `rows`. With a lower-triangular
  /// F those rows vanish right of the diagonal: a GEMM for the columns before `first`, a TRMM for
  /// the triangle.
  void add_block(const CoeffBlock& block, Index first, const RowMatrixF& rows, bool lower, Index h,
                 bool assign) {
    float* out = storage_.data() + (h * k_ + block.head_col) * ld_;
    const Index count = block.rows();
    const float beta = assign ? 0.0f : 1.0f;
    if (block.is_identity()) {
      StridedMapF target(out, count, dim_, Eigen::OuterStride<>(ld_));
      if (assign) {
        target = rows.middleRows(first, count);
      } else {
        target += rows.middleRows(first, count);
      }
      return;
    }
    const ConstRowMapF coeffs_t = block_floats(block);  // cols × count
    const Index cols = coeffs_t.rows();
    if (!lower) {
      gemm(kernels_, false, cols, dim_, count, coeffs_t.data(), count, rows.data() + first * ld_,
           ld_, beta, out, ld_);
      return;
    }
    const float* triangle_l = rows.data() + first * ld_ + first;
    if (assign) {  // the TRMM in place, where its result goes
      place_for_trmm(coeffs_t, first, rows, out);
      trmm_right_lower(kernels_, cols, count, triangle_l, ld_, out + first, ld_);
      return;
    }
    gemm(kernels_, false, cols, first, count, coeffs_t.data(), count, rows.data() + first * ld_,
         ld_, beta, out, ld_);
    StridedMapF triangle_out(out + first, cols, dim_ - first, Eigen::OuterStride<>(ld_));
    RowMatrixF triangle = coeffs_t;
    trmm_right_lower(kernels_, cols, count, triangle_l, ld_, triangle.data(), count);
    triangle_out.leftCols(count) += triangle;
  }

  const FactorSide& side_;
  Index k_;
  RowMatrixF& storage_;
  FloatKernels kernels_;
  std::optional<LatentOrder> order_;      ///< in latent coordinates only
  const LatentOrder* ordered_ = nullptr;  ///< &*order_, or null
  LatentFactor factor_;                   ///< F in latent coordinates
  Index dim_ = 0;
  const float* base_ = nullptr;
  Index ld_ = 0;
  std::vector<Index> offsets_;
  std::vector<std::vector<ColumnRun>> runs_;
  Index slab_ = 1;   ///< heads a task writes
  Index tasks_ = 0;  ///< none when the heads are the basis's own rows
  std::atomic<Index> next_task_{0};
};

/// Both sides' coordinates where `plan` takes two sides in latent coordinates and a second
/// thread is free: the larger side's Gram over all threads, then its Cholesky factor on one thread
/// (LAPACK's on the calling thread, for the same bits on any count) while another forms the
/// smaller side's Gram and factor and then writes the smaller side's heads until the larger factor
/// is done. A V3 layer's 1536² query factor takes ~35 ms; the keys' Gram and factor ~20 ms of it,
/// and the other thread was idle for the rest. {left, right}; elsewhere none.
std::pair<std::shared_ptr<SideCoordinates>, std::shared_ptr<SideCoordinates>> latent_sides(
    const HeadFactors& factors, const ContractionPlan& plan, ComputeWorkspace& workspace,
    const LayerKernels& kernels) {
  const bool both_latent =
      !factors.symmetric && plan.left == Coordinates::latent && plan.right == Coordinates::latent;
  if (!both_latent || available_threads() < 2 || !blas_nests_in_openmp()) return {};
  const bool left_larger = factors.left.rows() >= factors.right.rows();
  const FactorSide& larger = left_larger ? factors.left : factors.right;
  const FactorSide& smaller = left_larger ? factors.right : factors.left;
  RowMatrixF& larger_storage =
      left_larger ? workspace.left_coordinates : workspace.right_coordinates;
  RowMatrixF& smaller_storage =
      left_larger ? workspace.right_coordinates : workspace.left_coordinates;
  // Sized here, its pages mapped by all threads, not by the one that writes it first.
  SideCoordinates::fit_storage(smaller, Coordinates::latent, smaller_storage);
  const LatentOrder larger_order(larger);
  MatrixD larger_gram = ordered_gram(larger, kernels, larger_order);
  LatentFactor larger_factor;
  std::shared_ptr<SideCoordinates> smaller_side;
  std::atomic<bool> larger_factored{false};
  side_by_side(
      [&] {
        larger_factor = factor_of_gram(std::move(larger_gram), larger, kernels, larger_order);
        larger_factored.store(true, std::memory_order_release);
      },
      [&] {
        smaller_side = std::make_shared<SideCoordinates>(smaller, Coordinates::latent,
                                                         smaller_storage, kernels);
        while (!larger_factored.load(std::memory_order_acquire) && smaller_side->write_next()) {
        }
      });
  auto larger_side = std::make_shared<SideCoordinates>(larger, Coordinates::latent, larger_storage,
                                                       kernels, std::move(larger_factor));
  if (left_larger) return {std::move(larger_side), std::move(smaller_side)};
  return {std::move(smaller_side), std::move(larger_side)};
}

/// Writes the coordinates of `left` and `right` (null: none) over the threads, the wider side's
/// first, each thread taking the next task of either as it comes free: the narrower side's heads,
/// each a small task, fill in where the wider side's slabs end unevenly (V3: 16 slabs of ~35 ms).
void write_coordinates(SideCoordinates& left, SideCoordinates* right) {
  const bool right_first = right && right->dim() > left.dim();
  SideCoordinates& first = right_first ? *right : left;
  SideCoordinates* second = right_first ? &left : right;
  ParallelFailure failure;
#pragma omp parallel if (blas_nests_in_openmp())
  failure.run([&] {
    while (first.write_next()) {
    }
    while (second && second->write_next()) {
    }
  });
  first.release_factor();
  if (second) second->release_factor();
  failure.rethrow();
}

namespace {

/// Rows [start, start + count) of M_h = X_h Y_hᵀ = (X_hᵀ columns)ᵀ · Y_hᵀ into `out` (count × q,
/// row-major): a product per run of Y's rows (column_runs), each only as wide as its rows, the
/// widest first; the columns past it are zero.
void product_rows(const SideCoordinates& x, const SideCoordinates& y, Index h, Index start,
                  Index count, FloatKernels kernels, float* out) {
  const Index q = y.dim();
  const std::vector<ColumnRun>& runs = y.runs(h);
  const Index widest = runs.empty() ? 0 : runs.front().width;
  float beta = 0.0f;
  for (const ColumnRun& run : runs) {
    gemm(kernels, true, count, run.width, run.count, x.head(h) + run.first * x.ld() + start, x.ld(),
         y.head(h) + run.first * y.ld(), y.ld(), beta, out, q);
    beta = 1.0f;
  }
  if (widest < q) {
    for (Index r = 0; r < count; ++r) std::fill(out + r * q + widest, out + (r + 1) * q, 0.0f);
  }
}

/// Σ over row chunks of M_h = X_h Y_hᵀ of the chunk's H × H Gram, in double, over rows scaled and
/// centred first (centred_products.hpp: heads 0.999… alike keep their differences).
CentredProducts chunked_inner_products(const SideCoordinates& x, const SideCoordinates& y,
                                       Index heads, Index k, RowMatrixF& rows,
                                       const LayerKernels& kernels) {
  const Index p = x.dim();
  const Index q = y.dim();
  CentredAccumulator inner(heads);
  if (heads == 0 || p == 0 || q == 0 || k == 0) return inner.products();
  const Index chunk = std::clamp<Index>(kContractionChunkFloats / (heads * q), 1, p);
  fit_buffer(rows, heads, chunk * q);
  [[maybe_unused]] const bool nested = blas_nests_in_openmp();  // only in the OpenMP clause
  for (Index start = 0; start < p; start += chunk) {
    const Index count = std::min(chunk, p - start);
    ParallelFailure failure;
#pragma omp parallel for schedule(dynamic) if (nested)
    for (Index h = 0; h < heads; ++h) {
      failure.run([&] {
        product_rows(x, y, h, start, count, kernels.latent_products, rows.data() + h * rows.cols());
      });
    }
    failure.rethrow();
    inner.add(rows.data(), count * q, rows.cols(), kernels.products);
  }
  return inner.products();
}

/// Whether `runs` are rows [0, k) in order, some narrower than `dim`: rows self_product_by_runs
/// takes a run at a time. (column_runs lists them widest first, so they come in row order where
/// the rows narrow, as MLA's keys do.)
bool runs_in_row_order(const std::vector<ColumnRun>& runs, Index dim) {
  if (runs.size() < 2 && (runs.empty() || runs.front().width == dim)) return false;
  Index next = 0;
  for (const ColumnRun& run : runs) {
    if (run.first != next) return false;
    next += run.count;
  }
  return true;
}

}  // namespace

MatrixD self_product_by_runs(Index k, Index dim, const float* rows, Index ld,
                             const std::vector<ColumnRun>& runs) {
  // syrk_in_double's path does not depend on the threads: the same bits on any thread count.
  if (!runs_in_row_order(runs, dim)) return syrk_in_double(k, dim, rows, ld);
  MatrixD out = MatrixD::Zero(k, k);
  for (const ColumnRun& run : runs) {
    // The run's rows against themselves and the rows before them, as deep as the run's reach: past
    // it the run's rows are zero, so each entry's chain is the whole depth's.
    const Index end = run.first + run.count;
    const MatrixD part = syrk_in_double(end, run.width, rows, ld);
    out.block(run.first, 0, run.count, end) = part.bottomRows(run.count);
    out.block(0, run.first, end, run.count) = part.rightCols(run.count);
  }
  return out;
}

MatrixD self_product(const SideCoordinates& side, Index h) {
  return self_product_by_runs(side.head_cols(), side.dim(), side.head(h), side.ld(), side.runs(h));
}

ContractedHeads contract_heads(const HeadFactors& factors, const ContractionPlan& plan,
                               ComputeWorkspace& workspace, HeadRanks head_ranks,
                               const LayerKernels& kernels) {
  const Index heads = factors.num_heads();
  const Index k = factors.left.head_cols;
  auto [left, right] = latent_sides(factors, plan, workspace, kernels);
  if (!left) {
    left = std::make_shared<SideCoordinates>(factors.left, plan.left, workspace.left_coordinates,
                                             kernels);
    if (!factors.symmetric)
      right = std::make_shared<SideCoordinates>(factors.right, plan.right,
                                                workspace.right_coordinates, kernels);
  }
  write_coordinates(*left, right.get());
  ContractedHeads out;
  out.right = right;
  out.centred = chunked_inner_products(*left, right ? *right : *left, heads, k,
                                       workspace.contracted_rows, kernels);
  out.inner = out.centred.inner();
  // The coordinates stay only for the heads' own products (self_product), which a table skips.
  if (head_ranks == HeadRanks::computed) {
    out.left = left;
  } else {
    out.right.reset();
  }
  return out;
}

}  // namespace kvrank::detail

// bf16 bases read in place (FactorSide::stored, layer_factors with Bases::stored_bf16): which
// sides the layout leaves stored, the same metrics as the float32 copies bit for bit (whichever
// path the CPU takes), every value the kernel cannot take (NaN, Inf, a scale outside float32's
// Gram range) handed to the reader's copy, and a file that shrinks under its map reported by the
// reader. The kernel's own reading of stored rows (awkward shapes, rows at odd addresses, the
// magnitude scan) is tagged [bf16_kernel] and runs where the CPU has AVX512-BF16.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/guarded_read.hpp"
#include "io/safetensors_writer.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/io/checkpoint.hpp"
#include "kvrank/io/dtype.hpp"
#include "kvrank/layout/layout.hpp"
#include "kvrank/metric/diversity.hpp"
#include "kvrank/metric/gram_backend.hpp"
#include "layout/family_detail.hpp"
#include "metric/bf16_gram_kernel.hpp"
#include "metric/side_gram.hpp"
#include "support/backend_guard.hpp"
#include "support/catch.hpp"
#include "support/factor_test_util.hpp"
#include "support/layer_metrics_check.hpp"
#include "support/test_util.hpp"

using namespace kvrank;
using kvrank::test::TempDir;

namespace {

/// A checkpoint of `family` in `dtype` written by the independent numpy writer (GQA, 2 layers).
Checkpoint write_llama(const TempDir& dir, const std::string& family, const std::string& dtype) {
  test::write_reference_checkpoint(
      dir, "write_family_checkpoints.py", family,
      "--layers 2 --heads 4 --kv-heads 2 --head-dim 16 --dtype " + dtype);
  return Checkpoint::open(dir / "ckpt");
}

/// Sets the Gram backend to bf16 (every size on the bf16 kernels) where the build and CPU have one,
/// so that the stored rows are read in place on small test shapes; restored when the test ends.
class Bf16Backend {
 public:
  Bf16Backend() {
    if (bf16_gram_supported()) set_gram_backend(GramBackend::bf16);
  }

 private:
  test::BackendGuard guard_;
};

/// m × n bf16 values as stored bytes, shifted `offset` bytes from an aligned start (a safetensors
/// tensor may start at any byte), with a to_float that counts its calls.
struct StoredCopy {
  std::vector<std::byte> storage;
  RowMatrixF values;
  int copies = 0;

  StoredCopy(const RowMatrixF& rows, std::size_t offset) : storage(offset + rows.size() * 2) {
    values = rows;
    for (Index i = 0; i < rows.size(); ++i) {
      const std::uint16_t bits = f32_to_bf16(rows.data()[i]);
      std::memcpy(storage.data() + offset + 2 * i, &bits, 2);
    }
    bytes = std::span<const std::byte>(storage).subspan(offset);
  }
  StoredBf16Rows stored() {
    return {bytes,
            values.rows(),
            values.cols(),
            [this] {
              ++copies;
              return values;
            },
            {}};
  }
  std::span<const std::byte> bytes;
};

/// Random normal values rounded to bf16.
RowMatrixF rounded_bf16_rows(Index rows, Index cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RowMatrixF out(rows, cols);
  for (Index i = 0; i < out.size(); ++i) out.data()[i] = bf16_to_f32(f32_to_bf16(normal(rng)));
  return out;
}

/// MHA-shaped factors (4 heads of width 8 over 48 columns), their query side stored.
HeadFactors stored_query_factors(StoredCopy& query, const RowMatrixF& keys) {
  HeadFactors factors;
  for (FactorSide* side : {&factors.left, &factors.right}) {
    side->head_cols = 8;
    for (Index h = 0; h < 4; ++h) side->heads.push_back({CoeffBlock::identity(h * 8, 8)});
  }
  factors.left.stored = query.stored();
  factors.right.basis = keys;
  return factors;
}

std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const std::exception& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_CASE("stored bf16: the layout leaves plain bf16 q, k and v projections stored", "[stored]") {
  TempDir bf16_dir;
  const Checkpoint bf16 = write_llama(bf16_dir, "llama", "BF16");
  const ModelLayout layout = detect_layout(bf16, {});
  const HeadFactors qk = layer_factors(bf16, layout, 1, Repr::qk, Bases::stored_bf16);
  CHECK((qk.left.stored && qk.right.stored));
  CHECK((qk.left.basis.size() == 0 && qk.left.rows() == 64 && qk.left.cols() == layout.d_model));
  CHECK((qk.right.rows() == 32 && qk.right.cols() == layout.d_model));
  const HeadFactors ov = layer_factors(bf16, layout, 1, Repr::ov, Bases::stored_bf16);
  CHECK((!ov.left.stored && ov.right.stored));  // o is read transposed: copied
  CHECK(layer_factors(bf16, layout, 1, Repr::v, Bases::stored_bf16).left.stored);
  // The default, and the copy of a stored side, are the float32 bases exactly.
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v}) {
    const HeadFactors copied =
        with_float_bases(layer_factors(bf16, layout, 0, repr, Bases::stored_bf16));
    const HeadFactors plain = layer_factors(bf16, layout, 0, repr);
    CHECK_FALSE((plain.has_stored_basis() || copied.has_stored_basis()));
    CHECK(copied.left.basis == plain.left.basis);
    CHECK(copied.right.basis == plain.right.basis);
  }
  // float32 weights and QK-norm gains (folded into the rows) are never stored.
  TempDir f32_dir;
  const Checkpoint f32 = write_llama(f32_dir, "llama", "F32");
  CHECK_FALSE(layer_factors(f32, detect_layout(f32, {}), 0, Repr::qk, Bases::stored_bf16)
                  .has_stored_basis());
  TempDir qwen_dir;
  const Checkpoint qwen = write_llama(qwen_dir, "qwen3", "BF16");
  const HeadFactors normed =
      layer_factors(qwen, detect_layout(qwen, {}), 0, Repr::qk, Bases::stored_bf16);
  CHECK_FALSE(normed.has_stored_basis());
}

TEST_CASE("stored bf16: the same metrics as the float32 copies, bit for bit", "[stored]") {
  const Bf16Backend bf16_grams;
  TempDir dir;
  const Checkpoint checkpoint = write_llama(dir, "llama", "BF16");
  const ModelLayout layout = detect_layout(checkpoint, {});
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v}) {
    INFO(repr_name(repr));
    for (int layer : {0, 1}) {
      const LayerMetrics stored =
          analyze_layer(layer_factors(checkpoint, layout, layer, repr, Bases::stored_bf16));
      const LayerMetrics copied = analyze_layer(layer_factors(checkpoint, layout, layer, repr));
      test::require_same_layer(stored, copied, true);
    }
  }
}

/// Every field of `a` within `rel` (relative to each field's largest value) of `b`'s.
void require_close_layer(const LayerMetrics& a, const LayerMetrics& b, double rel) {
  auto close = [rel](const std::vector<double>& x, const std::vector<double>& y) {
    REQUIRE(x.size() == y.size());
    double largest = 0;
    for (double value : y) largest = std::max(largest, std::abs(value));
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(std::abs(x[i] - y[i]) <= rel * largest);
  };
  for (auto [x, y] : {std::pair{a.erank, b.erank}, std::pair{a.erank_centered, b.erank_centered},
                      std::pair{a.mean_similarity, b.mean_similarity}}) {
    CHECK(std::abs(x - y) <= rel * std::max(std::abs(y), 1.0));
  }
  close(a.eigenvalues, b.eigenvalues);
  close(a.eigenvalues_centered, b.eigenvalues_centered);
  close(a.head_erank, b.head_erank);
  close(a.head_norm, b.head_norm);
  CHECK(a.zero_heads == b.zero_heads);
}

TEST_CASE("stored bf16: MLA's gains beside their rows give the folded bases' metrics",
          "[stored][mla]") {
  const bool bf16_kernel = GENERATE(false, true);
  INFO("bf16 Grams forced: " << bf16_kernel);
  std::optional<Bf16Backend> bf16_grams;
  if (bf16_kernel) bf16_grams.emplace();
  TempDir dir;
  test::write_reference_checkpoint(dir, "write_latent_checkpoints.py", "mla",
                                   "--dtype BF16 --q-lora-rank 10 --heads 6");
  const Checkpoint checkpoint = Checkpoint::open(dir / "ckpt");
  const ModelLayout layout = detect_layout(checkpoint, {});
  for (Repr repr : {Repr::qk, Repr::ov, Repr::k, Repr::v}) {
    INFO(repr_name(repr));
    for (int layer : {0, 1}) {
      const HeadFactors beside = layer_factors(checkpoint, layout, layer, repr, Bases::stored_bf16);
      const HeadFactors folded = layer_factors(checkpoint, layout, layer, repr);
      REQUIRE(beside.has_row_gains());
      // The pairwise path folds the gains first: the bits of gains folded while loading.
      test::require_same_layer(analyze_layer(beside, Contraction::pairwise),
                               analyze_layer(folded, Contraction::pairwise), true);
      // The latent coordinates apply them to the rows' Gram, diag(g) G diag(g) in double, where
      // the folded rows were rounded to float32 first: the two agree to float32's round-off.
      require_close_layer(analyze_layer(beside, Contraction::latent),
                          analyze_layer(folded, Contraction::latent), 2e-6);
      // Rows beyond 2^32 would overflow their float32 Gram, whatever their gains: folded first
      // (the same true basis: rows ×2^70, gains ×2^-70, both exact).
      // The same rows stored (read where they lie, their magnitudes too) or copied to float32.
      HeadFactors shifted = with_each_side(beside, with_basis_copied);
      std::vector<std::unique_ptr<StoredCopy>> copies;
      HeadFactors shifted_stored = beside;
      for (auto [side, stored] : {std::pair{&shifted.left, &shifted_stored.left},
                                  {&shifted.right, &shifted_stored.right}}) {
        if (side->row_gains.empty()) continue;
        side->basis *= std::ldexp(1.0f, 70);
        for (double& gain : side->row_gains) gain = std::ldexp(gain, -70);
        copies.push_back(std::make_unique<StoredCopy>(side->basis, 1));
        stored->stored = copies.back()->stored();
        stored->row_gains = side->row_gains;
      }
      test::require_same_layer(analyze_layer(shifted), analyze_layer(folded), true);
      test::require_same_layer(analyze_layer(shifted_stored, Contraction::latent),
                               analyze_layer(folded, Contraction::latent), true);
    }
  }
}

TEST_CASE("stored bf16: NaN, Inf and extreme scales go to the reader's copy", "[stored]") {
  const Bf16Backend bf16_grams;
  std::mt19937 rng(7);
  const RowMatrixF keys = rounded_bf16_rows(32, 48, rng);
  RowMatrixF queries = rounded_bf16_rows(32, 48, rng);
  SECTION("a NaN or an Inf: the reader's error") {
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
      queries(31, 47) = bad;  // the scan's scalar tail
      StoredCopy query(queries, 1);
      HeadFactors factors = stored_query_factors(query, keys);
      factors.left.stored->to_float = []() -> RowMatrixF {
        throw Error("q.safetensors", "q_proj", "contains NaN");
      };
      CHECK(error_of([&] { analyze_layer(factors); }) == "q.safetensors: q_proj: contains NaN");
      queries(31, 47) = 1.0f;
      queries(0, 5) = bad;  // a vector lane
      StoredCopy front(queries, 0);
      HeadFactors front_factors = stored_query_factors(front, keys);
      front_factors.left.stored->to_float = factors.left.stored->to_float;
      CHECK(error_of([&] { analyze_layer(front_factors); }) ==
            "q.safetensors: q_proj: contains NaN");
      queries(0, 5) = 1.0f;
    }
  }
  SECTION("weights beyond 2^32: scaled on the copy, the same numbers as scaled floats") {
    const RowMatrixF huge = std::ldexp(1.0f, 60) * queries;
    StoredCopy query(huge, 3);
    const HeadFactors factors = stored_query_factors(query, keys);
    const LayerMetrics stored = analyze_layer(factors);
    CHECK(query.copies == 1);
    test::require_same_layer(stored, analyze_layer(with_float_bases(factors)), true);
  }
  SECTION("ordinary weights: read in place where the kernel runs, else copied once") {
    StoredCopy query(queries, 1);
    const HeadFactors factors = stored_query_factors(query, keys);
    const LayerMetrics stored = analyze_layer(factors);
    CHECK(query.copies == (own_kernel_takes_bf16(32, 48) ? 0 : 1));
    test::require_same_layer(stored, analyze_layer(with_float_bases(factors)), true);
  }
}

TEST_CASE("stored bf16: a file that shrinks under its map is the reader's one error", "[stored]") {
  const Bf16Backend bf16_grams;
  TempDir dir;
  const Checkpoint checkpoint = write_llama(dir, "llama", "BF16");
  const ModelLayout layout = detect_layout(checkpoint, {});
  const HeadFactors factors = layer_factors(checkpoint, layout, 1, Repr::qk, Bases::stored_bf16);
  REQUIRE(factors.has_stored_basis());
  for (const std::string& name : layer_tensor_names(layout, 1))
    checkpoint.release(checkpoint.at(name));
  const std::filesystem::path file = dir / "ckpt" / "model.safetensors";
  std::filesystem::resize_file(file, 4096);
  const std::string shrank = error_of([&] { analyze_layer(factors); });
  CHECK(shrank.find(file.string()) == 0);
  CHECK(shrank.find(detail::kFileShrank) != std::string::npos);
  // The Gram's own read (the scan passed, then the file shrank): the same error.
  MatrixF gram;
  const std::string in_gram = error_of([&] {
    detail::gram_of_stored(*factors.left.stored, gram, {true, detail::FloatKernels::blas},
                           detail::Triangles::upper);
  });
  CHECK(in_gram.find(detail::kFileShrank) != std::string::npos);
}

TEST_CASE("stored bf16 kernel: the Gram of stored rows has the float32 basis's bits",
          "[.bf16_kernel][bf16_kernel]") {
  std::mt19937 rng(11);
  for (const auto& [m, d] : {std::pair<Index, Index>{1, 1},
                             {5, 3},
                             {17, 33},
                             {47, 255},
                             {49, 257},
                             {290, 513},
                             {64, 1024}}) {
    for (std::size_t offset : {0, 1, 2}) {
      INFO(m << " × " << d << " at +" << offset);
      const RowMatrixF rows = rounded_bf16_rows(m, d, rng);
      StoredCopy stored(rows, offset);
      MatrixF from_stored = MatrixF::Zero(m, m);
      MatrixF from_float = MatrixF::Zero(m, m);
      REQUIRE(detail::bf16_kernel_gram_upper(stored.stored(), from_stored));
      REQUIRE(detail::bf16_kernel_gram_upper(rows, from_float));
      for (Index j = 0; j < m; ++j) {
        for (Index i = 0; i <= j; ++i)
          REQUIRE(std::bit_cast<std::uint32_t>(from_stored(i, j)) ==
                  std::bit_cast<std::uint32_t>(from_float(i, j)));
      }
    }
  }
}

TEST_CASE("stored bf16: the magnitude scan finds the largest value, Inf and NaN", "[stored]") {
  std::mt19937 rng(5);
  // One row: tails of every length, and a row longer than a guarded read takes.
  for (Index count : {1, 31, 32, 33, 1000, 600'000}) {
    for (std::size_t offset : {0, 1}) {
      INFO(count << " values at +" << offset);
      RowMatrixF values = rounded_bf16_rows(1, count, rng);
      values(0, count / 2) = -1024.0f;  // the largest magnitude is negative
      CHECK(row_largest_magnitudes(StoredCopy(values, offset).stored()) ==
            std::vector<float>{1024.0f});
      values(0, count - 1) = std::numeric_limits<float>::infinity();
      CHECK_FALSE(row_largest_magnitudes(StoredCopy(values, offset).stored()));
      values(0, count - 1) = 1.0f;
      values(0, 0) = -std::numeric_limits<float>::quiet_NaN();
      CHECK_FALSE(row_largest_magnitudes(StoredCopy(values, offset).stored()));
    }
  }
  // Many rows, over several guarded reads: each row's own largest, an Inf in the last read found.
  RowMatrixF values = rounded_bf16_rows(3000, 300, rng);
  CHECK(row_largest_magnitudes(StoredCopy(values, 1).stored()) == row_largest_magnitudes(values));
  values(2999, 299) = std::numeric_limits<float>::infinity();
  CHECK_FALSE(row_largest_magnitudes(StoredCopy(values, 1).stored()));
}

TEST_CASE("stored bf16: each row's largest magnitude, read where the rows lie", "[stored]") {
  std::mt19937 rng(8);
  for (Index cols : {1, 7, 300}) {
    for (std::size_t offset : {0, 1}) {
      INFO(cols << " columns at +" << offset);
      RowMatrixF values = rounded_bf16_rows(5, cols, rng);
      values(2, cols - 1) = -4096.0f;  // a row whose largest magnitude is negative
      StoredCopy copy(values, offset);
      const std::optional<std::vector<float>> largest = row_largest_magnitudes(copy.stored());
      REQUIRE(largest);
      CHECK(*largest == row_largest_magnitudes(values));
      CHECK((*largest)[2] == 4096.0f);
      for (float bad :
           {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        values(4, 0) = bad;
        CHECK_FALSE(row_largest_magnitudes(StoredCopy(values, offset).stored()));
      }
    }
  }
}

TEST_CASE("stored bf16: a gain beside stored rows gets the factors of their float32 copy",
          "[stored]") {
  // The power of two comes from the largest |gain_i| × row i's largest magnitude, so the rows'
  // magnitudes must be read where they lie: rows near 2^70 under gains near 2^61 need ~2^-132.
  std::mt19937 rng(9);
  RowMatrixF values = rounded_bf16_rows(4, 33, rng);
  values.row(1) *= std::ldexp(1.0f, 70);  // exact: a power of two
  values.row(3) *= std::ldexp(1.0f, -90);
  const detail::Gain gain{{0.5f, std::ldexp(3.0f, 60), 7.0f}, "m.safetensors", "q_a_layernorm"};
  for (std::size_t offset : {0, 1}) {
    INFO("rows at +" << offset);
    StoredCopy copy(values, offset);
    const detail::FoldedRows stored = detail::gain_beside(copy.stored(), gain);
    const detail::FoldedRows copied = detail::gain_beside(values, gain);
    CHECK(copy.copies == 0);  // read in place
    REQUIRE(stored.stored);
    CHECK(stored.exponent == copied.exponent);
    CHECK(stored.row_gains == copied.row_gains);
    // Row 1's largest product, about 2^(70 + 62), sets the power of two.
    double largest = 0;
    for (Index i = 0; i < values.rows(); ++i) {
      const double factor = i < 3 ? static_cast<double>(gain.values[i]) : 1.0;
      largest = std::max(largest, factor * values.row(i).cwiseAbs().maxCoeff());
    }
    CHECK(stored.exponent == std::ilogb(largest));
    CHECK(stored.exponent > 120);
  }
}

TEST_CASE("stored bf16: a side keeps its first basis rows, stored or copied", "[stored]") {
  std::mt19937 rng(9);
  const RowMatrixF values = rounded_bf16_rows(6, 10, rng);
  StoredCopy copy(values, 1);
  FactorSide stored;
  stored.stored = copy.stored();
  stored.row_gains = {1, 2, 3, 4, 5, 6};
  FactorSide floats;
  floats.basis = values;
  floats.row_gains = stored.row_gains;
  for (FactorSide* side : {&stored, &floats}) keep_first_basis_rows(*side, 4);
  CHECK(stored.rows() == 4);
  CHECK(stored.stored->bytes.size() == 4 * 10 * 2);
  CHECK(with_basis_copied(stored).basis == values.topRows(4));
  CHECK(floats.basis == values.topRows(4));
  CHECK(stored.row_gains == std::vector<double>{1, 2, 3, 4});
  CHECK(floats.row_gains == stored.row_gains);
}

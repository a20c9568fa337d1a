#include "kvrank/io/checkpoint.hpp"

#include <bit>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "kvrank/base/error.hpp"
#include "kvrank/base/json_file.hpp"
#include "kvrank/base/mapped_file.hpp"
#include "support/catch.hpp"
#include "support/readers_test_files.hpp"

namespace kvrank {
namespace {

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

OpenOptions options_for(const nlohmann::json& entry) {
  OpenOptions options;
  options.npy.bf16_void = entry.value("bf16_void", false);
  return options;
}

// rows_to_f32 of each row and of the rows past the first: to_matrix's rows (Fortran-order arrays,
// GGML block types and ranges out of the tensor refused).
void check_row_ranges(const TensorView& tensor, const RowMatrixF& matrix) {
  const std::int64_t rows = matrix.rows(), cols = matrix.cols();
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  if (tensor.fortran_order || dtype_block_elements(tensor.dtype) != 1) {
    CHECK_FALSE(rows_to_f32(tensor, 0, rows, out));
    return;
  }
  for (std::int64_t first = 0; first < rows; ++first) {
    const auto count = first == 0 ? std::int64_t{1} : rows - first;
    REQUIRE(rows_to_f32(tensor, first, count, std::span<float>(out).first(count * cols)));
    CHECK(std::equal(out.begin(), out.begin() + count * cols, matrix.row(first).data()));
  }
  CHECK_FALSE(rows_to_f32(tensor, rows, 1, std::span<float>(out).first(cols)));  // past the end
}

// Checks one tensor against its description in valid.json.
void check_tensor(const TensorView& tensor, const nlohmann::json& expected) {
  INFO("tensor " << tensor.name);
  CHECK(dtype_name(tensor.dtype) == expected["dtype"].get<std::string>());
  CHECK(tensor.shape == expected["shape"].get<std::vector<std::int64_t>>());
  CHECK(tensor.byte_size() == static_cast<std::size_t>(tensor.numel()) * dtype_size(tensor.dtype));
  if (expected["values"].is_null()) return;
  const std::vector<float> values = to_f32(tensor);
  const std::vector<double> wanted = expected["values"].get<std::vector<double>>();
  REQUIRE(values.size() == wanted.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO("element " << i << ": " << values[i] << " vs " << wanted[i]);
    CHECK(same_bits(values[i], static_cast<float>(wanted[i])));  // exact, sign of zero included
  }
  if (tensor.shape.size() == 2) {
    RowMatrixF matrix = to_matrix(tensor);
    CHECK(std::equal(values.begin(), values.end(), matrix.data()));
    check_row_ranges(tensor, matrix);
  }
}

}  // namespace

TEST_CASE("checkpoint: every valid file and folder from the numpy writer",
          "[readers][checkpoint]") {
  const auto root = test::generated_files("valid");
  const nlohmann::json manifest = test::generated_manifest("valid");  // outlives the loop
  for (const nlohmann::json& entry : manifest["cases"]) {
    const std::string relative = entry["path"];
    INFO("case " << relative);
    Checkpoint checkpoint = Checkpoint::open(root / relative, options_for(entry));
    const nlohmann::json& expected_tensors = entry["tensors"];
    std::vector<std::string> expected_names;
    for (const auto& tensor : expected_tensors) expected_names.push_back(tensor["name"]);
    std::sort(expected_names.begin(), expected_names.end());
    std::vector<std::string> names;
    for (const TensorView& tensor : checkpoint.tensors()) names.push_back(tensor.name);
    CHECK(names == expected_names);  // sorted by name
    for (const auto& expected : expected_tensors) {
      const TensorView* tensor = checkpoint.find(expected["name"].get<std::string>());
      REQUIRE(tensor != nullptr);
      check_tensor(*tensor, expected);
      checkpoint.release(*tensor);  // the data must still read back after the pages are dropped
      if (!expected["values"].is_null()) CHECK(to_f32(*tensor).size() == expected["values"].size());
    }
    if (entry.contains("config")) {
      REQUIRE(checkpoint.config().has_value());
      CHECK(*checkpoint.config() == entry["config"]);
      CHECK(checkpoint.config_path().filename() == "config.json");
    } else {
      CHECK_FALSE(checkpoint.config().has_value());
    }
  }
}

TEST_CASE("checkpoint: NaN, Inf and non-float tensors are refused on conversion",
          "[readers][checkpoint]") {
  const auto root = test::generated_files("valid");
  const nlohmann::json manifest = test::generated_manifest("valid");  // outlives the loop
  for (const nlohmann::json& entry : manifest["errors"]) {
    const auto path = root / entry["path"].get<std::string>();
    const std::string tensor = entry["tensor"];
    INFO(tensor);
    Checkpoint checkpoint = Checkpoint::open(path);
    const std::string prefix = path.string() + ": " + tensor + ": ";
    CHECK_THROWS_WITH(to_f32(checkpoint.at(tensor)),
                      Catch::Matchers::StartsWith(prefix) &&
                          Catch::Matchers::Contains(entry["expect"].get<std::string>()));
  }
}

TEST_CASE("checkpoint: exact conversion messages", "[readers][checkpoint]") {
  const auto root = test::generated_files("valid");
  const auto file = root / "nonfinite.safetensors";
  Checkpoint checkpoint = Checkpoint::open(file);
  CHECK_THROWS_WITH(to_f32(checkpoint.at("bf16_nan")),
                    file.string() +
                        ": bf16_nan: contains NaN at element 2 (index [1, 0]) (expected finite "
                        "values)");
  CHECK_THROWS_WITH(to_f32(checkpoint.at("f64_too_big")),
                    file.string() +
                        ": f64_too_big: value 1e+39 at element 0 does not fit in "
                        "float32");
  CHECK_THROWS_WITH(to_f32(checkpoint.at("ints")),
                    file.string() +
                        ": ints: dtype I64 is not a floating-point type (expected F64, F32, F16, "
                        "BF16, F8_E4M3 or F8_E5M2)");
  // A range of rows is refused where it holds the NaN, converted where it does not.
  std::vector<float> row(2);
  CHECK(rows_to_f32(checkpoint.at("bf16_nan"), 0, 1, row));
  CHECK_FALSE(rows_to_f32(checkpoint.at("bf16_nan"), 1, 1, row));
  CHECK_THROWS_WITH(to_matrix(checkpoint.at("e5m2_inf")),
                    file.string() + ": e5m2_inf: expected a 2-D tensor, found shape [2]");
  CHECK_THROWS_WITH(checkpoint.at("nope"),
                    file.string() + ": nope: no such tensor in the checkpoint");
  CHECK(checkpoint.find("nope") == nullptr);
}

TEST_CASE("checkpoint: fortran-ordered arrays come back in C order", "[readers][checkpoint]") {
  // d_fortran.npy holds the same matrix as b_f4.npy, stored column-major.
  const auto root = test::generated_files("valid") / "npy";
  Checkpoint fortran = Checkpoint::open(root / "d_fortran.npy");
  Checkpoint c_order = Checkpoint::open(root / "b_f4.npy");
  REQUIRE(fortran.tensors()[0].fortran_order);
  CHECK(to_f32(fortran.tensors()[0]) == to_f32(c_order.tensors()[0]));
  CHECK(to_matrix(fortran.tensors()[0]) == to_matrix(c_order.tensors()[0]));
}

TEST_CASE("checkpoint: missing paths and empty files", "[readers][checkpoint]") {
  test::TempDir dir;
  CHECK_THROWS_WITH(Checkpoint::open(dir / "absent.safetensors"),
                    (dir / "absent.safetensors").string() + ": no such file or folder");
  test::write_file(dir / "empty.npy", std::string());
  CHECK_THROWS_WITH(Checkpoint::open(dir / "empty.npy"),
                    (dir / "empty.npy").string() +
                        ": file is 0 bytes, too small for an NPY header (at least 10)");
  MappedFile empty(dir / "empty.npy");
  CHECK(empty.bytes().empty());
  empty.release(empty.bytes());  // nothing mapped: must be a no-op
  CHECK_THROWS_WITH(MappedFile(dir.path()), dir.path().string() + ": is a folder, expected a file");
  CHECK_THROWS_WITH(read_json_object(dir / "config.json"),
                    (dir / "config.json").string() + ": cannot open: No such file or directory");
}

namespace {

/// A Llama checkpoint's attention tensors as its config.json describes them. `tensors` counts
/// embed + final norm + 9 tensors per layer (tied embeddings: no lm_head).
void check_llama_checkpoint(const std::filesystem::path& path, DType dtype, std::size_t tensors) {
  Checkpoint checkpoint = Checkpoint::open(path);
  CHECK(checkpoint.tensors().size() == tensors);
  REQUIRE(checkpoint.config().has_value());
  const auto& config = *checkpoint.config();
  const int d = config["hidden_size"], heads = config["num_attention_heads"];
  const int kv_heads = config["num_key_value_heads"];
  const int layers = config["num_hidden_layers"];
  CHECK(tensors == 2 + 9 * static_cast<std::size_t>(layers));
  for (int layer = 0; layer < layers; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer) + ".self_attn.";
    const TensorView& q = checkpoint.at(prefix + "q_proj.weight");
    const TensorView& k = checkpoint.at(prefix + "k_proj.weight");
    CHECK(q.dtype == dtype);
    CHECK(q.shape == std::vector<std::int64_t>{d, d});
    CHECK(k.shape == std::vector<std::int64_t>{d / heads * kv_heads, d});
    RowMatrixF matrix = to_matrix(q);
    CHECK(matrix.allFinite());
    CHECK(matrix.norm() > 0);
  }
}

}  // namespace

TEST_CASE("checkpoint: data/tiny/gqa, a trained Llama GQA checkpoint (BF16)",
          "[readers][checkpoint]") {
  check_llama_checkpoint(test::tiny_model("gqa"), DType::BF16, 38);
}

TEST_CASE("checkpoint: the stories260K fixture (Llama GQA, F32)", "[.shared][checkpoint]") {
  check_llama_checkpoint(test::shared_stories260k(), DType::F32, 47);
}

}  // namespace kvrank

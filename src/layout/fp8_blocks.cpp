#include "layout/fp8_blocks.hpp"

#include <algorithm>
#include <string>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "layout/family_detail.hpp"

namespace kvrank::detail {

namespace {

Index ceil_div(Index a, Index b) { return (a + b - 1) / b; }

}  // namespace

std::string scale_inv_name(const std::string& name) { return name + "_scale_inv"; }

BlockSize weight_block_size(const Checkpoint& checkpoint) {
  const auto& config = checkpoint.config();
  if (!config || !config->contains("quantization_config")) return {};
  const auto& quant = (*config)["quantization_config"];
  if (!quant.is_object() || !quant.contains("weight_block_size")) return {};
  const auto& size = quant["weight_block_size"];
  const bool valid = size.is_array() && size.size() == 2 && size[0].is_number_integer() &&
                     size[1].is_number_integer() && size[0].get<long long>() > 0 &&
                     size[1].get<long long>() > 0;
  if (!valid) {
    throw Error(checkpoint.config_path().string(),
                "quantization_config.weight_block_size: expected two positive integers, found " +
                    json_excerpt(size));
  }
  return {static_cast<Index>(size[0].get<long long>()),
          static_cast<Index>(size[1].get<long long>())};
}

void apply_block_scales(RowMatrixF& weight, const RowMatrixF& scale_inv, BlockSize block,
                        const std::string& file, const std::string& scale_name) {
  const Index block_rows = ceil_div(weight.rows(), block.rows);
  const Index block_cols = ceil_div(weight.cols(), block.cols);
  if (scale_inv.rows() != block_rows || scale_inv.cols() != block_cols) {
    throw Error(file, scale_name,
                "expected shape [" + std::to_string(block_rows) + ", " +
                    std::to_string(block_cols) + "] (one scale per " + std::to_string(block.rows) +
                    "x" + std::to_string(block.cols) + " block of the weight), found [" +
                    std::to_string(scale_inv.rows()) + ", " + std::to_string(scale_inv.cols()) +
                    "]");
  }
  for (Index bi = 0; bi < block_rows; ++bi) {
    const Index r0 = bi * block.rows;
    const Index nr = std::min(block.rows, weight.rows() - r0);
    for (Index bj = 0; bj < block_cols; ++bj) {
      const Index c0 = bj * block.cols;
      const Index nc = std::min(block.cols, weight.cols() - c0);
      weight.block(r0, c0, nr, nc) *= scale_inv(bi, bj);
    }
  }
}

RowMatrixF load_dequantized(const Checkpoint& checkpoint, const std::string& name, Index rows,
                            Index cols, const std::string& why) {
  RowMatrixF weight = load_matrix(checkpoint, name, rows, cols, why);
  const std::string scale_name = scale_inv_name(name);
  if (const TensorView* scale = checkpoint.find(scale_name)) {
    if (scale->shape.size() != 2) {
      throw Error(scale->file, scale_name,
                  "expected a 2-D block-scale tensor, found shape " + scale->shape_string());
    }
    apply_block_scales(weight, to_matrix(*scale), weight_block_size(checkpoint), scale->file,
                       scale_name);
  }
  return weight;
}

}  // namespace kvrank::detail

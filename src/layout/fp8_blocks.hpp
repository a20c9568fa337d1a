// Private: block-scaled FP8 weights (DeepSeek-V3 style), dequantized while loading.
//
// A quantized weight `X.weight` (typically F8_E4M3) comes with a companion `X.weight_scale_inv`
// of shape [ceil(rows/br), ceil(cols/br)]: every br×bc block of the weight is multiplied by its
// scale (the name says "inverse" because the quantizer divided by it). The block size is
// config.json's `quantization_config.weight_block_size` ([128, 128] when absent).
#pragma once

#include <string>

#include "kvrank/base/eigen.hpp"
#include "kvrank/io/checkpoint.hpp"

namespace kvrank::detail {

struct BlockSize {
  Index rows = 128;
  Index cols = 128;
};

/// The companion scale tensor's name: `name` + "_scale_inv" ("X.weight" → "X.weight_scale_inv").
std::string scale_inv_name(const std::string& name);

/// The block size declared in config.json (`quantization_config.weight_block_size`), or 128×128.
/// Throws kvrank::Error naming config.json when the field is present but not two positive ints.
BlockSize weight_block_size(const Checkpoint& checkpoint);

/// Multiplies every block×block tile of `weight` by its entry of `scale_inv`. Throws
/// kvrank::Error naming `file` and `scale_name` when scale_inv is not
/// [ceil(rows/block.rows), ceil(cols/block.cols)].
void apply_block_scales(RowMatrixF& weight, const RowMatrixF& scale_inv, BlockSize block,
                        const std::string& file, const std::string& scale_name);

/// load_matrix() (family_detail.hpp), then the block scales of the companion `*_scale_inv` tensor
/// when the checkpoint has one (whatever the weight's dtype). Without a companion the values are
/// used as stored.
RowMatrixF load_dequantized(const Checkpoint& checkpoint, const std::string& name, Index rows,
                            Index cols, const std::string& why);

}  // namespace kvrank::detail

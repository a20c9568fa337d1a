// `kvrank plan --write-checkpoint DIR`: the converted model as a stock checkpoint of the same
// family — safetensors with num_key_value_heads G, heads permuted so that each group's query
// heads are contiguous, each KV group the aligned mean of its members, the queries rotated by
// their KV head's key transform and o_proj's columns by its value transform, every other tensor
// copied. DIR must not exist, or be an empty folder; it appears whole or not at all.
#pragma once

#include <filesystem>

#include "kvrank/analysis/plan.hpp"

namespace kvrank {

/// Writes the model `plan` converts (plan_checkpoint's result for `checkpoint`, every layer
/// planned). Llama-named dense layouts only (separate q/k/v/o projections, [out, in], no QK norm,
/// no attention biases): anything else is refused with one line (kvrank::Error).
void write_planned_checkpoint(const Checkpoint& checkpoint, const LayoutOverrides& overrides,
                              const PlanModel& plan, const std::filesystem::path& folder);

}  // namespace kvrank

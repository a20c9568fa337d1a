// Which training run, and which step of it, a result belongs to — read from names alone, so that
// `plot` can draw rank against training step from any result file.
//
// Trainers save a run as one folder per checkpoint: runs/mha/checkpoint-1000/,
// runs/mha/checkpoint-2000/ (Hugging Face Trainer), step-1000/, global_step_1000/ or
// global_step1000/ (DeepSpeed). The step is the number in that folder name; the run is the folder
// that holds the checkpoint folders (runs/mha, named "mha").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvrank/report/result_model.hpp"

namespace kvrank {

/// The step N of a folder named checkpoint-N, step-N, global_step_N or global_stepN (N decimal
/// digits that fit an int64); nullopt for any other name.
std::optional<std::int64_t> step_from_folder_name(std::string_view name);

/// The step named by the last component of `path` (a checkpoint folder; a trailing '/' is
/// ignored) or by the one before (the folder of a checkpoint file), as step_from_folder_name
/// reads it.
std::optional<std::int64_t> step_from_path(std::string_view path);

/// The run a model's checkpoint belongs to: its `run` when one was named (ModelReport::run), else
/// the folder holding its step folder (as step_from_path finds it), or else the folder holding the
/// checkpoint itself; named by its last component ("mha" for
/// runs/mha/checkpoint-1000/model.safetensors). A path with no such folder ("checkpoint-1000")
/// gives ".".
std::string training_run(const ModelReport& model);

}  // namespace kvrank

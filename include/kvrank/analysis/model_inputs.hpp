// The models named on the command line: each argument's path, and labels that tell them apart.
//
// An argument is a path when one exists by that name; otherwise, when it looks like a Hugging Face
// repo id ORG/NAME[@REV], the snapshot the local hub cache holds (hf_cache.hpp; never downloaded).
// Labels name the models in tables, legends and `check`, which matches models by label — so every
// model of one run gets its own:
//
//   ModelInput input = resolve_model_argument("data/tiny/mha");  // input.label: "mha"
//   // unique_labels() then tells several models apart: "model", "model-2", …
//   // (the application layer, kvrank/app/commands.hpp, runs both for `analyze`)
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kvrank/io/hf_cache.hpp"

namespace kvrank {

/// The default label of a path: NAME for a folder or file in a hub cache snapshot
/// (…/models--ORG--NAME/snapshots/<rev>), the folder name for a folder and for a file with a
/// config.json beside it (a file inside a Hugging Face folder), else the file name without
/// extension.
std::string default_label(const std::filesystem::path& path);

/// What a model argument names and the label it gets by default.
struct ModelInput {
  std::filesystem::path path;
  std::string label;
  std::string argument;     ///< as the user gave it
  std::string hf_repo;      ///< ORG/NAME when found in the hub cache, else empty
  std::string hf_revision;  ///< then the snapshot's commit hash (its folder name)
};

/// An existing path is itself (label: default_label) — unless kvrank can tell it will not read it:
/// a PyTorch pickle (.bin, .pt, .pth, .ckpt, or a folder holding only those) or a folder of model
/// folders throws kvrank::Error saying what to do instead. A path that does not exist and looks
/// like one (./, ../, /, ~, a checkpoint extension, an existing parent folder), or is no repo id,
/// throws "ARG: no such file or folder (nearest existing name: …)". Otherwise an argument that
/// looks like ORG/NAME[@REV] is resolved in the hub cache chosen by `env` (label: NAME, or
/// NAME@REV when a revision is given; throws kvrank::Error "ARG: no such file or folder, and <why
/// the cache does not have it, naming the paths tried>").
ModelInput resolve_model_argument(const std::string& argument,
                                  const EnvLookup& env = process_environment());

/// One model's label before it is made unique: `given` by the user (--label) or a default.
struct LabelChoice {
  std::string label;
  bool given = false;
  std::string path;  ///< for the note
};

/// The labels, in order, all different. Labels the user gave are kept as they are — two equal
/// ones are a usage error (kvrank::Error) — and reserved first; a default label already taken
/// becomes "LABEL-2", "LABEL-3", … (the first number free), and `note` (may be empty) is told so.
std::vector<std::string> unique_labels(const std::vector<LabelChoice>& choices,
                                       const std::function<void(const std::string&)>& note);

}  // namespace kvrank

// Reading a whole JSON file: config.json, a safetensors index, a --map file, a result file of
// `analyze --format json` (read back by plot, check and merge). In base so that the result model
// (report) reads its own files without the checkpoint readers.
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace kvrank {

/// The largest JSON file read_json_object() reads (a result JSON with --similarity of a large
/// model is tens of MB; configs and indexes are smaller).
inline constexpr std::size_t kMaxJsonFileBytes = std::size_t{256} << 20;

/// Reads a JSON object from `path`. Throws kvrank::Error naming the file if it is not a regular
/// file, larger than kMaxJsonFileBytes, unreadable, not strict JSON (json_strict: UTF-8, no
/// duplicate keys, at most 64 levels deep), or not an object.
nlohmann::json read_json_object(const std::filesystem::path& path);

}  // namespace kvrank

// Atomic file writing for every output kvrank writes (results, figures, synthetic checkpoints).
#pragma once

#include <filesystem>
#include <string>

namespace kvrank {

/// Writes `content` to `path` atomically (temp file in the same folder, then rename): a failed run
/// leaves no partial file. Throws kvrank::Error naming the path.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

}  // namespace kvrank

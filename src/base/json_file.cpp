#include "kvrank/base/json_file.hpp"

#include <string>

#include "base/guarded_read.hpp"
#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/base/mapped_file.hpp"

namespace kvrank {

nlohmann::json read_json_object(const std::filesystem::path& path) {
  // MappedFile refuses what is not a regular file (a FIFO without a writer, /dev/zero) without
  // blocking; the size is known before anything is read.
  const MappedFile file(path);
  if (file.bytes().size() > kMaxJsonFileBytes) {
    throw Error(path.string(),
                "is " + std::to_string(file.bytes().size()) + " bytes, more than the " +
                    std::to_string(kMaxJsonFileBytes >> 20) + " MiB kvrank reads as a JSON file");
  }
  const std::string text = detail::guarded_text_copy(file.bytes(), path.string());
  nlohmann::json value = detail::parse_json_strict(text, path.string(), "file");
  if (!value.is_object()) {
    throw Error(path.string(), "expected a JSON object, found " + detail::json_kind(value));
  }
  return value;
}

}  // namespace kvrank

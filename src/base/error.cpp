#include "kvrank/base/error.hpp"

#include <utility>

#include "kvrank/base/text.hpp"

namespace kvrank {
namespace {

// Names in a message come from files and the command line: escaped, so that a tensor name cannot
// write to the terminal or forge a second line (printable() is idempotent, so rethrowing a what()
// is safe).
std::string format_message(const std::string& file, const std::string& tensor,
                           const std::string& detail) {
  std::string message;
  if (!file.empty()) message += file + ": ";
  if (!tensor.empty()) message += tensor + ": ";
  return printable(message + detail);
}

}  // namespace

Error::Error(std::string file, std::string detail)
    : Error(std::move(file), {}, std::move(detail)) {}

Error::Error(std::string file, std::string tensor, std::string detail)
    : std::runtime_error(format_message(file, tensor, detail)),
      file_(std::move(file)),
      tensor_(std::move(tensor)),
      detail_(std::move(detail)) {}

}  // namespace kvrank

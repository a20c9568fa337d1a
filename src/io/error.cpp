#include "kvrank/error.hpp"

#include <utility>

namespace kvrank {
namespace {

std::string format_message(const std::string& file, const std::string& tensor,
                           const std::string& detail) {
  std::string message;
  if (!file.empty()) message += file + ": ";
  if (!tensor.empty()) message += tensor + ": ";
  return message + detail;
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

// kvrank::Error — the one exception type for problems the user can fix.
//
// Mechanism (one choice for the whole project): library code throws kvrank::Error for bad input or
// bad usage, with the context a user needs to find the problem — the file, the tensor when there is
// one, and what is wrong (expected vs found). apps/kvrank/main.cpp prints it as
//   kvrank: error: <file>[: <tensor>]: <what is wrong>
// and exits with code 2; library code catches it only to add context or to try an alternative
// (docs/design.md). Any other exception escaping the library is an internal error (exit 3).
// what() is one printable line: control characters in names are escaped (kvrank/base/text.hpp);
// file(), tensor() and detail() keep the raw text.
#pragma once

#include <stdexcept>
#include <string>

namespace kvrank {

class Error : public std::runtime_error {
 public:
  /// An error about a file as a whole (`file` may be empty for a pure usage error).
  Error(std::string file, std::string detail);
  /// An error about one tensor of a file.
  Error(std::string file, std::string tensor, std::string detail);

  const std::string& file() const noexcept { return file_; }
  const std::string& tensor() const noexcept { return tensor_; }
  const std::string& detail() const noexcept { return detail_; }

 private:
  std::string file_;
  std::string tensor_;
  std::string detail_;
};

}  // namespace kvrank

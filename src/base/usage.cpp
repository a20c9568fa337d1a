#include "kvrank/base/usage.hpp"

#include <string>

#include "kvrank/base/error.hpp"

namespace kvrank {

void check_given_per_input(std::string_view option, std::size_t given, std::size_t inputs) {
  if (given > inputs)
    throw Error("", std::string(option) + " given " + std::to_string(given) + " times for " +
                        std::to_string(inputs) + " input(s)");
}

}  // namespace kvrank

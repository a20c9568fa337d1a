// kvrank's version ("0.1.0"): the project version CMake was configured with. A function rather
// than a macro, so that the definition stays private to the library and does not leak into the
// compile flags of projects that link kvrank::kvrank.
#pragma once

#include <string_view>

namespace kvrank {

std::string_view version() noexcept;

}  // namespace kvrank

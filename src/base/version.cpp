#include "kvrank/base/version.hpp"

namespace kvrank {

std::string_view version() noexcept { return KVRANK_VERSION; }

}  // namespace kvrank

// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/families.hpp"
#include <stdexcept>
namespace kvrank {
std::string_view repr_name(Repr) noexcept { return "qk"; }
Repr parse_repr(std::string_view) { throw std::logic_error("not implemented"); }
ModelLayout detect_layout(const Checkpoint&, const LayoutOverrides&) { throw std::logic_error("not implemented"); }
HeadFactors layer_factors(const Checkpoint&, const ModelLayout&, int, Repr) { throw std::logic_error("not implemented"); }
std::vector<std::string> layer_tensor_names(const ModelLayout&, int) { throw std::logic_error("not implemented"); }
}  // namespace kvrank

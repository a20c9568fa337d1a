// STUB: replaced by its owner.
#include <stdexcept>
#include "family_detail.hpp"
namespace kvrank::detail {
ModelLayout detect_activations(const Checkpoint&, const LayoutOverrides&) { throw std::logic_error("not implemented"); }
HeadFactors activation_factors(const Checkpoint&, const ModelLayout&, int, Repr) { throw std::logic_error("not implemented"); }
std::vector<std::string> activation_tensor_names(const ModelLayout&, int) { return {}; }
}  // namespace kvrank::detail

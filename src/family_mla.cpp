// STUB: replaced by its owner.
#include <stdexcept>
#include "family_detail.hpp"
namespace kvrank::detail {
bool is_mla(const Checkpoint&) { return false; }
ModelLayout detect_mla(const Checkpoint&, const LayoutOverrides&) { throw std::logic_error("not implemented"); }
HeadFactors mla_factors(const Checkpoint&, const ModelLayout&, int, Repr) { throw std::logic_error("not implemented"); }
std::vector<std::string> mla_tensor_names(const ModelLayout&, int) { return {}; }
}  // namespace kvrank::detail

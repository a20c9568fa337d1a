// STUB: replaced by its owner.
#include <stdexcept>
#include "family_detail.hpp"
namespace kvrank::detail {
bool is_lrkv(const Checkpoint&) { return false; }
ModelLayout detect_lrkv(const Checkpoint&, const LayoutOverrides&) { throw std::logic_error("not implemented"); }
HeadFactors lrkv_factors(const Checkpoint&, const ModelLayout&, int, Repr) { throw std::logic_error("not implemented"); }
std::vector<std::string> lrkv_tensor_names(const ModelLayout&, int) { return {}; }
}  // namespace kvrank::detail

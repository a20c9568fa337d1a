// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/inspect.hpp"
#include <stdexcept>
namespace kvrank {
InspectReport inspect_checkpoint(const Checkpoint&, const LayoutOverrides&) { throw std::logic_error("not implemented"); }
nlohmann::json to_json(const std::vector<InspectReport>&) { throw std::logic_error("not implemented"); }
std::string to_text(const std::vector<InspectReport>&) { throw std::logic_error("not implemented"); }
}  // namespace kvrank

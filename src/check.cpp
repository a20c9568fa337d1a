// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/check.hpp"
#include <stdexcept>
namespace kvrank {
std::vector<Violation> check_reports(const std::vector<ModelReport>&, const std::vector<ModelReport>&, const CheckOptions&, const std::string&, const std::string&) { throw std::logic_error("not implemented"); }
std::string format_violations(const std::vector<Violation>&) { throw std::logic_error("not implemented"); }
double metric_value(const LayerMetrics&, std::string_view) { throw std::logic_error("not implemented"); }
}  // namespace kvrank

// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/analysis.hpp"
#include <stdexcept>
namespace kvrank {
Summary summarize(const std::vector<LayerMetrics>&) { throw std::logic_error("not implemented"); }
std::vector<int> parse_layer_list(std::string_view) { throw std::logic_error("not implemented"); }
std::vector<ModelReport> analyze_checkpoint(const std::filesystem::path&, const std::string&, const AnalyzeOptions&) { throw std::logic_error("not implemented"); }
std::string default_label(const std::filesystem::path&) { throw std::logic_error("not implemented"); }
ModelReport fully_redundant_baseline(int, int) { throw std::logic_error("not implemented"); }
}  // namespace kvrank

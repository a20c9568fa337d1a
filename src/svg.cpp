// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/svg.hpp"
#include <stdexcept>
namespace kvrank {
std::string plot_curves_svg(const std::vector<Panel>&, const PlotOptions&) { throw std::logic_error("not implemented"); }
std::string plot_heatmap_svg(const ModelReport&, int, const std::string&) { throw std::logic_error("not implemented"); }
std::string xml_escape(std::string_view) { throw std::logic_error("not implemented"); }
}  // namespace kvrank

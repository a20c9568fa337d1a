// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/diversity.hpp"
#include <stdexcept>
namespace kvrank {
double effective_rank(const std::vector<double>&) { throw std::logic_error("not implemented"); }
LayerMetrics similarity_metrics(const MatrixD&) { throw std::logic_error("not implemented"); }
LayerMetrics analyze_layer(const HeadFactors&) { throw std::logic_error("not implemented"); }
MatrixD basis_gram(const RowMatrixF&) { throw std::logic_error("not implemented"); }
void set_compute_threads(int) {}
}  // namespace kvrank

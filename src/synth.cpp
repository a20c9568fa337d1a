// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/synth.hpp"
#include <stdexcept>
namespace kvrank {
void write_synthetic_checkpoint(const SynthOptions&, const std::filesystem::path&) { throw std::logic_error("not implemented"); }
}  // namespace kvrank

// erank CHECKPOINT: the effective rank of the attention heads (q·k representation) of each layer,
// one "layer erank" line per layer — kvrank's library without its command line.
#include <cstdio>
#include <exception>

#include "kvrank/analysis/analysis.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: erank CHECKPOINT\n");
    return 2;
  }
  try {
    const auto reports = kvrank::analyze_checkpoint(argv[1], "example", {});
    for (const kvrank::LayerMetrics& layer : reports.front().layers) {
      std::printf("%d %.9g\n", layer.layer, layer.erank);
    }
  } catch (const std::exception& error) {  // kvrank::Error says which file and what is wrong
    std::fprintf(stderr, "erank: %s\n", error.what());
    return 2;
  }
  return 0;
}

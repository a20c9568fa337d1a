// libFuzzer target: arbitrary bytes as a result file, read like `plot` and `check` read it, then
// drawn as curves (every metric) and as a heatmap of each layer. kvrank::Error is an expected
// outcome; anything else escaping, a hang, unbounded memory or a sanitizer report is a bug. Every
// SVG produced must be free of bytes XML 1.0 forbids.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/plot/svg.hpp"
#include "kvrank/report/result_files.hpp"

namespace {

void check_xml_bytes(const std::string& svg) {
  for (unsigned char c : svg) {
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') __builtin_trap();
  }
}

void draw(const std::vector<kvrank::ModelReport>& models) {
  using kvrank::Curve;
  for (Curve metric : {Curve::erank, Curve::erank_centered, Curve::erank_pct,
                       Curve::erank_centered_pct, Curve::mean_similarity, Curve::pcs_90}) {
    kvrank::PlotOptions options;
    options.metric = metric;
    try {
      check_xml_bytes(kvrank::plot_curves_svg({{"fuzz", models, "fuzz.json"}}, options));
    } catch (const kvrank::Error&) {
    }
  }
  for (const kvrank::ModelReport& model : models) {
    for (const kvrank::LayerMetrics& layer : model.layers) {
      try {
        check_xml_bytes(kvrank::plot_heatmap_svg(model, layer.layer, model.label));
      } catch (const kvrank::Error&) {
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {  // parsed as `plot` and `check` parse a result file
    const auto document = kvrank::detail::parse_json_strict(text, "fuzz.json", "file");
    draw(kvrank::reports_from_json(document, "fuzz.json"));
  } catch (const kvrank::Error&) {
  }
  return 0;
}

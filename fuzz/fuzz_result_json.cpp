// libFuzzer target: the result-JSON reader behind `kvrank check` and `kvrank plot` (strict JSON,
// then the schema: every field's type and range), then the comparison `check` makes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/report/check.hpp"
#include "kvrank/report/result_files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const nlohmann::json document = kvrank::detail::parse_json_strict(text, "fuzz.json", "file");
    const auto reports = kvrank::reports_from_json(document, "fuzz.json");
    kvrank::CheckOptions options;
    options.metrics = {kvrank::Curve::erank, kvrank::Curve::erank_centered,
                       kvrank::Curve::mean_similarity};
    (void)kvrank::check_reports(reports, reports, options, "a.json", "b.json");
    (void)kvrank::to_json(reports, {.include_similarity = true}).dump();
  } catch (const kvrank::Error&) {
  }
  return 0;
}

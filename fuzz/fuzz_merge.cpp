// libFuzzer target: `kvrank merge` over arbitrary result files. The input is split at NUL bytes
// into up to four parts (strict JSON each), merged with and without a --layers selection: every
// count a part claims (num_layers, heads, similarity rows) must be checked before anything is
// allocated from it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/json_strict.hpp"
#include "kvrank/base/error.hpp"
#include "kvrank/report/merge.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kMaxParts = 4;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<kvrank::ResultPart> parts;
  try {
    while (parts.size() < kMaxParts) {
      const std::size_t end = text.find('\0');
      const std::string file = "part" + std::to_string(parts.size()) + ".json";
      parts.push_back({file, kvrank::detail::parse_json_strict(text.substr(0, end), file, "file")});
      if (end == std::string_view::npos) break;
      text.remove_prefix(end + 1);
    }
    (void)kvrank::merge_results(parts).dump();
  } catch (const kvrank::Error&) {
  }
  try {
    if (!parts.empty()) (void)kvrank::merge_results(parts, {.layers = std::vector<int>{0, 2}});
  } catch (const kvrank::Error&) {
  }
  return 0;
}

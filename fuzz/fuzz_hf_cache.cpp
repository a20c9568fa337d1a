// libFuzzer target: the Hugging Face cache's untrusted text: a refs/<rev> file's content
// (parse_hub_ref) and a model argument that may be a repo id (parse_hub_model_id).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvrank/base/error.hpp"
#include "kvrank/io/hf_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const std::string commit = kvrank::parse_hub_ref(text, "refs/main");
    if (commit.size() != 40) __builtin_trap();  // only a commit hash may come back
  } catch (const kvrank::Error& error) {
    if (std::string_view(error.what()).size() > 400) __builtin_trap();  // quoted as an excerpt
  }
  if (const auto id = kvrank::parse_hub_model_id(text)) {
    if (id->repo().size() > 96 || id->repo().find("..") != std::string::npos) __builtin_trap();
  }
  return 0;
}

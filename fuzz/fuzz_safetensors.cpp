// libFuzzer target: parse_safetensors on arbitrary bytes, then convert every tensor.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_common.hpp"
#include "kvrank/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    kvrank::SafetensorsFile file = kvrank::parse_safetensors(bytes, "fuzz.safetensors");
    for (const kvrank::TensorView& tensor : file.tensors) kvrank::fuzz::exercise(tensor);
  } catch (const kvrank::Error&) {
  }
  return 0;
}

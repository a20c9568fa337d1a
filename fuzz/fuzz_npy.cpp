// libFuzzer target: parse_npy on arbitrary bytes (with and without --npy-dtype bf16), then convert.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_common.hpp"
#include "kvrank/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  for (bool bf16_void : {false, true}) {
    try {
      kvrank::TensorView tensor = kvrank::parse_npy(bytes, "fuzz.npy", "fuzz", {bf16_void});
      kvrank::fuzz::exercise(tensor);
    } catch (const kvrank::Error&) {
    }
  }
  return 0;
}

// libFuzzer target: parse_npz (zip directory, ZIP64, inflate, CRC, NPY members), then convert.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_common.hpp"
#include "kvrank/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    for (const kvrank::NpzMember& member : kvrank::parse_npz(bytes, "fuzz.npz")) {
      kvrank::fuzz::exercise(member.tensor);
    }
  } catch (const kvrank::Error&) {
  }
  return 0;
}

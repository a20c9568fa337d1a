// libFuzzer target: parse_gguf on arbitrary bytes, map it to a Hugging Face checkpoint, then
// convert (dequantize) every tensor.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_common.hpp"
#include "kvrank/io/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    kvrank::GgufFile file = kvrank::parse_gguf(bytes, "fuzz.gguf");
    for (const kvrank::TensorView& tensor : file.tensors) kvrank::fuzz::exercise(tensor);
    kvrank::GgufCheckpoint checkpoint = kvrank::gguf_checkpoint(std::move(file), "fuzz.gguf");
    for (const kvrank::TensorView& tensor : checkpoint.tensors) kvrank::fuzz::exercise(tensor);
  } catch (const kvrank::Error&) {
  }
  return 0;
}

// STUB: replaced by its owner; throws so that the build links from day one.
#include "kvrank/dtype.hpp"
#include <stdexcept>
namespace kvrank {
std::size_t dtype_size(DType) noexcept { return 4; }
std::string_view dtype_name(DType) noexcept { return "?"; }
std::optional<DType> dtype_from_name(std::string_view) noexcept { return std::nullopt; }
float bf16_to_f32(std::uint16_t) noexcept { return 0; }
float f16_to_f32(std::uint16_t) noexcept { return 0; }
float fp8_e4m3_to_f32(std::uint8_t) noexcept { return 0; }
float fp8_e5m2_to_f32(std::uint8_t) noexcept { return 0; }
void convert_to_f32(DType, std::span<const std::byte>, std::span<float>) noexcept {}
}  // namespace kvrank

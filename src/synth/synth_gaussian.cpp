// `kvrank synth` (synth.cpp): seeded Gaussians — splitmix64 streams keyed by (seed, layer, role,
// block) and a Box–Muller transform in plain float arithmetic (see synth.cpp).
#include <bit>
#include <cmath>
#include <cstdint>

#include "synth/synth_detail.hpp"

namespace kvrank::detail {
namespace {

// ---- seeded Gaussians --------------------------------------------------------------------------

std::uint64_t mix64(std::uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9u;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBu;
  return x ^ (x >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15u); }

 private:
  std::uint64_t state_;
};

}  // namespace

std::uint64_t stream_seed(std::uint64_t seed, int layer, Role role, std::uint64_t block) {
  std::uint64_t key = mix64(seed + 0x9E3779B97F4A7C15u);
  key = mix64(key ^ (static_cast<std::uint64_t>(layer) + 1) * 0xD1B54A32D192ED03u);
  key = mix64(key ^ static_cast<std::uint64_t>(role) * 0xAEF17502108EF2D9u);
  return mix64(key ^ (block + 1) * 0xF1357AEA2E62A9C5u);
}

namespace {

/// Picks `if_set` where `mask` is all ones, `if_clear` where it is zero (branch-free, exact).
float select(std::int32_t mask, float if_set, float if_clear) {
  return std::bit_cast<float>((std::bit_cast<std::int32_t>(if_set) & mask) |
                              (std::bit_cast<std::int32_t>(if_clear) & ~mask));
}

float flip_sign(std::int32_t sign_bit, float x) {
  return std::bit_cast<float>(std::bit_cast<std::int32_t>(x) ^ sign_bit);
}

/// ln x for x in (0, 1], to float precision: x = m·2^e with m in [√½, √2), ln m by the atanh
/// series.
float log_unit(float x) {
  const auto bits = std::bit_cast<std::int32_t>(x);
  const std::int32_t high = (bits & 0x007FFFFF) > 0x3504F3 ? 1 : 0;  // mantissa above √2: halve it
  const std::int32_t exponent = ((bits >> 23) & 0xFF) - 127 + high;
  const float m = std::bit_cast<float>((bits & 0x007FFFFF) | ((127 - high) << 23));
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  const float series = 1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9))));
  return static_cast<float>(exponent) * 0.693147181f + 2.0f * s * series;
}

/// √v for v ≥ 0 by two Newton steps on 1/√v (relative error far below float's): std::sqrt would
/// keep the loop below from vectorising, because of errno.
float sqrt_nonnegative(float v) {
  // The subtraction unsigned (wrapping): v may be −0.0f, whose shifted bits overflowed it as a
  // signed int (UBSan); the same bits as before, so the same files.
  const auto half = static_cast<std::uint32_t>(std::bit_cast<std::int32_t>(v) >> 1);
  float y = std::bit_cast<float>(0x5F3759DFu - half);
  y = y * (1.5f - 0.5f * v * y * y);
  y = y * (1.5f - 0.5f * v * y * y);
  return v * y;
}

/// Box–Muller on batches: u1 in (0, 1], u2 in [0, 1) → two standard normals each. Branch-free
/// float arithmetic, so the compiler vectorises it.
void box_muller(const float* u1, const float* u2, float* z0, float* z1, std::size_t count) {
  constexpr float kHalfPi = 1.57079633f;
  constexpr float kQuarterPi = 0.785398163f;
  constexpr float kInvSqrt2 = 0.707106781f;
  for (std::size_t i = 0; i < count; ++i) {
    const float radius = sqrt_nonnegative(-2.0f * log_unit(u1[i]));
    const float turns = u2[i] * 4.0f;  // angle 2π·u2 = quadrant·π/2 + local angle
    const auto quadrant = static_cast<std::int32_t>(turns);
    const float x = (turns - static_cast<float>(quadrant)) * kHalfPi - kQuarterPi;  // [-π/4, π/4)
    const float x2 = x * x;
    const float sin_x =
        x *
        (1.0f - x2 * (1.0f / 6 - x2 * (1.0f / 120 - x2 * (1.0f / 5040 - x2 * (1.0f / 362880)))));
    const float cos_x =
        1.0f - x2 * (0.5f - x2 * (1.0f / 24 - x2 * (1.0f / 720 - x2 * (1.0f / 40320))));
    const float cos_local = (cos_x - sin_x) * kInvSqrt2;  // local angle = x + π/4
    const float sin_local = (sin_x + cos_x) * kInvSqrt2;
    // Rotate by the quadrant: odd quadrants swap (cos, sin) → (−sin, cos); quadrants 2, 3 negate.
    const std::int32_t odd = -(quadrant & 1);
    const std::int32_t negate = (quadrant & 2) << 30;
    z0[i] = radius * flip_sign(negate, select(odd, -sin_local, cos_local));
    z1[i] = radius * flip_sign(negate, select(odd, cos_local, sin_local));
  }
}

}  // namespace

/// Fills `out` with N(0, stddev²) values of the stream `stream`.
void fill_gaussian(std::uint64_t stream, float stddev, std::span<float> out) {
  constexpr std::size_t kBatch = 512;  // pairs per Box–Muller batch
  float u1[kBatch], u2[kBatch], z0[kBatch], z1[kBatch];
  SplitMix64 random(stream);
  for (std::size_t begin = 0; begin < out.size(); begin += 2 * kBatch) {
    const std::size_t values = std::min(2 * kBatch, out.size() - begin);
    const std::size_t pairs = (values + 1) / 2;
    for (std::size_t i = 0; i < pairs; ++i) {
      const std::uint64_t bits = random.next();  // two 24-bit uniforms from one draw
      u1[i] = static_cast<float>(static_cast<std::int32_t>((bits >> 40) + 1)) * 0x1p-24f;
      u2[i] = static_cast<float>(static_cast<std::int32_t>((bits >> 16) & 0xFFFFFF)) * 0x1p-24f;
    }
    box_muller(u1, u2, z0, z1, pairs);
    float* target = out.data() + begin;
    for (std::size_t i = 0; i < values / 2; ++i) {
      target[2 * i] = z0[i] * stddev;
      target[2 * i + 1] = z1[i] * stddev;
    }
    if (values % 2 == 1) target[values - 1] = z0[pairs - 1] * stddev;
  }
}

}  // namespace kvrank::detail

// Private: the lanes of eigen_lanes.cpp — one entry of eight small matrices in a zmm, and the
// vector operations every step of the lane solver is written in (eigen_lanes.hpp).
#pragma once

#include "kvrank/base/eigen.hpp"
#include "metric/eigen_lanes.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVRANK_EIGEN_LANES 1
#include <immintrin.h>
/// Compiled for AVX-512F per function: the binary still runs on any x86-64.
#define KVRANK_LANES_TARGET __attribute__((target("avx512f")))
#endif

// GCC 12 reads the _mm512_undefined_pd() of the unmasked intrinsics (sqrt, min, max) as maybe
// uninitialized: a false positive of its headers. Code on the lanes sits between these two.
#if defined(__GNUC__) && !defined(__clang__)
#define KVRANK_LANES_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define KVRANK_LANES_END _Pragma("GCC diagnostic pop")
#else
#define KVRANK_LANES_BEGIN
#define KVRANK_LANES_END
#endif

namespace kvrank::detail::eigen_lanes {

#ifdef KVRANK_EIGEN_LANES

KVRANK_LANES_BEGIN

constexpr int kLanes = kEigenLanes;
using Mask = __mmask8;
using Vec = __m512d;

/// One entry of eight problems: lane k is problem k's.
struct alignas(64) Entry {
  double lane[kLanes];
};

/// Where entry (j, j) of an n × n lower triangle stored by columns starts: (i, j) is at
/// offset(n, j) + i − j.
inline Index offset(Index n, Index j) { return j * n - j * (j - 1) / 2; }

KVRANK_LANES_TARGET inline Vec load(const Entry& entry) { return _mm512_load_pd(entry.lane); }
/// load(), held in a register: GCC folds a load into each FMA that reads the value, and where an
/// entry feeds several FMAs the loads, not the FMAs, bound the loop (one 512-bit load a cycle on
/// Zen 4).
KVRANK_LANES_TARGET inline Vec load_once(const Entry& entry) {
  Vec value = load(entry);
  asm("" : "+v"(value));
  return value;
}
KVRANK_LANES_TARGET inline void store(Entry& entry, Vec value) {
  _mm512_store_pd(entry.lane, value);
}
KVRANK_LANES_TARGET inline Vec splat(double value) { return _mm512_set1_pd(value); }
/// `yes` in the lanes of `mask`, `no` in the others.
KVRANK_LANES_TARGET inline Vec where(Mask mask, Vec yes, Vec no) {
  return _mm512_mask_blend_pd(mask, no, yes);
}
KVRANK_LANES_TARGET inline Vec fma(Vec a, Vec b, Vec c) { return _mm512_fmadd_pd(a, b, c); }
/// c − a·b
KVRANK_LANES_TARGET inline Vec fnma(Vec a, Vec b, Vec c) { return _mm512_fnmadd_pd(a, b, c); }

/// √(a² + b²) without overflow or underflow in the squares (LAPACK's dlapy2).
KVRANK_LANES_TARGET inline Vec hypot(Vec a, Vec b) {
  a = _mm512_abs_pd(a);
  b = _mm512_abs_pd(b);
  const Vec big = _mm512_max_pd(a, b);
  const Vec ratio = where(_mm512_cmp_pd_mask(big, splat(0), _CMP_EQ_OQ), splat(0),
                          _mm512_div_pd(_mm512_min_pd(a, b), big));
  return big * _mm512_sqrt_pd(fma(ratio, ratio, splat(1)));
}

/// Σ a[r]·b[r] over `count` entries, in four running sums (one would wait on each FMA).
KVRANK_LANES_TARGET inline Vec dot(const Entry* a, const Entry* b, Index count) {
  Vec sums[4] = {splat(0), splat(0), splat(0), splat(0)};
  Index r = 0;
  for (; r + 4 <= count; r += 4) {
    for (int u = 0; u < 4; ++u) sums[u] = fma(load(a[r + u]), load(b[r + u]), sums[u]);
  }
  for (; r < count; ++r) sums[0] = fma(load(a[r]), load(b[r]), sums[0]);
  return (sums[0] + sums[1]) + (sums[2] + sums[3]);
}

KVRANK_LANES_END

#endif  // KVRANK_EIGEN_LANES

}  // namespace kvrank::detail::eigen_lanes

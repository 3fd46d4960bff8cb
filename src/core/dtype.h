// Element types: sizes, names, and f32 <-> bf16 / f16 conversion (round to nearest even),
// usable from host and device code.
#pragma once

#include <cstdint>
#include <cstring>

#include "gdn/gdn.h"

#if defined(__CUDACC__)
#define GDN_HD __host__ __device__ __forceinline__
#else
#define GDN_HD inline
#endif

namespace gdn {

inline int64_t dtype_size(gdn_dtype t) {
  switch (t) {
    case GDN_DTYPE_F32: case GDN_DTYPE_I32: return 4;
    case GDN_DTYPE_F16: case GDN_DTYPE_BF16: return 2;
    case GDN_DTYPE_I64: case GDN_DTYPE_F64: return 8;
    default: return 0;
  }
}

inline const char* dtype_name(gdn_dtype t) {
  switch (t) {
    case GDN_DTYPE_F32: return "f32";
    case GDN_DTYPE_F16: return "f16";
    case GDN_DTYPE_BF16: return "bf16";
    case GDN_DTYPE_I32: return "i32";
    case GDN_DTYPE_I64: return "i64";
    case GDN_DTYPE_F64: return "f64";
    default: return "none";
  }
}

GDN_HD uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u; std::memcpy(&u, &f, 4); return u;
#endif
}
GDN_HD float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f; std::memcpy(&f, &u, 4); return f;
#endif
}

GDN_HD float bf16_to_f32(uint16_t h) { return bits_f32(uint32_t(h) << 16); }
GDN_HD uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

GDN_HD float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_f32(sign);
    // subnormal: man * 2^-24
    float f = float(man) * (1.0f / 16777216.0f);
    return sign ? -f : f;
  }
  return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}
GDN_HD uint16_t f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);           // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);          // overflow -> inf
  if (a < 0x38800000u) {                                          // subnormal or zero
    // value * 2^24 rounded to nearest even
    float v = bits_f32(a) * 16777216.0f;
    uint32_t m = uint32_t(v);
    float rem = v - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
  return uint16_t(sign | (r >> 13));
}

}  // namespace gdn

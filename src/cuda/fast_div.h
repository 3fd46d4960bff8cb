// Division of grid indices by a divisor fixed for a launch, as a multiply and a shift (no
// integer division in the kernel: it is about 15 instructions with a reciprocal's latency).
// For 1 <= d < 2^31 let l = ceil(log2 d) and m = ceil(2^(31 + l) / d) (< 2^32, since
// d > 2^(l - 1)). With e = m d - 2^(31 + l) in [0, d), n m / 2^(31 + l) = n / d + x where
// x = n e / (d 2^(31 + l)); for 0 <= n < 2^31, n e < 2^31 d <= 2^(31 + l), so 0 <= x < 1 / d,
// and as the fraction of n / d is at most (d - 1) / d, floor(n m / 2^(31 + l)) = floor(n / d).
// (The round-up method of Granlund and Montgomery.)
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GDN_HOST_DEVICE __host__ __device__
#else
#define GDN_HOST_DEVICE
#endif

namespace gdn::cuda {

struct FastDiv {  // the default divides by 1
  uint32_t d = 1;  // the divisor (for reading; div() uses m and shift)
  uint32_t m = 1u << 31;
  uint32_t shift = 31;  // 31 + l

  static FastDiv make(uint32_t divisor) {  // 1 <= divisor < 2^31; 0 (a field not in use): 1
    FastDiv f;
    if (divisor == 0) return f;
    f.d = divisor;
    uint32_t l = 0;
    while ((uint64_t(1) << l) < divisor) ++l;
    f.shift = 31 + l;
    f.m = uint32_t(((uint64_t(1) << f.shift) + divisor - 1) / divisor);
    return f;
  }
  // floor(n / d) for 0 <= n < 2^31
  GDN_HOST_DEVICE uint32_t div(uint32_t n) const { return uint32_t((uint64_t(n) * m) >> shift); }
};

}  // namespace gdn::cuda

#undef GDN_HOST_DEVICE  // this header's alone

// The oracle's rounding of 16-bit states and outputs: once, to nearest even, from the f64 value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gdn/gdn.hpp"

namespace {

// The 16-bit pattern of f when f is exactly a bf16 value (its low 16 bits are zero).
uint16_t bf16_exact(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  EXPECT_EQ(u & 0xffffu, 0u) << f << " is not a bf16 value";
  return uint16_t(u >> 16);
}

// bf16 state: read exactly, math in f64, one rounding when written. Inputs f32, o f32.
//   S0 = [[1.5, 1.0078125], [.25, -3]] (bf16: 0x3FC0 0x3F81 / 0x3E80 0xC040)
//   t0: alpha = 1, beta = 1, k = q = (1,0), v = (1 + 2^-8, 1 + 3 2^-8)
//       S k = S0[:,0];  delta = v - S0[:,0];  S[:,0] = v exactly, S[:,1] = S0[:,1]
//       o = S (1,0) = v (exact in f32)
//   t1, t2: beta = 0, q = (0,1): S unchanged, o = S[:,1] = (1.0078125, -3)
//   final, bf16: 1 + 2^-8 is halfway between 1 (0x3F80) and 1.0078125 (0x3F81): even -> 0x3F80;
//   1 + 3 2^-8 is halfway between 0x3F81 and 1.015625 (0x3F82): even -> 0x3F82. The snapshot
//   after t0 rounds the same way.
TEST(OracleRounding, Bf16StateRoundsOnceToNearestEven) {
  const float v0 = 1 + 0x1p-8f, v1 = 1 + 3 * 0x1p-8f;
  std::vector<float> q = {1, 0, 0, 1, 0, 1}, k = {1, 0, 1, 0, 1, 0};
  std::vector<float> v = {v0, v1, v0, v1, v0, v1}, g = {0, 0, 0}, beta = {1, 0, 0};
  std::vector<float> o(6, NAN);
  std::vector<uint16_t> initial_state = {bf16_exact(1.5f), bf16_exact(1.0078125f),
                                         bf16_exact(0.25f), bf16_exact(-3.f)};
  std::vector<uint16_t> final_state(4, 0xFFFF), snapshots(12, 0xFFFF);
  gdn::ForwardArgs args;
  args.q = gdn::tensor(q.data(), GDN_DTYPE_F32, {1, 3, 1, 2});
  args.k = gdn::tensor(k.data(), GDN_DTYPE_F32, {1, 3, 1, 2});
  args.v = gdn::tensor(v.data(), GDN_DTYPE_F32, {1, 3, 1, 2});
  args.g = gdn::tensor(g.data(), GDN_DTYPE_F32, {1, 3, 1});
  args.beta = gdn::tensor(beta.data(), GDN_DTYPE_F32, {1, 3, 1});
  args.o = gdn::tensor(o.data(), GDN_DTYPE_F32, {1, 3, 1, 2});
  args.initial_state = gdn::tensor(initial_state.data(), GDN_DTYPE_BF16, {1, 1, 2, 2});
  args.final_state = gdn::tensor(final_state.data(), GDN_DTYPE_BF16, {1, 1, 2, 2});
  args.state_snapshots = gdn::tensor(snapshots.data(), GDN_DTYPE_BF16, {1, 3, 1, 2, 2});
  args.scale = 1;
  args.backend = GDN_BACKEND_REFERENCE;
  ASSERT_EQ(gdn_forward(&args), GDN_STATUS_SUCCESS) << gdn_last_error();

  EXPECT_EQ(o, (std::vector<float>{v0, v1, 1.0078125f, -3, 1.0078125f, -3}));
  EXPECT_EQ(final_state, (std::vector<uint16_t>{0x3F80, 0x3F81, 0x3F82, 0xC040}));
  EXPECT_EQ(snapshots[0], 0x3F80);  // after t0, element (0,0)
  EXPECT_EQ(snapshots[2], 0x3F82);  // after t0, element (1,0)
}

// 16-bit outputs round the f64 value directly, not through f32 (which would round twice).
// Inputs and o in bf16 or f16, f32 state. With u the output's unit in the last place at 1
// (bf16: 2^-7, f16: 2^-10), q = (1, u/2) and S0 = [[0, s], [0, 1]] with s = 1 + 2^-30 / (u/2):
//   o0 = 1 * 1 + s * u/2 = 1 + u/2 + 2^-30: just above the tie, rounds up to 1 + u;
//        via f32 it would become 1 + u/2 exactly, a tie, and round down to 1.
//   o1 = 1 * 1 + 1 * u/2 = 1 + u/2: an exact tie, rounds to the even 1.
// (t0: k = (1,0), v = (1,1), beta = 1 sets S[:,0] = (1,1); t1, t2: beta = 0 keep S.)
TEST(OracleRounding, HalfOutputsRoundOnceFromF64) {
  struct Format {
    gdn_dtype dtype;
    int half_ulp_exp;
    uint16_t one, one_plus_ulp, half_ulp;
  };
  const Format formats[] = {
      {GDN_DTYPE_BF16, -8, 0x3F80, 0x3F81, 0x3B80},  // 2^-8 in bf16: 0x3B80
      {GDN_DTYPE_F16, -11, 0x3C00, 0x3C01, 0x1000},  // 2^-11 in f16: 0x1000
  };
  for (const Format& f : formats) {
    SCOPED_TRACE(f.dtype == GDN_DTYPE_BF16 ? "bf16" : "f16");
    const uint16_t one = f.one, zero = 0;
    std::vector<uint16_t> q = {one, f.half_ulp, one, f.half_ulp, one, f.half_ulp};
    std::vector<uint16_t> k = {one, zero, one, zero, one, zero}, v = {one, one, one, one, one, one};
    std::vector<float> g = {0, 0, 0}, beta = {1, 0, 0};
    const float s =
        1 + std::ldexp(1.f, -30 - f.half_ulp_exp);  // s * 2^half_ulp_exp = 2^half_ulp_exp + 2^-30
    std::vector<float> initial_state = {0, s, 0, 1};
    std::vector<uint16_t> o(6, 0xFFFF);
    gdn::ForwardArgs args;
    args.q = gdn::tensor(q.data(), f.dtype, {1, 3, 1, 2});
    args.k = gdn::tensor(k.data(), f.dtype, {1, 3, 1, 2});
    args.v = gdn::tensor(v.data(), f.dtype, {1, 3, 1, 2});
    args.g = gdn::tensor(g.data(), GDN_DTYPE_F32, {1, 3, 1});
    args.beta = gdn::tensor(beta.data(), GDN_DTYPE_F32, {1, 3, 1});
    args.o = gdn::tensor(o.data(), f.dtype, {1, 3, 1, 2});
    args.initial_state = gdn::tensor(initial_state.data(), GDN_DTYPE_F32, {1, 1, 2, 2});
    args.scale = 1;
    args.backend = GDN_BACKEND_REFERENCE;
    ASSERT_EQ(gdn_forward(&args), GDN_STATUS_SUCCESS) << gdn_last_error();
    for (int t = 0; t < 3; ++t) {
      EXPECT_EQ(o[2 * t], f.one_plus_ulp) << "token " << t;
      EXPECT_EQ(o[2 * t + 1], f.one) << "token " << t;
    }
  }
}

}  // namespace

// The host fill of the parameter fields both cuda paths share (cuda/host_common.h
// batch_params): every field comes from the validated Problem's matching one. No GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/fast_div.h"
#include "cuda/host_common.h"

namespace gdn::cuda {
namespace {

void* at(uintptr_t a) { return reinterpret_cast<void*>(a); }

TokenTensor token(uintptr_t data, gdn_dtype dtype, int64_t base) {
  TokenTensor t;
  t.data = at(data);
  t.dtype = dtype;
  t.seq = base;
  t.tok = base + 1;
  t.head = base + 2;
  return t;
}

void expect_view(const TokenView& v, const TokenTensor& t) {
  EXPECT_EQ(v.p, t.data);
  EXPECT_EQ(v.seq, t.seq);
  EXPECT_EQ(v.tok, t.tok);
  EXPECT_EQ(v.head, t.head);
  EXPECT_EQ(v.dtype, t.dtype);
}

TEST(BatchParams, EveryFieldFromTheProblem) {
  Problem p;
  p.N = 3;
  p.T = 7;
  p.T_total = 21;
  p.Hk = 2;
  p.Hv = 6;
  p.ratio = 3;
  p.q = token(0x1000, GDN_DTYPE_BF16, 10);
  p.k = token(0x2000, GDN_DTYPE_BF16, 20);
  p.v = token(0x3000, GDN_DTYPE_F16, 30);
  p.o = token(0x4000, GDN_DTYPE_F16, 40);
  p.g = token(0x5000, GDN_DTYPE_F32, 50);
  p.beta = token(0x6000, GDN_DTYPE_BF16, 60);
  p.a = token(0x7000, GDN_DTYPE_F32, 70);
  p.A_log = HeadVector{at(0x8000), GDN_DTYPE_BF16, 2};
  p.dt_bias = HeadVector{at(0x9000), GDN_DTYPE_F32, 3};
  p.initial_state = StateTensor{at(0xa000), GDN_DTYPE_F32, 100, 101, 102};
  p.final_state = StateTensor{at(0xb000), GDN_DTYPE_F32, 200, 201, 202};
  p.packed = true;
  p.cu_seqlens = at(0xc000);
  p.cu_seqlens_dtype = GDN_DTYPE_I64;
  p.state_indices = static_cast<const int32_t*>(at(0xd000));
  p.state_indices_stride = 4;
  p.pool_slots = 9;
  p.error_flags = static_cast<uint32_t*>(at(0xe000));
  p.gate = GDN_GATE_RAW;
  p.beta_mode = GDN_BETA_LOGIT;
  p.head_map = GDN_HEAD_MAP_TILED;
  p.qk_l2norm = true;
  p.scale = 0.25f;

  const BatchParams b = batch_params(p);
  EXPECT_EQ(b.N, 3);
  EXPECT_EQ(b.T, 7);
  EXPECT_EQ(b.T_total, 21);
  EXPECT_EQ(b.Hk, 2);
  EXPECT_EQ(b.Hv, 6);
  EXPECT_EQ(b.ratio, 3);
  expect_view(b.q, p.q);
  expect_view(b.k, p.k);
  expect_view(b.v, p.v);
  expect_view(b.o, p.o);
  expect_view(b.g, p.g);
  expect_view(b.beta, p.beta);
  expect_view(b.a, p.a);
  EXPECT_EQ(b.A_log, p.A_log.data);
  EXPECT_EQ(b.A_log_stride, 2);
  EXPECT_EQ(b.A_log_dtype, GDN_DTYPE_BF16);
  EXPECT_EQ(b.dt_bias, p.dt_bias.data);
  EXPECT_EQ(b.dt_bias_stride, 3);
  EXPECT_EQ(b.dt_bias_dtype, GDN_DTYPE_F32);
  EXPECT_EQ(b.h0.p, p.initial_state.data);
  EXPECT_EQ(b.h0.slot, 100);
  EXPECT_EQ(b.h0.head, 101);
  EXPECT_EQ(b.h0.row, 102);
  EXPECT_EQ(b.ht.p, p.final_state.data);
  EXPECT_EQ(b.ht.slot, 200);
  EXPECT_EQ(b.ht.head, 201);
  EXPECT_EQ(b.ht.row, 202);
  EXPECT_EQ(b.cu_seqlens, p.cu_seqlens);
  EXPECT_EQ(b.cu_seqlens_i64, 1);
  EXPECT_EQ(b.state_indices, p.state_indices);
  EXPECT_EQ(b.state_indices_stride, 4);
  EXPECT_EQ(b.pool_slots, 9);
  EXPECT_EQ(b.error_flags, p.error_flags);
  EXPECT_EQ(b.gate, GDN_GATE_RAW);
  EXPECT_EQ(b.beta_logit, 1);
  EXPECT_EQ(b.tiled, 1);
  EXPECT_EQ(b.l2norm, 1);
  EXPECT_EQ(b.scale, 0.25f);
}

TEST(BatchParams, DenseBatchHasNoSequenceBoundaries) {
  Problem p;
  p.N = 2;
  p.T = 5;
  p.packed = false;
  p.cu_seqlens = at(0xc000);  // ignored unless packed
  p.cu_seqlens_dtype = GDN_DTYPE_I32;
  const BatchParams b = batch_params(p);
  EXPECT_EQ(b.cu_seqlens, nullptr);
  EXPECT_EQ(b.cu_seqlens_i64, 0);
  EXPECT_EQ(b.beta_logit, 0);
  EXPECT_EQ(b.tiled, 0);
}

// The decode kernels' CTA index division (fast_div.h): exact for every divisor they can meet
// and every index below 2^31, the edges included.
TEST(FastDiv, MatchesIntegerDivision) {
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (uint32_t d : {65535u, 65536u, 65537u, 1u << 20, (1u << 30) - 1, 1u << 30, (1u << 30) + 1, (1u << 31) - 1})
    divisors.push_back(d);
  uint64_t x = 0x9e3779b97f4a7c15ull;  // a fixed sequence of indices (xorshift)
  for (uint32_t d : divisors) {
    const FastDiv f = FastDiv::make(d);
    std::vector<uint32_t> ns = {0u, 1u, d - 1, d, d + 1, (1u << 31) - 1, (1u << 31) - 2, ((1u << 31) - 1) / d * d,
                                ((1u << 31) - 1) / d * d - 1};
    for (int i = 0; i < 64; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      ns.push_back(uint32_t(x) & 0x7fffffffu);
    }
    for (uint32_t n : ns) {
      if (n >= (1u << 31)) continue;
      ASSERT_EQ(f.div(n), n / d) << "n = " << n << ", d = " << d;
    }
  }
}

}  // namespace
}  // namespace gdn::cuda

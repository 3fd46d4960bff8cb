// gdn_chain_lab: the chunked prefill's chain step on mma.sync against the same maths on wgmma,
// in the shape a warp-specialised fused kernel would give it (docs/NOTES.md, tenth session: the
// redesign's budget). Not part of libgdn; sm_90a only.
//
// One CTA of 8 warps per head walks kChunks chunks. Per chunk, from tiles already prepared
// (in global memory, copied into the other of two shared-memory stages by cp.async while the
// chain works on this one; one barrier a step):
//   D^T = U^T + S (-W)^T          S as hi + lo
//   O^T = (S Qc^T) diag(q_f) + D^T P^T       S Qc^T on S's hi half; D^T P^T as dh ph + dl ph + dh pl
//   S   = gamma_C S + (D^T diag(k_f)) Kc      D scaled, as hi + lo
// [V = 128, C = 64, K = 128], the precision plan of chunked_steps.cuh.
//   sync:  the library's own chain functions (key_products, finish_outputs, advance_state):
//          warp w holds state rows [16 w, +16) as m16n8 accumulators, mma.sync m16n8k16;
//   wgmma: two warpgroups of 64 rows, the state as the m64n128 accumulators of wgmma (the same
//          registers per thread), every product m64n64k16 with the A operand from registers
//          (S, D: acc_to_a_split) and B from shared memory in core-matrix layouts: -W, Qc and
//          P K-major, Kc MN-major (the layouts bench/wgmma_lab.cu and the chain-wgmma branch
//          checked on the device).
// It prints each variant's time per chunk step (median of 5 launches) and how far the two
// final states and output checksums are apart (the same sums in another order: about 1e-6).
// Run: gdn_chain_lab (exit 0 if both ran and agree within 1e-4).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "chain_lab_common.h"
#include "cuda/chunked_steps.cuh"

namespace {

using namespace gdn::cuda::chunked;
using M = MmaBf16;

constexpr int kHeads = 128;   // CTAs: one wave on 132 SMs, as 4 x 8192 at Hv = 32
constexpr int kChunks = 128;  // chunk steps per CTA (8192 tokens)
constexpr int kData = 8;      // distinct prepared chunks, head h at step c takes (c + h) % kData
constexpr int kRuns = 5;

// The prepared chunks in global memory, dense row-major.
struct Prepared {
  const uint16_t* w_neg;  // [kData][C][K] -W
  const uint16_t* q;      // [kData][C][K] Qc
  const uint16_t* k;      // [kData][C][K] Kc
  const uint16_t* p_hi;   // [kData][C][C] P = Mask o (Qn Kn^T), lower triangular, hi part
  const uint16_t* p_lo;   // [kData][C][C] and lo part
  const float* u;         // [kData][V][C] U^T
  const float* G;         // [kData][C] cumulative log-decay (G[C - 1]: the chunk's)
  const float* q_f;       // [kData][C] output factors gamma_t / ||q_t||
  const float* k_f;       // [kData][C] state factors exp(G_C - G_t) / ||k_t||
};

struct Outputs {
  float* S;         // [kHeads][V][K] final states
  float* checksum;  // [kHeads * threads] sums of every O^T element a thread produced
  int mode;         // 0: copies and chain; 1: the chain alone (both stages loaded once); 2: copies alone;
                    // 3: copies alone without the proxy fence (wgmma kernels)
  int offset;       // chain_ws_kernel: 1, the second consumer warpgroup starts once the first has its key products;
                    // 2, the two take turns at each phase of products (Turns: named barriers 2 and 3)
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void copy16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// ---- the two stages (one chunk's tiles) in shared memory

struct SyncStage {  // the library's padded row-major tiles (chunked_tile.h strides)
  uint16_t w_neg[kC][kLdTok];
  uint16_t q[kC][kLdTok];
  uint16_t k[kC][kLdTok];
  uint16_t p_hi[kC][kLdCC];
  uint16_t p_lo[kC][kLdCC];
  float u[kV][kC + 4];
  float G[kC], q_f[kC], k_f[kC];
};

struct __align__(1024) WgStage {  // core matrices of 8 rows x 16 bytes, no swizzle
  uint16_t w_neg[kC * kK];  // K-major [token][key], 8-row groups kK * 16 B apart
  uint16_t q[kC * kK];      // likewise
  uint16_t k[kC * kK];      // MN-major [token][key]: token is the product's k
  uint16_t p_hi[kC * kC];   // K-major [t][t'], 8-row groups kC * 16 B apart
  uint16_t p_lo[kC * kC];
  float u[kV][kC + 4];
  float G[kC], q_f[kC], k_f[kC];
};

// Byte offset of (n, k) in a K-major tile of kRowElems k per row; of (k, n) in an MN-major tile
// of kRows k (the layouts of bench/wgmma_lab.cu's matching candidates).
template <int kRowElems>
__host__ __device__ constexpr uint32_t k_major_offset(int n, int k) {
  return uint32_t((n >> 3) * (kRowElems * 16) + (k >> 3) * 128 + (n & 7) * 16 + (k & 7) * 2);
}
template <int kRows>
__host__ __device__ constexpr uint32_t mn_major_offset(int k, int n) {
  return uint32_t((n >> 3) * (kRows * 16) + (k >> 3) * 128 + (k & 7) * 16 + (n & 7) * 2);
}

// One chunk (data index d) into a stage; each of the kN threads issues its share of 16-byte
// pieces. Core-matrix layouts (kWg): piece i takes row 8 (i >> 7) + (i & 7), so that eight
// consecutive lanes fill one core matrix's 128 contiguous bytes (a row-major piece order puts a
// warp's pieces 128 bytes apart: the same four banks, 8-way conflicts; the first lab run's copies
// alone took 4.24 us a step in that order against 2.65 for the padded row-major tiles).
template <bool kWg, int kN = kThreads, class Stage>
__device__ __forceinline__ void load_stage(const Prepared& in, int d, Stage& st, int tid) {
  const size_t tok_tile = size_t(d) * kC * kK, cc_tile = size_t(d) * kC * kC;
  for (int i = tid; i < kC * kK / 8; i += kN) {  // w_neg, q, k: 16 pieces a row
    const int r = kWg ? 8 * (i >> 7) + (i & 7) : i >> 4, col = kWg ? ((i >> 3) & 15) * 8 : (i & 15) * 8;
    const size_t from = tok_tile + size_t(r) * kK + col;
    if constexpr (kWg) {
      copy16(smem_u32(st.w_neg) + k_major_offset<kK>(r, col), in.w_neg + from);
      copy16(smem_u32(st.q) + k_major_offset<kK>(r, col), in.q + from);
      copy16(smem_u32(st.k) + mn_major_offset<kC>(r, col), in.k + from);
    } else {
      copy16(smem_u32(&st.w_neg[r][col]), in.w_neg + from);
      copy16(smem_u32(&st.q[r][col]), in.q + from);
      copy16(smem_u32(&st.k[r][col]), in.k + from);
    }
  }
  for (int i = tid; i < kC * kC / 8; i += kN) {  // p_hi, p_lo: 8 pieces a row
    const int r = kWg ? 8 * (i >> 6) + (i & 7) : i >> 3, col = kWg ? ((i >> 3) & 7) * 8 : (i & 7) * 8;
    const size_t from = cc_tile + size_t(r) * kC + col;
    if constexpr (kWg) {
      copy16(smem_u32(st.p_hi) + k_major_offset<kC>(r, col), in.p_hi + from);
      copy16(smem_u32(st.p_lo) + k_major_offset<kC>(r, col), in.p_lo + from);
    } else {
      copy16(smem_u32(&st.p_hi[r][col]), in.p_hi + from);
      copy16(smem_u32(&st.p_lo[r][col]), in.p_lo + from);
    }
  }
  for (int i = tid; i < kV * kC / 4; i += kN) {  // U^T: 16 pieces a row
    const int r = i >> 4, col = (i & 15) * 4;
    copy16(smem_u32(&st.u[r][col]), in.u + size_t(d) * kV * kC + size_t(r) * kC + col);
  }
  if (tid < 3 * kC / 4) {  // G, q_f, k_f: 16 pieces each
    const int which = tid / (kC / 4), piece = tid % (kC / 4);
    const float* from = (which == 0 ? in.G : which == 1 ? in.q_f : in.k_f) + size_t(d) * kC + 4 * piece;
    float* to = (which == 0 ? st.G : which == 1 ? st.q_f : st.k_f) + 4 * piece;
    copy16(smem_u32(to), from);
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

// D^T <- U^T for the warp's 16 rows (row0), in the m16n8 accumulator layout.
template <class Stage>
__device__ __forceinline__ void load_u(const Stage& st, int row0, int lane, float (&D)[8][4]) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    const float2 a = *reinterpret_cast<const float2*>(&st.u[row0 + g][8 * t + 2 * q]);
    const float2 b = *reinterpret_cast<const float2*>(&st.u[row0 + g + 8][8 * t + 2 * q]);
    D[t][0] = a.x, D[t][1] = a.y, D[t][2] = b.x, D[t][3] = b.y;
  }
}

__device__ __forceinline__ float sum_tiles(const float (&O)[8][4]) {
  float s = 0.f;
#pragma unroll
  for (int t = 0; t < 8; ++t) s += O[t][0] + O[t][1] + O[t][2] + O[t][3];
  return s;
}

template <int kTiles>
__device__ __forceinline__ void store_state(const float (&S)[kTiles][4], float* out, int row0, int lane) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    out[(row0 + g) * kK + 8 * t + 2 * q] = S[t][0];
    out[(row0 + g) * kK + 8 * t + 2 * q + 1] = S[t][1];
    out[(row0 + g + 8) * kK + 8 * t + 2 * q] = S[t][2];
    out[(row0 + g + 8) * kK + 8 * t + 2 * q + 1] = S[t][3];
  }
}

// ---- sync: the library's chain functions

__global__ void __launch_bounds__(kThreads, 1) chain_sync_kernel(const Prepared in, const Outputs out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  SyncStage* stage = reinterpret_cast<SyncStage*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, h = int(blockIdx.x);
  float S[16][4] = {};
  float checksum = 0.f;
  load_stage<false>(in, h % kData, stage[0], tid);
  if (out.mode == 1) load_stage<false>(in, (1 + h) % kData, stage[1], tid);
  for (int c = 0; c < kChunks; ++c) {
    const int buf = c & 1;
    asm volatile("cp.async.wait_group 0;\n" ::);  // chunk c, issued a step ago
    __syncthreads();  // ... in every thread's view; and chunk c - 1's reads of stage[buf ^ 1] are done
    if (c + 1 < kChunks && out.mode != 1) load_stage<false>(in, (c + 1 + h) % kData, stage[buf ^ 1], tid);
    if (out.mode == 2) continue;
    const SyncStage& st = stage[buf];
    float D[8][4], O[8][4];
    load_u(st, 16 * warp, lane, D);
    const ChainTiles ct{&st.w_neg[0][0], &st.q[0][0], &st.k[0][0], &st.p_hi[0][0], &st.p_lo[0][0],
                        st.G, st.q_f, st.k_f};
    key_products<M>(ct, lane, S, D, O, 0);
    finish_outputs<M, 0xFu, true>(ct, lane, D, O);
    advance_state<M, true>(ct, lane, D, S, 0);
    checksum += sum_tiles(O);
  }
  store_state(S, out.S + size_t(h) * kV * kK, 16 * warp, lane);
  out.checksum[h * kThreads + tid] = checksum;
}

// ---- wgmma

__device__ __forceinline__ void wg_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wg_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Descriptor of the 16-element k-step at k0 of a K-major tile (LBO 128 B along k, SBO
// kRowElems * 16 B along n), and of the k-step k0, columns from n0, of an MN-major tile (LBO
// 128 B along k, SBO kRows * 16 B along n); no swizzle.
template <int kRowElems>
__device__ __forceinline__ uint64_t k_major_desc(uint32_t tile, int k0) {
  const uint32_t start = tile + uint32_t(k0 >> 3) * 128u;
  return uint64_t((start >> 4) & 0x3FFFu) | (uint64_t(128u >> 4) << 16) | (uint64_t((kRowElems * 16u) >> 4) << 32);
}
template <int kRows>
__device__ __forceinline__ uint64_t mn_major_desc(uint32_t tile, int k0, int n0) {
  const uint32_t start = tile + uint32_t(n0 >> 3) * uint32_t(kRows * 16) + uint32_t(k0 >> 3) * 128u;
  return uint64_t((start >> 4) & 0x3FFFu) | (uint64_t(128u >> 4) << 16) | (uint64_t((kRows * 16u) >> 4) << 32);
}

// d += a b, m64n64k16, bf16 in, f32 accumulators (d[j]: the warp's n8 tile j); kTransB: B MN-major.
template <int kTransB>
__device__ __forceinline__ void wgmma64(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "{%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1), "n"(kTransB));
#else
  (void)d, (void)a, (void)desc_b;
  __trap();
#endif
}

// d += a b, m64n128k16 (d[j]: the warp's n8 tile j of 16); B MN-major (the state update's Kc).
__device__ __forceinline__ void wgmma128_tb(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "{%64,%65,%66,%67}, %68, 1, 1, 1, 1;\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
#else
  (void)d, (void)a, (void)desc_b;
  __trap();
#endif
}

// The tensor pipe's turns between the two consumer warpgroups (chain_ws_kernel's alternating
// variant; off, the default, nothing): take() before a warpgroup issues a phase of products on
// named barrier `mine`, give() once it has issued them, on the other warpgroup's.
struct Turns {
  int mine = 0, other = 0;
  bool on = false;
  __device__ __forceinline__ void take() const {
    if (on) asm volatile("bar.sync %0, 256;\n" ::"r"(mine) : "memory");
  }
  __device__ __forceinline__ void give() const {
    if (on) asm volatile("bar.arrive %0, 256;\n" ::"r"(other) : "memory");
  }
};

// One chain step on wgmma for the warpgroup of rows [row0 - 16 (warp % 4), +64): S and the
// checksum carried; after_keys() runs once the key products (D and S Qc^T) are done; turns
// brackets each of the step's three phases of products.
template <bool kN128 = false, class AfterKeys>
__device__ __forceinline__ void wg_chain_step(const WgStage& st, int row0, int lane, float (&S)[16][4],
                                              float& checksum, AfterKeys after_keys, Turns turns = {}) {
  const int q = lane & 3;
  float D[8][4], O[8][4];
  load_u(st, row0, lane, D);
#pragma unroll
  for (int t = 0; t < 8; ++t) O[t][0] = O[t][1] = O[t][2] = O[t][3] = 0.f;

  // D^T += S (-W)^T (S hi + lo), O^T = S Qc^T (S hi): two k-steps' A fragments in flight
  const uint32_t w_tile = smem_u32(st.w_neg), q_tile = smem_u32(st.q);
  uint32_t a[2][2][4];
  turns.take();
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    if (ks >= 2) wg_wait<1>();
    acc_to_a_split<M>(S, ks, a[ks & 1][0], a[ks & 1][1]);
    wg_fence();
    const uint64_t wd = k_major_desc<kK>(w_tile, 16 * ks), qd = k_major_desc<kK>(q_tile, 16 * ks);
    wgmma64<0>(D, a[ks & 1][0], wd);
    wgmma64<0>(D, a[ks & 1][1], wd);
    wgmma64<0>(O, a[ks & 1][0], qd);
    wg_commit();
  }
  turns.give();
  wg_wait<0>();
  after_keys();  // the key products of this step are done

  // O^T = (S Qc^T) diag(q_f) + D^T P^T (dh ph + dl ph + dh pl; P's zero upper blocks multiplied)
#pragma unroll
  for (int t = 0; t < 8; ++t)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float f = st.q_f[8 * t + 2 * q + e];
      O[t][e] *= f;
      O[t][2 + e] *= f;
    }
  const uint32_t ph_tile = smem_u32(st.p_hi), pl_tile = smem_u32(st.p_lo);
  turns.take();
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) {
    if (ks >= 2) wg_wait<1>();
    acc_to_a_split<M>(D, ks, a[ks & 1][0], a[ks & 1][1]);
    wg_fence();
    const uint64_t hd = k_major_desc<kC>(ph_tile, 16 * ks), ld = k_major_desc<kC>(pl_tile, 16 * ks);
    wgmma64<0>(O, a[ks & 1][0], hd);
    wgmma64<0>(O, a[ks & 1][1], hd);
    wgmma64<0>(O, a[ks & 1][0], ld);
    wg_commit();
  }
  turns.give();
  wg_wait<0>();
  checksum += sum_tiles(O);

  // S <- gamma_C S + (D^T diag(k_f)) Kc, 64 key columns a product
  const float decay = expf(st.G[kC - 1]);
#pragma unroll
  for (int t = 0; t < 16; ++t) S[t][0] *= decay, S[t][1] *= decay, S[t][2] *= decay, S[t][3] *= decay;
  const uint32_t k_tile = smem_u32(st.k);
  turns.take();
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) {
    if (ks >= 2) wg_wait<1>();
    float dd[2][4];
#pragma unroll
    for (int u = 0; u < 2; ++u)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float f = st.k_f[16 * ks + 8 * u + 2 * q + e];
        dd[u][e] = D[2 * ks + u][e] * f;
        dd[u][2 + e] = D[2 * ks + u][2 + e] * f;
      }
    acc_to_a_split<M>(dd, 0, a[ks & 1][0], a[ks & 1][1]);
    wg_fence();
    if constexpr (kN128) {  // all 128 key columns in one product
      const uint64_t kd = mn_major_desc<kC>(k_tile, 16 * ks, 0);
      wgmma128_tb(S, a[ks & 1][0], kd);
      wgmma128_tb(S, a[ks & 1][1], kd);
    } else {
#pragma unroll
      for (int nb = 0; nb < 2; ++nb) {
        float (&Sn)[8][4] = *reinterpret_cast<float (*)[8][4]>(&S[8 * nb][0]);
        const uint64_t kd = mn_major_desc<kC>(k_tile, 16 * ks, 64 * nb);
        wgmma64<1>(Sn, a[ks & 1][0], kd);
        wgmma64<1>(Sn, a[ks & 1][1], kd);
      }
    }
    wg_commit();
  }
  turns.give();
  wg_wait<0>();
}

__global__ void __launch_bounds__(kThreads, 1) chain_wgmma_kernel(const Prepared in, const Outputs out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  WgStage* stage = reinterpret_cast<WgStage*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, h = int(blockIdx.x);
  const int row0 = 16 * warp;  // warpgroup warp / 4, its rows [64 (warp / 4), +64); this warp's 16
  float S[16][4] = {};         // the m64n128 accumulators of the warpgroup: the same registers
  float checksum = 0.f;
  load_stage<true>(in, h % kData, stage[0], tid);
  if (out.mode == 1) load_stage<true>(in, (1 + h) % kData, stage[1], tid);
  for (int c = 0; c < kChunks; ++c) {
    const int buf = c & 1;
    asm volatile("cp.async.wait_group 0;\n" ::);  // chunk c, issued a step ago
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (out.mode != 3) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async writes -> wgmma reads
#endif
    __syncthreads();  // ... in every thread's view; and chunk c - 1's reads of stage[buf ^ 1] are done
    // the next chunk's copies after the fence (a fence waits for this thread's copies in flight:
    // the chain-wgmma branch's profile)
    if (c + 1 < kChunks && out.mode != 1) load_stage<true>(in, (c + 1 + h) % kData, stage[buf ^ 1], tid);
    if (out.mode >= 2) continue;
    wg_chain_step(stage[buf], row0, lane, S, checksum, [] {});
  }
  store_state(S, out.S + size_t(h) * kV * kK, row0, lane);
  out.checksum[h * kThreads + tid] = checksum;
}

// ---- wgmma, warp-specialised: a producer warpgroup copies the stages (and signals them full
// by mbarrier), two consumer warpgroups run wg_chain_step and signal each stage empty; no
// barrier across the CTA inside the loop, so the consumers may run out of phase (offset: the
// second starts once the first has done chunk 0's key products) and fill each other's gaps in
// the tensor pipe. Registers: the producer gives back to 56, the consumers take 224.

constexpr int kWsThreads = 3 * 128;

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

template <bool kN128>
__global__ void __launch_bounds__(kWsThreads, 1) chain_ws_kernel(const Prepared in, const Outputs out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  WgStage* stage = reinterpret_cast<WgStage*>(smem_raw);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem_raw + 2 * sizeof(WgStage));  // [2]: copies landed
  uint64_t* empty = full + 2;                                                      // [2]: reads done
  const int tid = threadIdx.x, h = int(blockIdx.x);
  if (tid == 0) {
    for (int s = 0; s < 2; ++s) mbar_init(&full[s], 128), mbar_init(&empty[s], 256);
  }
  __syncthreads();
  // the warpgroup index as a warp-uniform value (a branch on threadIdx itself is divergent to the
  // compiler, which then serialises every wgmma behind it)
  const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);
  if (wg == 2) {  // producer
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n");
#endif
    const int ptid = tid - 256;
    for (int c = 0; c < kChunks; ++c) {
      const int s = c & 1;
      if (c >= 2) mbar_wait(&empty[s], uint32_t((c >> 1) - 1) & 1u);
      if (out.mode != 1 || c < 2) {
        load_stage<true, 128>(in, (c + h) % kData, stage[s], ptid);
        asm volatile("cp.async.wait_group 0;\n" ::);
      }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      if (out.mode != 3) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // cp.async writes -> wgmma reads
#endif
      mbar_arrive(&full[s]);
    }
    return;
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n");
#endif
  const int warp = tid >> 5, lane = tid & 31;
  const int row0 = 16 * warp;
  float S[16][4] = {};
  float checksum = 0.f;
  const bool offset = out.offset == 1;
  if (offset && wg == 1) asm volatile("bar.sync 1, 256;\n" ::: "memory");
  // Alternating: warpgroup w waits on barrier 2 + w before issuing a phase of products and, once
  // it has issued them, arrives on the other's, so the two issue their phases in turn (warpgroup
  // 0 first: warpgroup 1 arrives once up front, and warpgroup 0 takes that last turn at the end).
  const Turns turns{2 + wg, 3 - wg, out.offset == 2 && out.mode < 2};
  if (turns.on && wg == 1) turns.give();
  for (int c = 0; c < kChunks; ++c) {
    const int s = c & 1;
    mbar_wait(&full[s], uint32_t(c >> 1) & 1u);
    const bool signal = offset && wg == 0 && c == 0;
    auto after_keys = [&] {
      if (signal) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
    };
    if (out.mode < 2)
      wg_chain_step<kN128>(stage[s], row0, lane, S, checksum, after_keys, turns);
    else
      after_keys();
    mbar_arrive(&empty[s]);
  }
  if (turns.on && wg == 0) turns.take();  // warpgroup 1's last turn
  store_state(S, out.S + size_t(h) * kV * kK, row0, lane);
  out.checksum[h * kThreads + tid] = checksum;
}

// ---- host

using chain_lab::from_bf16;
using chain_lab::rel_l2;
using chain_lab::to_bf16;

template <class T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  CK(cudaMalloc(&d, v.size() * sizeof(T)));
  CK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

struct Result {
  double us_per_step = 0;
  int regs = 0, spill = 0;
  std::vector<float> S, checksum;
};

template <class Kernel>
Result run(Kernel kernel, size_t smem, const Prepared& in, int mode = 0, int threads = kThreads, int offset = 0) {
  Result r;
  cudaFuncAttributes fa{};
  CK(cudaFuncGetAttributes(&fa, kernel));
  r.regs = fa.numRegs;
  r.spill = int(fa.localSizeBytes);
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  Outputs out{};
  out.mode = mode;
  out.offset = offset;
  CK(cudaMalloc(&out.S, size_t(kHeads) * kV * kK * 4));
  CK(cudaMalloc(&out.checksum, size_t(kHeads) * kThreads * 4));
  r.us_per_step = 1e3 * chain_lab::median_launch_ms([&] { kernel<<<kHeads, threads, smem>>>(in, out); }, kRuns) / kChunks;
  r.S.resize(size_t(kHeads) * kV * kK);
  r.checksum.resize(size_t(kHeads) * kThreads);
  CK(cudaMemcpy(r.S.data(), out.S, r.S.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.checksum.data(), out.checksum, r.checksum.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaFree(out.S));
  CK(cudaFree(out.checksum));
  return r;
}

}  // namespace

int main() {
  std::mt19937 rng(20261130);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<uint16_t> w_neg(size_t(kData) * kC * kK), q(w_neg.size()), k(w_neg.size());
  std::vector<uint16_t> p_hi(size_t(kData) * kC * kC), p_lo(p_hi.size());
  std::vector<float> u(size_t(kData) * kV * kC), G(size_t(kData) * kC), q_f(G.size()), k_f(G.size());
  for (int d = 0; d < kData; ++d) {
    for (int t = 0; t < kC; ++t) {
      double norm = 0;
      std::vector<float> row(kK);
      for (int j = 0; j < kK; ++j) row[j] = normal(rng), norm += double(row[j]) * row[j];
      for (int j = 0; j < kK; ++j) {
        const size_t at = (size_t(d) * kC + t) * kK + j;
        k[at] = to_bf16(float(row[j] / std::sqrt(norm)));  // unit rows, as Kn
        q[at] = to_bf16(0.1f * normal(rng));
        w_neg[at] = to_bf16(0.02f * normal(rng));
      }
      for (int j = 0; j < kC; ++j) {  // P lower triangular
        const float p = j <= t ? 0.1f * normal(rng) : 0.f;
        const size_t at = (size_t(d) * kC + t) * kC + j;
        p_hi[at] = to_bf16(p);
        p_lo[at] = to_bf16(p - from_bf16(p_hi[at]));
      }
      G[size_t(d) * kC + t] = -0.01f * float(t + 1);
    }
    for (int t = 0; t < kC; ++t) {
      const float Gt = G[size_t(d) * kC + t], Gc = G[size_t(d) * kC + kC - 1];
      q_f[size_t(d) * kC + t] = std::exp(Gt);
      k_f[size_t(d) * kC + t] = std::exp(Gc - Gt);
    }
    for (int v = 0; v < kV; ++v)
      for (int t = 0; t < kC; ++t) u[(size_t(d) * kV + v) * kC + t] = normal(rng);
  }
  const Prepared in{upload(w_neg), upload(q), upload(k), upload(p_hi), upload(p_lo),
                    upload(u), upload(G), upload(q_f), upload(k_f)};

  std::printf("gdn_chain_lab: %d heads x %d chunk steps (C = %d, K = V = %d, bf16 hi + lo), one CTA of %d "
              "threads a head\n", kHeads, kChunks, kC, kK, kThreads);
  const Result sync = run(chain_sync_kernel, 2 * sizeof(SyncStage), in);
  std::printf("sync   (mma.sync m16n8k16, the library's chain): %7.3f us a step, %d registers, %d bytes spilled\n",
              sync.us_per_step, sync.regs, sync.spill);
  const Result wg = run(chain_wgmma_kernel, 2 * sizeof(WgStage), in);
  std::printf("wgmma  (m64n64k16, state as accumulators):       %7.3f us a step, %d registers, %d bytes spilled\n",
              wg.us_per_step, wg.regs, wg.spill);
  const double ds = rel_l2(wg.S, sync.S), dc = rel_l2(wg.checksum, sync.checksum);
  double s_norm = 0;
  for (float x : sync.S) s_norm += double(x) * x;
  std::printf("final states: wgmma against sync rel L2 %.2e (sync ||S|| = %.3e); output checksums %.2e\n", ds,
              std::sqrt(s_norm), dc);
  std::printf("wgmma / sync time: %.3f\n", wg.us_per_step / sync.us_per_step);
  // where the time goes: the chain alone (tiles loaded once) and the copies alone
  const double sc = run(chain_sync_kernel, 2 * sizeof(SyncStage), in, 1).us_per_step;
  const double wc = run(chain_wgmma_kernel, 2 * sizeof(WgStage), in, 1).us_per_step;
  const double so = run(chain_sync_kernel, 2 * sizeof(SyncStage), in, 2).us_per_step;
  const double wo = run(chain_wgmma_kernel, 2 * sizeof(WgStage), in, 2).us_per_step;
  std::printf("chain alone: sync %7.3f us, wgmma %7.3f us a step; copies alone: sync %7.3f us, wgmma %7.3f us\n",
              sc, wc, so, wo);
  // warp-specialised: a producer warpgroup, two consumer warpgroups in or out of phase
  const size_t ws_smem = 2 * sizeof(WgStage) + 4 * sizeof(uint64_t);
  bool ws_ok = true;
  std::printf("copies alone without the proxy fence: wgmma %7.3f us, warp-specialised %7.3f us a step\n",
              run(chain_wgmma_kernel, 2 * sizeof(WgStage), in, 3).us_per_step,
              run(chain_ws_kernel<false>, ws_smem, in, 3, kWsThreads).us_per_step);
  for (int variant = 0; variant < 4; ++variant) {
    const int offset = variant == 1 ? 1 : variant == 3 ? 2 : 0;
    const auto kernel = variant == 2 ? chain_ws_kernel<true> : chain_ws_kernel<false>;
    if (variant == 2) std::printf("(the state update as m64n128k16, 8 products a warpgroup and step instead of 16:)\n");
    if (variant == 3) std::printf("(the two consumer warpgroups taking turns at each phase of products:)\n");
    const Result ws = run(kernel, ws_smem, in, 0, kWsThreads, offset);
    const double ws_chain = run(kernel, ws_smem, in, 1, kWsThreads, offset).us_per_step;
    const double ws_copies = run(kernel, ws_smem, in, 2, kWsThreads, offset).us_per_step;
    const double d = rel_l2(ws.S, sync.S), dk = rel_l2(ws.checksum, sync.checksum);
    std::printf("wgmma warp-specialised, %s: %7.3f us a step (chain alone %7.3f, copies alone %7.3f); %d registers, "
                "%d spilled; against sync: states %.2e, checksums %.2e\n",
                offset == 2 ? "consumers alternating" : offset ? "consumers out of phase" : "consumers in phase",
                ws.us_per_step, ws_chain, ws_copies, ws.regs,
                ws.spill, d, dk);
    ws_ok = ws_ok && std::isfinite(d) && std::isfinite(dk) && d < 1e-4 && dk < 1e-4;
  }
  const bool ok = std::isfinite(ds) && std::isfinite(dc) && ds < 1e-4 && dc < 1e-4 && ws_ok;
  std::printf("%s\n", ok ? "PASS: the two chains agree" : "FAIL: the chains disagree (a layout or descriptor is off)");
  return ok ? 0 : 1;
}

// gdn_chain_ahead_lab: the split form's wgmma chain step as the library runs it against a step
// that looks one chunk ahead (docs/NOTES.md, forty-fifth and forty-sixth sessions). Not part of
// libgdn; sm_90a only.
//
// Today's step c needs S_c before it can form D_c = U_c + S_c (-W_c)^T (D^T as accumulators), and
// S_c comes from the state update at the end of step c - 1, so every step drains the tensor pipe
// twice. Since S_c = gamma_{c-1} S_{c-1} + D~_{c-1}^T Kc_{c-1} (D~ = D diag(k_f)),
//   D_c^T = U_c^T + (gamma_{c-1} S_{c-1}) (-W_c)^T + D_{c-1}^T Z_c,
//   Z_c   = diag(k_f(c-1)) Kc_{c-1} (-W_c)^T          [C, C], inputs only,
// so D_c depends on nothing the state update of step c - 1 makes: the look-ahead step issues
// D_{c+1}'s products (from f16 fragments of gamma_c S_c and D_c it formed anyway) behind its own
// state update, and the pipe does not drain between steps. Its products a step: S Qc^T 8, D^T P^T 4,
// the state update 16, D's 8 + 4 (m64n64k16 equivalents): 40 against today's 36.
//
// One CTA (a warpgroup and a copier warp, as chunk_chain_wgmma_kernel) per head walks kChunks
// chunks of kData distinct chunk images (head h at step c takes (c + h) % kData), each a
// LabStage image in global memory (random tiles in the library's layouts; Z in P's lo slot,
// formed by a setup kernel from the images). Both kernels copy a stage by bulk copies a step
// ahead, stage o by stmatrix and store it by a bulk copy. The lab prints each kernel's time per
// step and how far their final states and output sums are apart (Z's f16 rounding and the sums'
// order: about 1e-3).
// Then what bounds today's step (forty-eighth session): `o beside`, a second warpgroup taking the
// output products, o's scaling and its store off the state's warpgroup (the same bits), and the
// state's warpgroup with parts of its step dropped (wrong results); today's kernel on fewer SMs
// and without Qc and Kc's copies (the L2's bandwidth, the copies).
// Run: gdn_chain_ahead_lab (exit 0 if both ran and agree within 2e-2).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "chain_lab_common.h"
#include "cuda/chunked_wgmma.cuh"
#include "cuda/tma.cuh"

namespace {

using namespace gdn::cuda::chunked;
using M = MmaBf16;

constexpr int kHeads = 132;   // CTAs: one an SM
constexpr int kChunks = 128;  // chunk steps a CTA
constexpr int kData = 8;      // distinct chunk images
constexpr int kRuns = 5;
constexpr int kWorkers = 128;               // the warpgroup
constexpr int kLabThreads = kWorkers + 32;  // and the copier warp

// The stage as the library's chain took it before T and Vc's columns joined it (forty-ninth
// session): Qc, Kc, the prepared tiles and U^T of the CTA's rows, so the lab's steps begin from a
// stored U^T, within the shared memory the o-beside kernel's hand-over leaves.
struct LabStage {
  uint16_t q[kC * kK];               // [C, K] Qc, CoreTiles::Q
  uint16_t k[kC * kK];               // [C, K] Kc, CoreTiles::K
  PreparedTiles tiles;               // -W, P, G and the factors (Z in P's lo slot: form_z_kernel)
  float4 u[kChainRows / 16][8][32];  // U^T of the CTA's rows (accumulator fragments)
};
static_assert(sizeof(LabStage) % 1024 == 0, "stages at 1024-byte boundaries");

struct LabSmem {
  LabStage stage[2];
  uint16_t o_stage[2][kC * 64];
  uint64_t full[2];
  // the o-beside kernel's hand-over, warpgroup 0 -> 1, thread by thread: S's A fragments in M's
  // type (8 k-steps), D's in f16 (4), each warp's sigma
  uint4 s_frags[kK / 16][kWorkers];
  uint4 d_frags[kC / 16][kWorkers];
  int sigma[kWorkers / 32];
};
constexpr int kBesideThreads = 2 * kWorkers + 32;  // the o-beside kernel: two warpgroups and the copier
constexpr size_t kLabSmemBytes = sizeof(LabSmem) + 1024;

struct Outputs {
  float* S;         // [kHeads][64][kK] final states (the CTA's 64 rows)
  float* checksum;  // [kHeads][kWorkers] sums of every o value a thread staged
  uint16_t* o;      // [kHeads][2][kC * 64] o's bulk stores land here (overwritten)
  const float* S0;  // [kHeads][64][kK] start states (zeros; read as data, so that the compiler
                    // cannot fold the first fragments to constants: it serialised the wgmma then, C7512)
};

#if GDN_CHUNKED_WGMMA  // (the device pass for sm_90a; the host pass sees the kernels empty)
__device__ __forceinline__ void bulk_store(void* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(reinterpret_cast<uint64_t>(dst)),
               "r"(smem_addr(src)), "r"(bytes)
               : "memory");
}

// Chunk d's image into stage b (one thread): everything but P's lo half (today), or with it (Z).
// kLean (a timing probe, wrong results): Qc and Kc only for the first two chunks, the stage's
// later copies without them (32 KB fewer a step).
template <bool kWithZ, bool kLean = false>
__device__ __forceinline__ void issue_stage(LabSmem& s, const LabStage* images, int d, int b, int c = 0) {
  LabStage& st = s.stage[b];
  const LabStage& im = images[d];
  constexpr uint32_t kHead = uint32_t(kWithZ ? offsetof(PreparedTiles, G) : offsetof(PreparedTiles, p_lo));
  constexpr uint32_t kTail = uint32_t(sizeof(PreparedTiles) - offsetof(PreparedTiles, G));
  const bool qk = !kLean || c < 2;
  mbarrier_arrive_expect(&s.full[b], uint32_t((qk ? 2 * sizeof(st.q) : 0) + kHead + kTail + sizeof(st.u)));
  if (qk) {
    bulk_load(st.q, im.q, sizeof(st.q), &s.full[b]);
    bulk_load(st.k, im.k, sizeof(st.k), &s.full[b]);
  }
  bulk_load(&st.tiles, &im.tiles, kHead, &s.full[b]);
  bulk_load(&st.tiles.G[0], &im.tiles.G[0], kTail, &s.full[b]);
  bulk_load(&st.u[0][0][0], &im.u[0][0][0], sizeof(st.u), &s.full[b]);
}

// o of the step (O^T, the warp's 16 rows, at 2^-sigma) staged and stored by a bulk copy, as the chain does.
__device__ __forceinline__ void store_o(LabSmem& s, const Outputs& out, int buf, const float (&O)[8][4], int sigma,
                                        int tid, int warp, int lane, float& checksum, int barrier = 1) {
  uint16_t* o_stage = s.o_stage[buf];
  if (tid == 0) bulk_wait_read<1>();  // the store of two steps ago has read o_stage[buf]
  named_barrier(barrier, kWorkers);
  const float scale = pow2(sigma);  // O at 2^-sigma
  stage_o_stmatrix<M>(o_stage, O, scale, warp, lane);
  fence_shared_for_wgmma();
  named_barrier(barrier, kWorkers);
  if (tid == 0) {
    bulk_store(out.o + (size_t(blockIdx.x) * 2 + buf) * kC * 64, o_stage, kC * 64 * 2);
    bulk_commit();
  }
  float sum = 0.f;
#pragma unroll
  for (int t = 0; t < 8; ++t) sum += O[t][0] + O[t][1] + O[t][2] + O[t][3];
  checksum += scale * sum;
}

__device__ __forceinline__ void store_final(const Outputs& out, const float (&S)[16][4], int sigma, int warp,
                                            int lane) {
  const int g = lane >> 2, q = lane & 3;
  const float f = pow2(sigma);
  float* o = out.S + size_t(blockIdx.x) * 64 * kK;
#pragma unroll
  for (int t = 0; t < 16; ++t) {
    o[(16 * warp + g) * kK + 8 * t + 2 * q] = f * S[t][0];
    o[(16 * warp + g) * kK + 8 * t + 2 * q + 1] = f * S[t][1];
    o[(16 * warp + g + 8) * kK + 8 * t + 2 * q] = f * S[t][2];
    o[(16 * warp + g + 8) * kK + 8 * t + 2 * q + 1] = f * S[t][3];
  }
}

// The dynamic shared memory from its first 1024-byte boundary (the swizzled tiles').
__device__ __forceinline__ LabSmem& lab_smem() {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  return *reinterpret_cast<LabSmem*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
}

// Both kernels' start: the stage barriers, then the copier warp's loop (chunk c + 1 into the
// other stage once the step-c barrier has freed it); true for the copier, which is then done.
// kResident (a timing probe): both stages copied once at the start and never again (each step
// then reads one of two resident chunks: the stages' copies off the step entirely); `steps` the
// steps the copier joins the step barrier for (the pair step's: kChunks / 2).
template <bool kWithZ, int kThreads = kLabThreads, bool kLean = false, bool kResident = false>
__device__ __forceinline__ bool run_copier(LabSmem& s, const LabStage* images, int steps = kChunks) {
  const int tid = int(threadIdx.x), lane = tid & 31, h = int(blockIdx.x);
  if (tid == 0) {
    mbarrier_init(&s.full[0], 1);
    mbarrier_init(&s.full[1], 1);
    fence_mbarrier_init();
  }
  named_barrier(2, kThreads);
  if (tid < kThreads - 32) return false;
  if (lane == 0) issue_stage<kWithZ>(s, images, h % kData, 0);
  if (kResident && lane == 0) issue_stage<kWithZ>(s, images, (h + 1) % kData, 1);
  for (int c = 0; c < steps; ++c) {
    named_barrier(2, kThreads);
    if (!kResident && lane == 0 && c + 1 < kChunks)
      issue_stage<kWithZ, kLean>(s, images, (c + 1 + h) % kData, (c + 1) & 1, c + 1);
  }
  return true;
}

// Both kernels' end: o's stores complete, the final state and the output sums out.
__device__ __forceinline__ void finish_run(const Outputs& out, const float (&S)[16][4], int sigma, float checksum) {
  const int tid = int(threadIdx.x);
  if (tid == 0) bulk_wait_all<false>();
  store_final(out, S, sigma, tid >> 5, tid & 31);
  out.checksum[blockIdx.x * kWorkers + tid] = checksum;
}

// Step c's start: the step's barrier (the copier's too: it frees the other stage), then stage
// c & 1 landed.
template <int kThreads, bool kResident = false>
__device__ __forceinline__ const LabStage& enter_step(LabSmem& s, int c) {
  named_barrier(2, kThreads);
  if (!kResident || c < 2) mbarrier_wait(&s.full[c & 1], uint32_t(c >> 1) & 1u);
  return s.stage[c & 1];
}
// D^T <- U^T of the stage at 2^-sigma, the state's scale.
__device__ __forceinline__ void d_from_u(const LabStage& st, int warp, int lane, int sigma, float (&D)[8][4]) {
  const float u_scale = pow2(-sigma);
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    const float4 u = st.u[warp][t][lane];
    D[t][0] = u.x * u_scale, D[t][1] = u.y * u_scale, D[t][2] = u.z * u_scale, D[t][3] = u.w * u_scale;
  }
}

__device__ __forceinline__ ChainTiles chain_tiles(const LabStage& st) {
  return ChainTiles{st.tiles.w_neg, st.q, st.k, st.tiles.p_hi, nullptr, st.tiles.G, st.tiles.q_f, st.tiles.k_f};
}

#endif

// ---- today's step (chunk_chain_wgmma_kernel's loop, outputs on, no checkpoints)

// kFragDepth: the fragment sets of S (and of D) in flight in wgmma_chain_outputs_half (the
// library's 2; 4 and 8 measured against it: the same products, fewer waits inside its loops).
template <int kFragDepth, bool kLean = false, bool kResident = false>
__global__ void __launch_bounds__(kLabThreads, 1) chain_today_kernel(const LabStage* images, Outputs out) {
#if GDN_CHUNKED_WGMMA
  LabSmem& s = lab_smem();
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  if (run_copier<false, kLabThreads, kLean, kResident>(s, images)) return;
  float S[16][4] = {};
  int sigma = 0;
  float checksum = 0.f;
  for (int c = 0; c < kChunks; ++c) {
    const int buf = c & 1;
    const LabStage& st = enter_step<kLabThreads, kResident>(s, c);
    const ChainTiles ct = chain_tiles(st);
    wgmma_wait<0>();
    keep_state_in_range(S, sigma);
    float D[8][4];
    d_from_u(st, warp, lane, sigma, D);
    float O[8][4];
    const float decay = chunk_decay(ct);
    uint32_t a[4][2][4];
    wgmma_chain_outputs_half<M, true, 4, kFragDepth, true>(ct, lane, S, D, O, sigma, decay,
                                                           [&] { wgmma_state_update<M, false>(ct, lane, decay, S, D, a); });
    store_o(s, out, buf, O, sigma, tid, warp, lane, checksum);
    wgmma_wait<0>();
  }
  finish_run(out, S, sigma, checksum);
#else
  (void)images, (void)out;
#endif
}

// ---- the pair step (sixtieth session): two chunks a step on one serial path
//
// A timing probe for a chain whose step takes 2C = 128 tokens (the chunk pair's factors formed
// by the preparation: W', U' of the pair's WY form, P' with its block below the diagonal), so
// that the step's serial path (S's range check, S's fragments, D's wait and range check, the
// update's operands and its last product) is paid once per 128 tokens. Per step: D'^T = U'^T +
// S (-W')^T as two m64n64 accumulators, O'^T = S Qc'^T the same, one wait, D's range check,
// O'^T diag(q_f) + D'^T P'^T (P' lower block triangular: three 64 x 64 blocks, the one below the
// diagonal taken from the second chunk's lo slot), then S = gamma S + D~'^T Kc' over 8 k-steps.
// Both stages resident (copied once: the 128-token stage would be twice today's, and this
// measures the step's own path against today's step with resident stages). Wrong results
// (the pair's factors are two unrelated chunks' tiles); its time a 64-token chunk is the figure.
#if GDN_CHUNKED_WGMMA
template <int kTiles>
__device__ __forceinline__ void pair_values_in_range(float (&S)[kTiles][4], float (&D0)[8][4], float (&D1)[8][4],
                                                     float (&O0)[8][4], float (&O1)[8][4], int& sigma) {
  const float m = fmaxf(abs_max(D0), abs_max(D1));
  if (__any_sync(0xffffffffu, m >= kValuesHigh)) {
    const int d = min(exponent_of(warp_max(m)) - 13, kSigmaMax - sigma);
    if (d <= 0) return;
    const float f = pow2(-d);
    scale_tiles(S, f);
    scale_tiles(D0, f);
    scale_tiles(D1, f);
    scale_tiles(O0, f);
    scale_tiles(O1, f);
    sigma += d;
  }
}

// One chunk's half of the pair's state update: S += D~^T Kc over its 4 k-steps (hi and lo
// products), committed two k-steps a group; u holds the fragments until they complete.
__device__ __forceinline__ void pair_update_half(float (&S)[16][4], const float (&D)[8][4], const float2 (&kf)[8],
                                                 const uint16_t* k_tile, uint32_t (&u)[4][2][4]) {
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) {
    float dd[2][4];
    state_factor_tiles(D, kf, ks, dd);
    acc_to_a_split<M>(dd, 0, u[ks][0], u[ks][1]);
    wgmma_fence();
    const uint64_t kd = swizzle128_desc_mn<kC>(k_tile, chain_token_block(ks));
    wgmma_128_mn<M>(S, u[ks][0], kd);
    wgmma_128_mn<M>(S, u[ks][1], kd);
    if (ks & 1) wgmma_commit();
  }
}
#endif

__global__ void __launch_bounds__(kLabThreads, 1) chain_pair_kernel(const LabStage* images, Outputs out) {
#if GDN_CHUNKED_WGMMA
  LabSmem& s = lab_smem();
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31, q = lane & 3;
  if (run_copier<false, kLabThreads, false, true>(s, images, kChunks / 2)) return;
  float S[16][4] = {};
  int sigma = 0;
  float checksum = 0.f;
  for (int c = 0; c < kChunks; c += 2) {
    named_barrier(2, kLabThreads);
    if (c == 0) {
      mbarrier_wait(&s.full[0], 0u);
      mbarrier_wait(&s.full[1], 0u);
    }
    const LabStage& st0 = s.stage[0];
    const LabStage& st1 = s.stage[1];
    const ChainTiles c0 = chain_tiles(st0), c1 = chain_tiles(st1);
    wgmma_wait<0>();
    keep_state_in_range(S, sigma);
    float D0[8][4], D1[8][4], O0[8][4], O1[8][4];  // D'^T, O'^T: [64 value rows, 64 tokens] each half
    d_from_u(st0, warp, lane, sigma, D0);
    d_from_u(st1, warp, lane, sigma, D1);
    const float decay1 = chunk_decay(c1), decay = chunk_decay(c0) * decay1;
    {
      uint32_t a[2][2][4];  // S in f16 (D's products), S in bf16 (O's)
#pragma unroll
      for (int ks = 0; ks < kK / 16; ++ks) {
        if (ks >= 2) wgmma_wait<1>();
        acc_to_a<MmaF16>(S, ks, a[ks & 1][0]);
        acc_to_a<M>(S, ks, a[ks & 1][1]);
        wgmma_fence();
        wgmma_64<MmaF16>(D0, a[ks & 1][0], k_major_desc<kK>(c0.w_neg, 16 * ks));
        wgmma_64<MmaF16>(D1, a[ks & 1][0], k_major_desc<kK>(c1.w_neg, 16 * ks));
        if (ks == 0) {
          wgmma_64<M, false>(O0, a[0][1], swizzle128_desc_k<kC>(c0.q, 0));
          wgmma_64<M, false>(O1, a[0][1], swizzle128_desc_k<kC>(c1.q, 0));
        } else {
          wgmma_64<M>(O0, a[ks & 1][1], swizzle128_desc_k<kC>(c0.q, 16 * ks));
          wgmma_64<M>(O1, a[ks & 1][1], swizzle128_desc_k<kC>(c1.q, 16 * ks));
        }
        wgmma_commit();
      }
    }
    scale_tiles(S, decay);  // (the early decay: S is no product's operand now)
    float2 qf0[8], qf1[8];
    load_output_factors(c0, q, qf0);
    load_output_factors(c1, q, qf1);
    wgmma_wait<0>();
    pair_values_in_range(S, D0, D1, O0, O1, sigma);
    scale_token_columns(O0, qf0);
    scale_token_columns(O1, qf1);
    {
      uint32_t b[4][4];  // D's f16 fragments, a k-step (16 tokens) each
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {  // O0 += D0^T P00^T, O1 += D0^T P10^T
        acc_to_a<MmaF16>(D0, ks, b[ks]);
        wgmma_fence();
        wgmma_64<MmaF16>(O0, b[ks], k_major_desc<kC>(c0.p_hi, chain_token_block(ks)));
        wgmma_64<MmaF16>(O1, b[ks], k_major_desc<kC>(c1.p_lo, chain_token_block(ks)));
        wgmma_commit();
      }
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {  // O1 += D1^T P11^T
        wgmma_wait<3>();  // (the group that read b[ks])
        acc_to_a<MmaF16>(D1, ks, b[ks]);
        wgmma_fence();
        wgmma_64<MmaF16>(O1, b[ks], k_major_desc<kC>(c1.p_hi, chain_token_block(ks)));
        wgmma_commit();
      }
    }
    {  // S = gamma S + D~'^T Kc': the first chunk's tokens by k_f times the second's decay
      float2 kf0[8], kf1[8];
      load_state_factors(c0, q, kf0);
      load_state_factors(c1, q, kf1);
#pragma unroll
      for (int t = 0; t < 8; ++t) kf0[t].x *= decay1, kf0[t].y *= decay1;
      uint32_t u0[4][2][4], u1[4][2][4];
      pair_update_half(S, D0, kf0, c0.k, u0);
      pair_update_half(S, D1, kf1, c1.k, u1);
      wgmma_wait<4>();  // O' complete; the update's four groups in flight
      store_o(s, out, 0, O0, sigma, tid, warp, lane, checksum);
      store_o(s, out, 1, O1, sigma, tid, warp, lane, checksum);
      wgmma_wait<0>();
    }
  }
  finish_run(out, S, sigma, checksum);
#else
  (void)images, (void)out;
#endif
}

// ---- o beside: a second warpgroup takes the outputs' products off the state's warpgroup
//
// Warpgroup 0 runs the serial chain alone: D^T = U^T + S (-W)^T, the state update; it hands S's
// fragments in M's type (formed beside its f16 ones, as today) and D's f16 fragments to
// warpgroup 1 through shared memory, each on a named barrier (bar.arrive / bar.sync), which forms
// O^T = S Qc^T diag(q_f) + D^T P^T and stores o. The same products and roundings as today's
// step (the same bits where no range step occurs: the lab's tiles keep the values in range, and
// this kernel takes none for D). The step's barrier (2) keeps both in one chunk.
#if GDN_CHUNKED_WGMMA
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
#endif

// kDrop (timing probes, wrong results): 1 no range check of S; 2 the state update's hi products
// alone; 4 D not handed over (the outputs read stale fragments); 8 S not handed over.
#if GDN_CHUNKED_WGMMA
template <int kDrop>
__device__ __forceinline__ void lab_state_update(const ChainTiles& ct, int lane, float (&S)[16][4],
                                                 const float (&D)[8][4], uint32_t (&a)[4][2][4]) {
  if constexpr ((kDrop & 2) == 0) {
    wgmma_state_update<M, false>(ct, lane, 1.f, S, D, a);
  } else {
    float2 kf[8];
    load_state_factors(ct, lane & 3, kf);
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      float dd[2][4];
      state_factor_tiles(D, kf, ks, dd);
      acc_to_a<M>(dd, 0, a[ks][0]);
      wgmma_fence();
      wgmma_128_mn<M>(S, a[ks][0], swizzle128_desc_mn<kC>(ct.k, chain_token_block(ks)));
      wgmma_commit();
    }
  }
}
#endif

// The fragments of kSteps k-steps handed over (one uint4 a thread and k-step) into registers.
template <int kSteps>
__device__ __forceinline__ void take_frags(const uint4 (&from)[kSteps][kWorkers], int tid, uint32_t (&a)[kSteps][4]) {
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    const uint4 v = from[ks][tid];
    a[ks][0] = v.x, a[ks][1] = v.y, a[ks][2] = v.z, a[ks][3] = v.w;
  }
}

template <int kDrop = 0>
__global__ void __launch_bounds__(kBesideThreads, 1) chain_o_beside_kernel(const LabStage* images, Outputs out) {
#if GDN_CHUNKED_WGMMA
  LabSmem& s = lab_smem();
  const int wg = int(threadIdx.x) / kWorkers, tid = int(threadIdx.x) % kWorkers, warp = tid >> 5, lane = tid & 31;
  if (run_copier<false, kBesideThreads>(s, images)) return;
  if (wg == 0) {  // the state
    float S[16][4] = {};
    int sigma = 0;
    for (int c = 0; c < kChunks; ++c) {
      const LabStage& st = enter_step<kBesideThreads>(s, c);
      const ChainTiles ct = chain_tiles(st);
      wgmma_wait<0>();
      if constexpr ((kDrop & 1) == 0) keep_state_in_range(S, sigma);
      float D[8][4];
      d_from_u(st, warp, lane, sigma, D);
      const float decay = chunk_decay(ct);
      uint32_t af[2][4];
#pragma unroll
      for (int ks = 0; ks < kK / 16; ++ks) {
        if (ks >= 2) wgmma_wait<1>();
        acc_to_a<MmaF16>(S, ks, af[ks & 1]);
        if constexpr ((kDrop & 8) == 0) {
          uint32_t ab[4];
          acc_to_a<M>(S, ks, ab);
          s.s_frags[ks][tid] = make_uint4(ab[0], ab[1], ab[2], ab[3]);
        }
        wgmma_fence();
        wgmma_64<MmaF16>(D, af[ks & 1], k_major_desc<kK>(ct.w_neg, 16 * ks));
        wgmma_commit();
      }
      if (lane == 0) s.sigma[warp] = sigma;
      named_barrier_arrive(3, 2 * kWorkers);  // S's fragments and sigma are there
      scale_tiles(S, decay);
      wgmma_wait<0>();
      if constexpr ((kDrop & 4) == 0) {
#pragma unroll
        for (int ks = 0; ks < kC / 16; ++ks) {
          uint32_t df[4];
          acc_to_a<MmaF16>(D, ks, df);
          s.d_frags[ks][tid] = make_uint4(df[0], df[1], df[2], df[3]);
        }
      }
      named_barrier_arrive(4, 2 * kWorkers);  // D's fragments are there
      uint32_t a[4][2][4];
      lab_state_update<kDrop>(ct, lane, S, D, a);
      wgmma_wait<0>();
    }
    store_final(out, S, sigma, warp, lane);
  } else {  // the outputs
    float checksum = 0.f;
    const int q = lane & 3;
    for (int c = 0; c < kChunks; ++c) {
      const int buf = c & 1;
      const LabStage& st = enter_step<kBesideThreads>(s, c);
      const ChainTiles ct = chain_tiles(st);
      float2 qf[8];
      load_output_factors(ct, q, qf);
      named_barrier(3, 2 * kWorkers);
      uint32_t sb[kK / 16][4];
      take_frags(s.s_frags, tid, sb);
      const int sigma = s.sigma[warp];
      float O[8][4];
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kK / 16; ++ks) {
        const uint64_t qd = swizzle128_desc_k<kC>(ct.q, 16 * ks);
        if (ks == 0)
          wgmma_64<M, false>(O, sb[0], qd);
        else
          wgmma_64<M>(O, sb[ks], qd);
      }
      wgmma_commit();
      named_barrier(4, 2 * kWorkers);
      uint32_t df[kC / 16][4];
      take_frags(s.d_frags, tid, df);
      wgmma_wait<0>();
      scale_token_columns(O, qf);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks)
        wgmma_64<MmaF16>(O, df[ks], k_major_desc<kC>(ct.p_hi, chain_token_block(ks)));
      wgmma_commit();
      wgmma_wait<0>();
      store_o(s, out, buf, O, sigma, tid, warp, lane, checksum, 5);
    }
    if (tid == 0) bulk_wait_all<false>();
    out.checksum[blockIdx.x * kWorkers + tid] = checksum;
  }
#else
  (void)images, (void)out;
#endif
}

// ---- the look-ahead step
#if GDN_CHUNKED_WGMMA

// D^T = (gamma S)(-W)^T (sd: f16 fragments, 8 k-steps; the first without accumulating) + D_prev^T
// Z (df: f16 fragments, 4 k-steps; Z in P's lo slot, laid out as P), one commit group. D is
// written by these products alone (U joins once they are done, into E): an accumulator that other
// instructions define while its products are in flight across the loop's back edge makes ptxas
// serialise the pipeline (C7515).
__device__ __forceinline__ void issue_d_products(const LabStage& st, float (&D)[8][4], const uint32_t (&sd)[8][4],
                                                 const uint32_t (&df)[4][4]) {
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    if (ks == 0)
      wgmma_64<MmaF16, false>(D, sd[ks], k_major_desc<kK>(st.tiles.w_neg, 16 * ks));
    else
      wgmma_64<MmaF16>(D, sd[ks], k_major_desc<kK>(st.tiles.w_neg, 16 * ks));
  }
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) wgmma_64<MmaF16>(D, df[ks], k_major_desc<kC>(st.tiles.p_lo, chain_token_block(ks)));
  wgmma_commit();
}

#endif

__global__ void __launch_bounds__(kLabThreads, 1) chain_ahead_kernel(const LabStage* images, Outputs out) {
#if GDN_CHUNKED_WGMMA
  LabSmem& s = lab_smem();
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int q = lane & 3;
  if (run_copier<true>(s, images)) return;
  float S[16][4];  // S_c at 2^-sigma, from the start state
  {
    const int g = lane >> 2;
    const float* from = out.S0 + size_t(blockIdx.x) * 64 * kK;
#pragma unroll
    for (int t = 0; t < 16; ++t) {
      S[t][0] = from[(16 * warp + g) * kK + 8 * t + 2 * q], S[t][1] = from[(16 * warp + g) * kK + 8 * t + 2 * q + 1];
      S[t][2] = from[(16 * warp + g + 8) * kK + 8 * t + 2 * q], S[t][3] = from[(16 * warp + g + 8) * kK + 8 * t + 2 * q + 1];
    }
  }
  int sigma = 0;
  float checksum = 0.f;
  float D[8][4];      // D_c^T's products (U not in), at 2^-sigma: written by wgmma alone
  uint32_t sd[8][4];  // f16 fragments of gamma_{c-1} S_{c-1}, k-step ks
  uint32_t df[4][4];  // f16 fragments of D_{c-1}^T
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) acc_to_a<MmaF16>(S, ks, sd[ks]);  // the start state (gamma 1)
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) acc_to_a<MmaF16>(S, ks, df[ks]);  // (zeros: the start state's first columns, as D_{-1})
  // chunk 0's D products before the loop (the step-0 barrier is the loop's first)
  named_barrier(2, kLabThreads);
  mbarrier_wait(&s.full[0], 0u);
  issue_d_products(s.stage[0], D, sd, df);
  for (int c = 0; c < kChunks; ++c) {
    const int buf = c & 1;
    const LabStage& st = s.stage[buf];
    const ChainTiles ct = chain_tiles(st);
    wgmma_wait<0>();  // D_c's products
    if (c > 0) named_barrier(2, kLabThreads);  // step c - 1's stage is free: the copier fills it with c + 1
    float (&E)[8][4] = D;  // D_c^T = U_c^T + the products, at 2^-sigma
    {
      const float u_scale = pow2(-sigma);
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const float4 u = st.u[warp][t][lane];
        E[t][0] += u.x * u_scale, E[t][1] += u.y * u_scale;
        E[t][2] += u.z * u_scale, E[t][3] += u.w * u_scale;
      }
    }
    // ranges: S (keep_state_in_range) and E (below f16's limit), scaled together
    {
      const int before = sigma;
      keep_state_in_range(S, sigma);
      if (sigma != before) scale_tiles(E, pow2(before - sigma));
      const float m = abs_max(E);
      if (__any_sync(0xffffffffu, m >= kValuesHigh)) {
        const int d = min(exponent_of(warp_max(m)) - 13, kSigmaMax - sigma);
        if (d > 0) {
          scale_tiles(S, pow2(-d));
          scale_tiles(E, pow2(-d));
          sigma += d;
        }
      }
    }
    // O^T = S_c Qc^T (S in bf16), one group
    float O[8][4];
    {
      uint32_t sb[8][4];
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) acc_to_a<M>(S, ks, sb[ks]);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 8; ++ks) {
        const uint64_t qd = swizzle128_desc_k<kC>(ct.q, 16 * ks);
        if (ks == 0)
          wgmma_64<M, false>(O, sb[ks], qd);
        else
          wgmma_64<M>(O, sb[ks], qd);
      }
      wgmma_commit();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) acc_to_a<MmaF16>(E, ks, df[ks]);  // D_c in f16: P now, Z next step
      float2 qf[8];
      load_output_factors(ct, q, qf);
      wgmma_wait<0>();  // S Qc^T is done (sb free)
      scale_token_columns(O, qf);
    }
    // O^T += D^T P^T (f16), one group
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) wgmma_64<MmaF16>(O, df[ks], k_major_desc<kC>(ct.p_hi, chain_token_block(ks)));
    wgmma_commit();
    // S <- gamma_c S_c, its f16 fragments for D_{c+1}, then the state update: D~ = D diag(k_f) as
    // bf16 pairs, two k-steps' fragments in flight (4 groups)
    const float decay = chunk_decay(ct);
    scale_tiles(S, decay);
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) acc_to_a<MmaF16>(S, ks, sd[ks]);
    {
      float2 kf[8];
      load_state_factors(ct, q, kf);
      uint32_t a[2][2][4];
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        if (ks >= 2) wgmma_wait<1>();  // (the group of k-step ks - 2: its fragments free)
        float dd[2][4];
        state_factor_tiles(E, kf, ks, dd);
        acc_to_a_split<M>(dd, 0, a[ks & 1][0], a[ks & 1][1]);
        wgmma_fence();
        const uint64_t kd = swizzle128_desc_mn<kC>(ct.k, chain_token_block(ks));
        wgmma_128_mn<M>(S, a[ks & 1][0], kd);
        wgmma_128_mn<M>(S, a[ks & 1][1], kd);
        wgmma_commit();
      }
    }
    // D_{c+1}: its stage and products behind the update's (the last step forms one it does not
    // use, from its own stage: one straight pipeline)
    const int next = c + 1 < kChunks ? buf ^ 1 : buf;
    if (c + 1 < kChunks) mbarrier_wait(&s.full[next], uint32_t((c + 1) >> 1) & 1u);
    issue_d_products(s.stage[next], D, sd, df);
    wgmma_wait<1>();  // D^T P^T and the state update are done; D's products run on
    store_o(s, out, buf, O, sigma, tid, warp, lane, checksum);
  }
  wgmma_wait<0>();
  finish_run(out, S, sigma, checksum);
#else
  (void)images, (void)out;
#endif
}

// ---- setup: Z of image d from image d - 1's keys and state factors and image d's -W, in P's
// layout (KMajorAt<kC>): Zt(j', r) = k_f(r) sum_key Kc(r, key) (-W)(j', key), j' the row of -W's
// tile (D's column), r the key tile's row (the previous chunk's token; D's column r ^ kTokenRowXor).
__global__ void form_z_kernel(LabStage* images) {
  const int d = int(blockIdx.x), prev = (d + kData - 1) % kData;
  const LabStage& kp = images[prev];
  LabStage& im = images[d];
  for (int i = int(threadIdx.x); i < kC * kC; i += int(blockDim.x)) {
    const int j = i / kC, r = i % kC;
    float sum = 0.f;
    for (int key = 0; key < kK; ++key) {
      const float kv = __bfloat162float(__ushort_as_bfloat16(kp.k[Swizzle128At<kC>::at(r, key)]));
      const float wv = __half2float(__ushort_as_half(im.tiles.w_neg[KMajorAt<kK>::plain(j, key)]));
      sum += kv * wv;
    }
    im.tiles.p_lo[KMajorAt<kC>::plain(j, r)] = __half_as_ushort(__float2half_rn(kp.tiles.k_f[r] * sum));
  }
}

// ---- host

using chain_lab::rel_l2;
using chain_lab::to_bf16;
uint16_t to_f16(float x) { return __half_as_ushort(__float2half_rn(x)); }

struct Result {
  double us_per_step = 0;
  int regs = 0, spill = 0;
  std::vector<float> S, checksum;
};

template <class Kernel>
Result run(Kernel kernel, const LabStage* images, int threads = kLabThreads, int ctas = kHeads) {
  Result r;
  cudaFuncAttributes fa{};
  CK(cudaFuncGetAttributes(&fa, kernel));
  r.regs = fa.numRegs;
  r.spill = int(fa.localSizeBytes);
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kLabSmemBytes)));
  Outputs out{};
  CK(cudaMalloc(&out.S, size_t(kHeads) * 64 * kK * 4));
  CK(cudaMalloc(&out.checksum, size_t(kHeads) * kWorkers * 4));
  CK(cudaMalloc(&out.o, size_t(kHeads) * 2 * kC * 64 * 2));
  float* s0 = nullptr;
  CK(cudaMalloc(&s0, size_t(kHeads) * 64 * kK * 4));
  CK(cudaMemset(s0, 0, size_t(kHeads) * 64 * kK * 4));
  out.S0 = s0;
  r.us_per_step = 1e3 * chain_lab::median_launch_ms([&] { kernel<<<ctas, threads, kLabSmemBytes>>>(images, out); }, kRuns) / kChunks;
  r.S.resize(size_t(kHeads) * 64 * kK);
  r.checksum.resize(size_t(kHeads) * kWorkers);
  CK(cudaMemcpy(r.S.data(), out.S, r.S.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.checksum.data(), out.checksum, r.checksum.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaFree(out.S));
  CK(cudaFree(out.checksum));
  CK(cudaFree(out.o));
  CK(cudaFree(s0));
  return r;
}

}  // namespace

int main() {
  std::mt19937 rng(20261203);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<LabStage> images(kData);
  for (LabStage& im : images) {
    std::memset(&im, 0, sizeof(im));
    for (int i = 0; i < kC * kK; ++i) {
      im.q[i] = to_bf16(normal(rng));
      im.k[i] = to_bf16(normal(rng) / std::sqrt(float(kK)));  // rows of about unit norm
      im.tiles.w_neg[i] = to_f16(0.005f * normal(rng));  // the state map contracts: no range steps
    }
    for (int i = 0; i < kC * kC; ++i) im.tiles.p_hi[i] = to_f16(0.1f * normal(rng));
    for (int t = 0; t < kC; ++t) im.tiles.G[t] = -0.01f * float(t + 1);
    for (int t = 0; t < kC; ++t) {
      im.tiles.q_f[t] = std::exp(im.tiles.G[t]) / std::sqrt(float(kK));
      im.tiles.k_f[t] = std::exp(im.tiles.G[kC - 1] - im.tiles.G[t]);
    }
    float* u = &im.u[0][0][0].x;
    for (size_t i = 0; i < sizeof(im.u) / 4; ++i) u[i] = normal(rng);
  }
  LabStage* d_images = nullptr;
  CK(cudaMalloc(&d_images, sizeof(LabStage) * kData));
  CK(cudaMemcpy(d_images, images.data(), sizeof(LabStage) * kData, cudaMemcpyHostToDevice));
  form_z_kernel<<<kData, 256>>>(d_images);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  std::printf("gdn_chain_ahead_lab: %d CTAs x %d chunk steps (C = %d, K = %d, 64 state rows a CTA: the split "
              "form's wgmma chain)\n", kHeads, kChunks, kC, kK);
  const Result today = run(chain_today_kernel<2>, d_images);
  const Result deep4 = run(chain_today_kernel<4>, d_images);
  const Result deep8 = run(chain_today_kernel<8>, d_images);
  const Result ahead = run(chain_ahead_kernel, d_images);
  const Result beside = run(chain_o_beside_kernel<0>, d_images, kBesideThreads);
  std::printf("today (the library's step):  %7.3f us a step, %d registers, %d bytes spilled\n", today.us_per_step,
              today.regs, today.spill);
  bool same = true;
  for (const Result* r : {&deep4, &deep8}) {
    const int depth = r == &deep4 ? 4 : 8;
    const bool bits = r->S == today.S && r->checksum == today.checksum;
    same = same && bits;
    std::printf("today, %d fragment sets:     %7.3f us a step, %d registers, %d bytes spilled (%.3f of today's; "
                "results %s)\n", depth, r->us_per_step, r->regs, r->spill, r->us_per_step / today.us_per_step,
                bits ? "the same bits" : "DIFFER");
  }
  std::printf("look-ahead step:             %7.3f us a step, %d registers, %d bytes spilled\n", ahead.us_per_step,
              ahead.regs, ahead.spill);
  const double ds = rel_l2(ahead.S, today.S), dc = rel_l2(ahead.checksum, today.checksum);
  double norm = 0;
  for (float x : today.S) norm += double(x) * x;
  std::printf("look-ahead / today: %.3f; final states rel L2 %.2e (||S|| = %.3e), output sums %.2e\n",
              ahead.us_per_step / today.us_per_step, ds, std::sqrt(norm), dc);
  {
    const bool bits = beside.S == today.S && beside.checksum == today.checksum;
    std::printf("o beside (a second warpgroup): %7.3f us a step, %d registers, %d bytes spilled (%.3f of today's; "
                "results %s: states rel L2 %.2e, output sums %.2e)\n", beside.us_per_step, beside.regs, beside.spill,
                beside.us_per_step / today.us_per_step, bits ? "the same bits" : "DIFFER", rel_l2(beside.S, today.S),
                rel_l2(beside.checksum, today.checksum));
  }
  {  // the state warpgroup's step with parts of it dropped (wrong results)
    const char* what[] = {"", "no range check of S", "the update's hi products alone", "", "D not handed over",
                          "", "", "", "S not handed over"};
    const Result r1 = run(chain_o_beside_kernel<1>, d_images, kBesideThreads);
    const Result r2 = run(chain_o_beside_kernel<2>, d_images, kBesideThreads);
    const Result r4 = run(chain_o_beside_kernel<4>, d_images, kBesideThreads);
    const Result r8 = run(chain_o_beside_kernel<8>, d_images, kBesideThreads);
    const Result r15 = run(chain_o_beside_kernel<15>, d_images, kBesideThreads);
    const std::pair<int, const Result*> rows[] = {{1, &r1}, {2, &r2}, {4, &r4}, {8, &r8}};
    for (const auto& [k, r] : rows)
      std::printf("o beside, %-32s %7.3f us a step (%.3f of o beside)\n", what[k], r->us_per_step,
                  r->us_per_step / beside.us_per_step);
    std::printf("o beside, all four dropped:            %7.3f us a step (%.3f of o beside)\n", r15.us_per_step,
                r15.us_per_step / beside.us_per_step);
  }
  // What bounds today's step: the same kernel on fewer SMs (the L2's bandwidth and the copies
  // shared by fewer CTAs), and with 32 KB fewer bytes a step (Qc, Kc not copied after the first
  // two chunks: wrong results)
  for (int ctas : {66, 33}) {
    const Result r = run(chain_today_kernel<2>, d_images, kLabThreads, ctas);
    std::printf("today on %3d SMs:             %7.3f us a step (%.3f of today's on %d)\n", ctas, r.us_per_step,
                r.us_per_step / today.us_per_step, kHeads);
  }
  {
    const Result r = run(chain_today_kernel<2, true>, d_images);
    std::printf("today, Qc and Kc not copied:  %7.3f us a step (%.3f of today's)\n", r.us_per_step,
                r.us_per_step / today.us_per_step);
  }
  {  // the pair step against today's, both with resident stages (sixtieth session)
    const Result r = run(chain_today_kernel<2, false, true>, d_images);
    const Result p = run(chain_pair_kernel, d_images);
    std::printf("today, stages resident:       %7.3f us a step (%.3f of today's)\n", r.us_per_step,
                r.us_per_step / today.us_per_step);
    std::printf("pair step, stages resident:   %7.3f us a 64-token chunk, %d registers, %d bytes spilled "
                "(%.3f of today's resident; wrong results by design)\n", p.us_per_step, p.regs, p.spill,
                p.us_per_step / r.us_per_step);
  }
  const bool ok = same && std::isfinite(ds) && std::isfinite(dc) && ds < 2e-2 && dc < 2e-2;
  std::printf("%s\n", ok ? "PASS: the two steps agree" : "FAIL: the steps disagree");
  return ok ? 0 : 1;
}

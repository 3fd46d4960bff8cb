// The fused chunked prefill kernel, warp-specialised (sm_90a; the fused form's kernel where the
// copies go by TMA, GDN_CHUNKED_WS=0 the one-role kernel of chunked_fused.cuh): one CTA of 16
// warps per (sequence, value head), in three roles that work on up to three chunks at once.
//   - the chain, warps 0..7 (two warpgroups, the V x K f32 state in their registers as in
//     chunked_fused.cuh): chunk c's -W and U, the outputs, the state update, o;
//   - the inverse, warps 8..11 (one warpgroup): the next chunks' Kc Kc^T and its epilogue (m),
//     X = (I + m)^-1 (the 16 x 16 diagonal blocks by invert_diagonal_blocks_doubling, then the
//     merges, both as f16 products on mma.sync), then T and Xw from X (gate_inverse);
//   - the outputs, warps 12..15 (one warpgroup): the next chunks' gates and, with qk_l2norm, key
//     norms (from the diagonal of a Kc Kc^T of its own; the inverse role waits for both), then
//     the query norms and Qc Kc^T with its epilogue (P into a slot, in f16).
//   Chunk c's preparation waits only for its Kc (issued early in the chain's chunk c - 2), and
//   only its P for its q (issued at that chunk's end), so both may run up to two chunks ahead.
// Registers are rebalanced once the roles split (setmaxnreg): 176 a thread for the chain (the
// state, D, O and A fragments; at 168 ptxas serialises its wgmma), 96 for the inverse role and
// 64 for the outputs role (a quarter's 512: 2 x 176 + 96 + 64; small spills, most of them in the
// outputs role, which has time to spare).
// Precision: the products of two computed operands are f16 (S (-W)^T, D^T P^T and the inverse's
// merges: 11 significant bits, one product each), those with an input tile keep M's type (S
// Qc^T with S rounded once; U with T and the state update with D as hi + lo pairs). The f16
// operands keep their range by power-of-two exponents (chunked_range.cuh). f64 emulation of
// the chunked form with these roundings (the same inputs): o as with bf16 hi + lo pairs there
// (1.69e-3 against 1.67e-3 with decay, 2.6e-3 against 2.8e-3 without; o's own bf16 rounding is
// 1.66e-3), the state without decay 1.2e-3 against 1.6e-3.
//
// Shared memory (WsSmem, about 219 KB): q, Kc, Vc double-buffered in unpadded swizzled tiles; P
// in two slots (chunk c's read by the chain while chunk c + 1's are written), the row norms in
// four and the gates in eight (kGateGroup), all read by the chain in place; m and X in one
// buffer (the inverse role's: chunk c's m, then its X over it in place), T and Xw in two (chunk
// c's in buffer c & 1, formed while the chain may still read chunk c - 1's). Kc and Vc trade
// buffers every two chunks, so chunk c + 2's Kc lands in chunk c's Vc buffer as soon as U's products
// have read it, and chunk c + 2's Vc lands in chunk c's Kc buffer once the state update has read
// it; o has a staging tile of its own, written while the state update runs.
//
// Hand-offs, named barriers between the roles (bar.arrive by one, bar.sync by the other; each
// id's uses alternate strictly, which the comments at each use argue):
//   kBarGatesReady+b outputs -> inverse    chunk c's gates and key norms (b = c & 1)
//   kBarXReady+b     inverse -> chain      chunk c's T and Xw
//   kBarPrepared+b   outputs -> chain      chunk c's P slot, gates and norms
// The copies: chunk c's q (at chunk c - 2's end), Kc (after chunk c - 2's -W and U) and Vc
// (early in chunk c - 1, into chunk c - 2's Kc buffer) by TMA, each on its own mbarrier, issued
// by one thread of the chain, every chunk. A packed sequence's partial last chunk's boxes bring
// the next sequence's rows (zeros past the batch's last token): its rows past the sequence are
// zeroed on chip once landed (q and Kc by the outputs role before the inverse role reads Kc, Vc
// by the chain), so its tiles are what a dense batch's zero-filled boxes give. The kernel's code
// is kept small: its three roles run different code at once, and the step slows with the code in
// their loops, executed or not (docs/NOTES.md, fortieth session: the cp.async paths these replace,
// never executed in a dense batch, cost the fused cases 3%).
//
// Measured (H200, the same run; docs/NOTES.md, nineteenth session): 4 x 8192 0.827 -> 0.805 ms,
// 16 x 4096 1.651 -> 1.594, varlen16 0.918 -> 0.886 against the one-role kernel; the gates four
// chunks at a time (twentieth session) 0.810 -> 0.785 on 4 x 8192; the in-place inverse, the
// balanced epilogues, P after the merges and the gates read in place (twenty-first) 0.786 ->
// 0.776; the f16 products and merges (twenty-second) 0.774 -> 0.667, o's own staging tile 0.666
// -> 0.658; with qk_l2norm, the key norms from a gram's diagonal (forty-fourth and forty-fifth)
// 0.598 -> 0.571 (the outputs role had formed them from the tile by shared-memory reads, about
// 1,150 cycles a chunk that the inverse role waited for; the inverse role's own gram, on a barrier
// of its own in instances of their own, measured the same as the outputs role's, which is kept:
// no extra barrier or instances). Nsight Compute (twenty-second session): the chain waits about 0.38
// us a step for the preparation, and the preparation at times for its own slowest warp; the step
// (5.15 us) is about both roles' work, each slower beside the other than alone.
#pragma once

#include "cuda/chunked_steps.cuh"
#include "cuda/chunked_wgmma.cuh"
#include "cuda/tma.cuh"

namespace gdn::cuda::chunked {

struct WsHalfPair {  // a [C, C] matrix as hi + lo parts in CoreTiles::T's layout (unpadded)
  uint16_t hi[kC][kC];
  uint16_t lo[kC][kC];
};
// The preparation's four warps form the gates of four chunks at once (one a warp), every fourth
// chunk: formed one chunk at a time by one warp, the other three waited for it (about 0.9 us a
// chunk, Nsight Compute). Chunks c .. c + 3 take four of kGateSlots slots while the chain may
// still copy chunk c - 1's from the other four.
inline constexpr int kGateGroup = 4;
inline constexpr int kGateSlots = 2 * kGateGroup;
// The row norms of chunk c are formed while the chain may still read chunk c - 2's (the
// preparation of chunk c starts once its Kc has landed, early in the chain's chunk c - 2), so
// four slots: the chain reads its chunk's gates and norms in their slots, with no copy.
inline constexpr int kNormSlots = 4;
struct WsSmem {
  uint16_t q[2][kC][kK];       // [C, K] query rows of the chunk (Swizzle128At)
  uint16_t k[2][kC][kK];       // [C, K] key rows
  uint16_t v[2][kC][kV];       // [C, V] value rows (Kc and Vc trade these two every two chunks)
  uint16_t o_stage[kC][kV];    // [C, V] o of the chunk (Swizzle128At), for the TMA store
  uint16_t p_slot[2][kC][kC];  // [C, C] P = Mask o (Qn Kn^T) of chunk c in slot c & 1 (f16)
  WsHalfPair t[2];             // [C, C] T of chunk c in buffer c & 1 (blocks above the diagonal
                               // zeroed once)
  uint16_t xw[2][kC][kLdCC];   // [C, C] X diag(beta rk) of chunk c in buffer c & 1
  float mx[kC][kLdF];          // [C, C] the inverse role's strictly lower m = diag(beta) Kn Kn^T,
                               // then in place its X = (I + m)^-1, read by its gate_inverse
  uint16_t w_neg[kC][kK];      // [C, K] -W (the chain's; KMajorAt)
  float q_f[kC], k_f[kC];      // the chain's per-token factors
  // chunk c's cumulative log-decay G and beta in slot c % kGateSlots, its row norms 1 / ||q_t||,
  // 1 / ||k_t|| (1 without qk_l2norm) in slot c % kNormSlots: the chain reads them there
  float G_s[kGateSlots][kC], beta_s[kGateSlots][kC];
  float rq_s[kNormSlots][kC], rk_s[kNormSlots][kC];
  float p_max[2][4];  // the preparing warps' largest |P| of chunk c (slot c & 1), when checked
  int p_exp[2];       // pi: P slot c & 1 holds 2^-pi P (chunked_range.cuh; 0 unless P left f16's range)
  uint64_t q_full[2], k_full[2], v_full[2];  // TMA: chunk c's q / Kc / Vc have landed (c & 1)
};
// wgmma_minus_w_new_values' view of the chunk's tiles, Kc and Vc in their buffers of the chunk
// (they trade places every two chunks: see the kernel), as its buffer 0.
struct WsMinusWTiles {
  const uint16_t (*k)[kC][kK];
  const uint16_t (*v)[kC][kV];
  const uint16_t (*xw)[kLdCC];
  const WsHalfPair& t;
  const float* G;
  uint16_t (*w_neg)[kK];
};

// The inverse's view of chunk c's buffer (m and X the same: invert_diagonal_blocks<true>) and
// gate_inverse's (X of chunk c, the gates and norms in their slots, T and Xw).
struct WsInverseTiles {
  float (*m)[kLdF];
  float (*x)[kLdF];
};
struct WsGateInverseTiles {
  const float (*x)[kLdF];
  const float* G;
  const float* beta;
  const float* rk;
  struct {
    uint16_t (*hi)[kC];
    uint16_t (*lo)[kC];
  } t;
  uint16_t (*xw)[kLdCC];
};

inline constexpr size_t kWsSmemBytes = sizeof(WsSmem) + 1024;  // from the first 1024-byte boundary
static_assert(kWsSmemBytes <= 227 * 1024, "one Hopper block's shared memory");
static_assert(offsetof(WsSmem, mx) % 16 == 0 && sizeof(float[kC][kLdF]) % 16 == 0 && offsetof(WsSmem, t) % 16 == 0 &&
                  offsetof(WsSmem, p_slot) % 16 == 0 && offsetof(WsSmem, o_stage) % 1024 == 0 && offsetof(WsSmem, w_neg) % 16 == 0 &&
                  offsetof(WsSmem, G_s) % 8 == 0 && offsetof(WsSmem, beta_s) % 8 == 0 &&
                  offsetof(WsSmem, rk_s) % 8 == 0 && offsetof(WsSmem, p_max) % 16 == 0 &&
                  sizeof(uint16_t[kC][kK]) % 1024 == 0 &&
                  offsetof(WsSmem, q_full) % 8 == 0,
              "f32 tiles take float4 and gate rows float2 accesses; q, k, v at 1024-byte boundaries");

inline constexpr int kWsChainThreads = kThreads;  // warps 0..7
inline constexpr int kWsPrepThreads = 128;        // a preparing warpgroup: warps 8..11, 12..15
inline constexpr int kWsThreads = kWsChainThreads + 2 * kWsPrepThreads;
// Registers a thread after the split (launch: 65536 / 512 = 128 each; each scheduler's quarter
// of the file holds two chain warps and one warp of each preparing role, 2 x 176 + 96 + 64 =
// 512). ptxas (nvcc 13.0): the chain at 168 serialises its wgmma, and at 176 with the preparing
// roles at 104 / 56 too; the preparing roles at 72 / 72 spilled 330 bytes, at 80 / 80 and
// 88 / 72 about 150. At 96 / 64 (with the merges' zero-block skip) the inverse role's code holds
// 2 spill stores and 4 loads, the outputs role's about 40 each (SASS between the setmaxnreg
// instructions), and the fused cases ran 1% faster than at 88 / 72 (thirty-second session):
// the inverse role, the step's bound, gains its loads in flight together; the outputs role has
// time to spare (it hands P over about 2,500 cycles early).
// (One preparing warpgroup, the kernel before: chain / preparation 184 / 136, no spills.)
inline constexpr int kWsChainRegs = 176;
inline constexpr int kWsInverseRegs = 96;
inline constexpr int kWsOutputsRegs = 64;
static_assert(kWsChainRegs * kWsChainThreads + (kWsInverseRegs + kWsOutputsRegs) * kWsPrepThreads <=
                  128 * kWsThreads,
              "the roles' registers fit what the launch gave the CTA");

// A lab build's timeline (cmake -DGDN_WS_TRACE=ON; bench/ws_trace.py reads it through
// gdn_debug_ws_trace): lane 0 of every warp of the first kTraceCtas CTAs records clock64 (the
// SM's cycle counter: one CTA's warps share it) at kTraceEvents points of each of the first
// kTraceChunks chunks: the GDN_WS_MARK lines of each role below (bench/ws_trace.py names them;
// its constants follow these). Off, the marks compile to nothing (the same SASS).
#ifndef GDN_WS_TRACE
#define GDN_WS_TRACE 0
#endif
#if GDN_WS_TRACE
inline constexpr int kTraceCtas = 4, kTraceChunks = 64, kTraceEvents = 8;
static __device__ unsigned long long ws_trace[kTraceCtas][kTraceChunks][kWsThreads / 32][kTraceEvents];
#define GDN_WS_MARK(c, e)                                                           \
  do {                                                                              \
    if (lane == 0 && blockIdx.x < kTraceCtas && (c) < kTraceChunks)                 \
      ws_trace[blockIdx.x][(c)][warp][(e)] = static_cast<unsigned long long>(clock64()); \
  } while (0)
#else
#define GDN_WS_MARK(c, e) \
  do {                    \
  } while (0)
#endif

#if GDN_CHUNKED_WGMMA
namespace ws {
enum : int {
  kBarChain = 1,       // the chain's warps
  kBarInverse = 2,     // the inverse role's warps
  kBarOutputs = 3,     // the outputs role's warps
  kBarPrepared = 4,    // and 5: outputs role -> chain, chunk c's P, gates and norms (c & 1)
  kBarXReady = 8,      // and 9: inverse role -> chain, chunk c's T and Xw (c & 1)
  kBarGatesReady = 10  // and 11: outputs role -> inverse role, chunk c's gates and key norms (c & 1)
};
// A hand-off between the chain and one preparing warpgroup (threads: every thread that arrives
// or waits on the id).
__device__ __forceinline__ void arrive(int id, int threads = kWsChainThreads + kWsPrepThreads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void wait(int id, int threads = kWsChainThreads + kWsPrepThreads) {
  named_barrier(id, threads);
}

// A Kc^T, A = Kc or Qc, all 64 token columns in one product a k-step (m64n64: A read once, where
// two m64n32 halves read it twice, 16 KB more of shared-memory reads a chunk; warp w % 4 has the
// rows [16 (w % 4), +16)): acc as two m64n32 accumulators, columns [0, 32) then [32, 64) (an
// m64n64 accumulator's registers are the two m64n32 ones in a row). Committed as one group (the caller
// waits). The tiles must be visible to wgmma. Measured against the two halves (H200, three
// alternated repeats each): Kc Kc^T 4 x 8192 0.585 -> 0.579 ms, 16 x 4096 1.161 -> 1.149, varlen16
// 0.656 -> 0.650, the same bits; then Qc Kc^T 0.578 -> 0.572, 1.151 -> 1.144, 0.652 -> 0.650
// (docs/NOTES.md, thirty-eighth session).
template <class M>
__device__ __forceinline__ void gram_issue_64(const uint16_t* a_tile, const uint16_t* k_tile, float (&acc)[2][4][4]) {
  float(&d)[8][4] = reinterpret_cast<float(&)[8][4]>(acc);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    const uint64_t ad = swizzle128_desc_k<kC>(a_tile, 16 * ks);
    const uint64_t bd = swizzle128_desc_k<kC>(k_tile, 16 * ks);  // Kc's rows as N
    if (ks == 0)
      wgmma_64_ss<M, false>(d, ad, bd);
    else
      wgmma_64_ss<M>(d, ad, bd);
  }
  wgmma_commit();
}

// r_t = 1 / sqrt(||x_t||^2 + 1e-6) of a [C, 128] tile's rows [16 w, +16) (row_norms' sums, by one
// warpgroup: w = 0..3).
template <class M>
__device__ __forceinline__ void row_norms_warpgroup(const uint16_t* tile, float* r, int w, int lane) {
#pragma unroll 1  // (two turns of the same code: the kernel's code is kept small)
  for (int half = 0; half < 2; ++half) {
    const int t = 16 * w + 8 * half + (lane & 7);
    float nx = 0.f;
#pragma unroll
    for (int i = 0; i < kK / 32; ++i) {
      const uint4 u = *reinterpret_cast<const uint4*>(tile + at_split<CoreTiles::K>(t & 7, 8 * (lane >> 3), t - (t & 7), 32 * i));
      const uint32_t wx[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 a = M::unpack(wx[e]);
        nx += a.x * a.x + a.y * a.y;
      }
    }
#pragma unroll
    for (int m = 8; m <= 16; m *= 2) nx += __shfl_xor_sync(0xffffffffu, nx, m);
    if (lane < 8) r[t] = rsqrtf(nx + 1e-6f);
  }
}

// r_t = 1 / sqrt(||k_t||^2 + 1e-6) of the warp's rows [16 w, +16) from the diagonal of Kc Kc^T
// in gram_issue_64's accumulators (qk_l2norm; after its wgmma_wait): row 16 w + g + 8 hr's
// ||k||^2 is column 32 (w >> 1) + 16 (w & 1) + g + 8 hr, in kk[w >> 1][2 (w & 1) + hr][2 hr +
// (g & 1)] of the lane with q = g >> 1 (row_norms_warpgroup's products, summed by the tensor
// pipe). The values pass an empty asm first, so that no read of them moves above the wait.
template <int kW>
__device__ __forceinline__ void key_norms_from_gram_of(float (&kk)[2][4][4], float* r, int lane) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float& x0 = kk[kW >> 1][2 * (kW & 1) + hr][2 * hr];
    float& x1 = kk[kW >> 1][2 * (kW & 1) + hr][2 * hr + 1];
    asm volatile("" : "+f"(x0), "+f"(x1));
    if (q == (g >> 1)) r[16 * kW + g + 8 * hr] = rsqrtf((g & 1 ? x1 : x0) + 1e-6f);
  }
}
__device__ __forceinline__ void key_norms_from_gram(float (&kk)[2][4][4], float* r, int w, int lane) {
  switch (w) {  // (warp-uniform: the accumulators' indices fixed at compile time)
    case 0: key_norms_from_gram_of<0>(kk, r, lane); break;
    case 1: key_norms_from_gram_of<1>(kk, r, lane); break;
    case 2: key_norms_from_gram_of<2>(kk, r, lane); break;
    default: key_norms_from_gram_of<3>(kk, r, lane); break;
  }
}

// Rows [rows, C) of a [C, 128] Swizzle128At tile zeroed by threads 0..kBy-1: a row is 128
// contiguous bytes in each column half, so the rows past `rows` are one range a half (a rolled
// loop: it runs once a packed sequence, and the kernel's code is kept small).
template <int kBy>
__device__ __forceinline__ void zero_rows_from(uint16_t* tile, int rows, int tid) {
  static_assert(Swizzle128At<kC>::at(5, 0) / 64 == 5 && Swizzle128At<kC>::at(5, 63) / 64 == 5 &&
                    Swizzle128At<kC>::at(5, 64) / 64 == kC + 5,
                "row r's 64 columns of half h in elements [64 (h C + r), +64)");
  const int pieces = (kC - rows) * 8;  // 16-byte pieces a half
#pragma unroll 1
  for (int i = tid; i < 2 * pieces; i += kBy) {
    const int half = i >= pieces ? 1 : 0;
    reinterpret_cast<uint4*>(tile + half * kC * 64 + rows * 64)[i - half * pieces] = make_uint4(0u, 0u, 0u, 0u);
  }
}

}  // namespace ws
#endif

// kCheckpoints: the instance for calls with state checkpoints, as chunked_prefill_kernel's.
template <class M, bool kCheckpoints>
__global__ void __launch_bounds__(kWsThreads, 1)
    chunked_prefill_ws_kernel(const __grid_constant__ ChunkParams p, const __grid_constant__ TileMaps maps) {
#if GDN_CHUNKED_WGMMA
  extern __shared__ __align__(128) unsigned char smem_raw[];
  WsSmem& s = *reinterpret_cast<WsSmem*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
  // warp: broadcast from lane 0, so that the compiler knows the role tests on it are warp-uniform
  const int tid = threadIdx.x, warp = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;
  const int64_t n = longest_first(p, blockIdx.x / p.Hv);
  const int h = int(blockIdx.x % p.Hv);
  const int j = p.tiled ? h % p.Hk : h / p.ratio;  // key / query head

  Sequence sq;
  if (!begin_fused_sequence<kCheckpoints, kWsThreads>(p, n, h, tid, sq)) return;
  const int64_t chunks = (sq.len + kC - 1) / kC;
  const auto live_rows = [&](int64_t c) { return int(sq.len - c * kC < kC ? sq.len - c * kC : kC); };
  // A packed sequence's partial last chunk: rows past the sequence zeroed once landed.
  const auto packed_tail = [&](int64_t c) { return p.cu_seqlens && live_rows(c) < kC; };
  const int seq_coord = p.cu_seqlens ? 0 : int(n);
  constexpr uint32_t kBoxBytes = kC * 64 * 2;
  constexpr int kCopyThread = 6 * 32;  // the chain's thread that issues every TMA copy
  const bool copier = tid == kCopyThread;
  // Chunk c's tiles: q in q[c & 1]; Kc and Vc in k[c & 1] and v[c & 1], which trade places every
  // two chunks, so that chunk c + 2's Kc lands in chunk c's Vc buffer as soon as U's products
  // have read it (early in the chain's chunk c) and the preparation of chunk c + 2 need not wait
  // for chunk c's end. Chunk c + 2's Vc lands in chunk c's Kc buffer once chunk c's state update
  // has read it, chunk c + 2's q at chunk c's end.
  const auto k_tile_of = [&](int64_t c) -> uint16_t* {
    return ((c >> 1) & 1) ? &s.v[c & 1][0][0] : &s.k[c & 1][0][0];
  };
  const auto v_tile_of = [&](int64_t c) -> uint16_t* {
    return ((c >> 1) & 1) ? &s.k[c & 1][0][0] : &s.v[c & 1][0][0];
  };
  const auto parity = [](int64_t c) { return uint32_t(c >> 1) & 1u; };
  // TMA of chunk c's q, Kc or Vc (two 64-column boxes) into its buffer, credited to its mbarrier.
  const auto tma_tile = [&](uint16_t* dst, const void* map, uint64_t* bar, int head, int64_t c) {
    const int tok = int(sq.bos + c * kC);
    mbarrier_arrive_expect(bar, 2 * kBoxBytes);
#pragma unroll
    for (int half = 0; half < 2; ++half) tma_load_4d(dst + half * kC * 64, map, bar, 64 * half, head, tok, seq_coord);
  };
  const auto tma_q = [&](int64_t c) { tma_tile(&s.q[c & 1][0][0], &maps.q, &s.q_full[c & 1], j, c); };
  const auto tma_k = [&](int64_t c) { tma_tile(k_tile_of(c), &maps.k, &s.k_full[c & 1], j, c); };
  const auto tma_v = [&](int64_t c) { tma_tile(v_tile_of(c), &maps.v, &s.v_full[c & 1], h, c); };

  if (tid == 0) {
    for (int b = 0; b < 2; ++b) {
      mbarrier_init(&s.q_full[b], 1);
      mbarrier_init(&s.k_full[b], 1);
      mbarrier_init(&s.v_full[b], 1);
    }
    fence_mbarrier_init();
  }
  if (!p.l2norm && tid < kC)
    for (int b = 0; b < kNormSlots; ++b) s.rq_s[b][tid] = s.rk_s[b][tid] = 1.f;
  if (tid < 2) s.p_exp[tid] = 0;
  {  // T's blocks above the diagonal: zeros for the whole sequence (gate_inverse writes the rest)
    constexpr int kPieces = int(sizeof(s.t) / sizeof(uint4));
    uint4* t = reinterpret_cast<uint4*>(&s.t);
    for (int i = tid; i < kPieces; i += kWsThreads) t[i] = make_uint4(0u, 0u, 0u, 0u);
  }
  if (warp >= kWarps && warp < kWarps + 4) {  // P's block AB (rows [0, 32), columns [32, 64)):
                                              // zeros in both slots
    const int w = warp - kWarps;
    store_zero_p<CoreTiles>(16 * (w & 1), 32, lane, &s.p_slot[w >> 1][0][0], &s.p_slot[w >> 1][0][0]);
  }
  __syncthreads();  // the mbarriers initialised before any copy completes on them
  // Chunks 0 and 1: q, Kc, Vc issued now.
  if (copier)
    for (int64_t c = 0; c < 2 && c < chunks; ++c) {
      tma_k(c);
      tma_q(c);
      tma_v(c);
    }
  const HeadGate hg = head_gate(p, h);

  if (warp >= kWarps) {
    // ---- the preparation (warps 8..15), two warpgroups a chunk or two ahead of the chain:
    //   inverse (warps 8..11)   Kc Kc^T, its epilogue m, X = (I + m)^-1 over m in place, T and
    //                           Xw from X into buffer c & 1
    //   outputs (warps 12..15)  the gates (every kGateGroup chunks), the key norms (qk_l2norm),
    //                           the query norms, Qc Kc^T and its epilogue P (f16, range-checked);
    //                           a packed sequence's partial last chunk's q and Kc rows past it
    //                           zeroed first
    // The inverse role waits for the outputs role's gates and key norms of the chunk (m needs beta
    // and rk); the chain waits for both roles' chunk.
    const int w = (warp - kWarps) & 3, ptid = (tid - kWsChainThreads) & (kWsPrepThreads - 1);
    if (warp < kWarps + 4) {
      registers_down<kWsInverseRegs>();
      const auto inverse_sync = [] { named_barrier(ws::kBarInverse, kWsPrepThreads); };
      for (int64_t c = 0; c < chunks; ++c) {
        const int buf = int(c & 1);
        GDN_WS_MARK(c, 0);  // inverse: the chunk's start
        uint16_t* k_tile = k_tile_of(c);
        // Kc of chunk c landed (a packed tail's: its rows past the sequence zeroed by the outputs
        // role before its signal, which this role then waits for first)
        mbarrier_wait(&s.k_full[buf], parity(c));
        const bool tail = packed_tail(c);
        if (tail) ws::wait(ws::kBarGatesReady + buf, 2 * kWsPrepThreads);
        GDN_WS_MARK(c, 1);  // Kc landed
        // Kc Kc^T into m (chunk c - 1's X there was read by this role's gate_inverse), then X
        // over m in place, then T and Xw into buffer buf (chunk c - 2's there were read by the
        // chain's -W and U before chunk c's Kc was issued).
        float kk[2][4][4];  // token columns [0, 32) and [32, 64)
        ws::gram_issue_64<M>(k_tile, k_tile, kk);
        if (!tail) ws::wait(ws::kBarGatesReady + buf, 2 * kWsPrepThreads);  // beta of chunk c
        const float* G = s.G_s[c % kGateSlots];
        const float* beta = s.beta_s[c % kGateSlots];
        const float* rq = s.rq_s[c % kNormSlots];
        const float* rk = s.rk_s[c % kNormSlots];
        wgmma_wait<0>();
        GDN_WS_MARK(c, 2);  // the outputs role's gates and key norms
        // m's blocks: rows [16 w, +16) of columns [0, 32), and of [32, 64) for w >= 2
        store_key_block<M, CoreTiles, true, false>(s.mx, nullptr, nullptr, 16 * w, 0, lane, kk[0], kk[0], G, beta, rq,
                                                   rk, p.scale);
        if (w >= 2)
          store_key_block<M, CoreTiles, true, false>(s.mx, nullptr, nullptr, 16 * w, 32, lane, kk[1], kk[1], G, beta,
                                                     rq, rk, p.scale);
        __syncwarp();  // the warp's rows of m -> its diagonal block's inverse
        GDN_WS_MARK(c, 3);  // m's epilogue done
        WsInverseTiles inverse{s.mx, s.mx};
        // (the merges read no block above it; the fallback substitution called, out of the loop)
        invert_diagonal_blocks_doubling<true, true>(inverse, w, lane);
        GDN_WS_MARK(c, 4);  // the warp's diagonal block done
        inverse_sync();  // every diagonal block
        GDN_WS_MARK(c, 5);  // every diagonal block done
        merge_inverse_blocks_mma(inverse, w, lane, inverse_sync);
        inverse_sync();  // X is complete
        GDN_WS_MARK(c, 6);  // the merges done
        WsGateInverseTiles gi{s.mx, G, beta, rk, {&s.t[buf].hi[0], &s.t[buf].lo[0]}, s.xw[buf]};
        gate_inverse_warpgroup<M, CoreTiles>(gi, ptid);
        fence_shared_for_wgmma();  // T -> the chain's wgmma
        // (a barrier of the warpgroup before the arrival, as the outputs role's: racecheck; X is
        // read: chunk c + 1's m may take its place)
        inverse_sync();
        // (chunk c + 2's arrival on this id needs chunk c + 2's Kc, issued or copied after the
        // chain's wait for this one)
        GDN_WS_MARK(c, 7);  // T and Xw handed to the chain
        ws::arrive(ws::kBarXReady + buf);
      }
      return;
    }
    registers_down<kWsOutputsRegs>();
    const auto outputs_sync = [] { named_barrier(ws::kBarOutputs, kWsPrepThreads); };
    // P's range is checked unless the norms bound it: |P| <= |scale| with qk_l2norm
    const bool check_p = !(p.l2norm && fabsf(p.scale) <= 1.f && fabsf(p.scale) >= 1.f / 256.f);
    RawGates raw;  // warp w: the raw gates of chunk w of the next group
    if (w < chunks) raw = load_raw_gates(p, n, sq, h, w, lane);
    for (int64_t c = 0; c < chunks; ++c) {
      const int buf = int(c & 1);
      uint16_t* k_tile = k_tile_of(c);
      GDN_WS_MARK(c, 0);  // outputs: the chunk's start
      uint16_t* q_tile = &s.q[buf][0][0];
      mbarrier_wait(&s.k_full[buf], parity(c));
      if (packed_tail(c)) {  // q and Kc: rows past the sequence zeroed before any role reads them
        mbarrier_wait(&s.q_full[buf], parity(c));
        ws::zero_rows_from<kWsPrepThreads>(q_tile, live_rows(c), ptid);
        ws::zero_rows_from<kWsPrepThreads>(k_tile, live_rows(c), ptid);
        fence_shared_for_wgmma();  // this thread's zeros -> wgmma (every role's)
        outputs_sync();
      }
      GDN_WS_MARK(c, 1);  // Kc landed
      float* G = s.G_s[c % kGateSlots];
      float* rq = s.rq_s[c % kNormSlots];  // (the chain read chunk c - 4's long before)
      float* rk = s.rk_s[c % kNormSlots];
      if (c % kGateGroup == 0 && c + w < chunks) {  // chunk c + w's gates by warp w
        // (their slots last held chunks c - 8 .. c - 5, which the chain and the inverse role
        // read long before; the chain may still be reading chunk c - 2's or c - 1's, in the
        // other half)
        const int64_t cw = c + w;
        chunk_gates(p, s.G_s[cw % kGateSlots], s.beta_s[cw % kGateSlots], hg, raw, live_rows(cw), lane);
        if (cw + kGateGroup < chunks) raw = load_raw_gates(p, n, sq, h, cw + kGateGroup, lane);
      }
      // the key norms from the diagonal of this role's own Kc Kc^T (||k_t||^2 is entry (t, t)):
      // one 64 x 64 x 128 product against about 1,150 cycles of shared-memory reads by
      // row_norms_warpgroup (the same speed as the inverse role forming them from its gram, with
      // a barrier of its own: docs/NOTES.md, forty-fourth session)
      if (p.l2norm) {
        float kk[2][4][4];
        ws::gram_issue_64<M>(k_tile, k_tile, kk);
        wgmma_wait<0>();
        ws::key_norms_from_gram(kk, rk, w, lane);
      }
      outputs_sync();  // the slot's gates and key norms
      // -> the inverse role (its next arrival on this id, chunk c + 2's, needs chunk c + 2's Kc:
      // after the chain's chunk c, which waits for the inverse role's chunk c, which waits here)
      GDN_WS_MARK(c, 2);  // gates handed to the inverse role
      ws::arrive(ws::kBarGatesReady + buf, 2 * kWsPrepThreads);
      // Qc Kc^T into P slot buf once chunk c's q has landed (its reader, chunk c - 2's outputs,
      // is done when chunk c's q is issued)
      mbarrier_wait(&s.q_full[buf], parity(c));
      GDN_WS_MARK(c, 3);  // q landed
      if (p.l2norm) {  // (before the products: beside their accumulators the role spilled)
        ws::row_norms_warpgroup<M>(q_tile, rq, w, lane);
        outputs_sync();  // the query norms
      }
      float qk[2][4][4];  // token columns [0, 32) and [32, 64)
      ws::gram_issue_64<M>(q_tile, k_tile, qk);
      wgmma_wait<0>();
      GDN_WS_MARK(c, 4);  // Qc Kc^T done
      // P's blocks: rows [16 w, +16) of columns [0, 32), and of [32, 64) for w >= 2 (its block AB
      // is zeros, written once), as m's in the inverse role: four blocks for warps 14 and 15, two
      // for 12 and 13 (the m64n32 halves with Qc's rows shifted by 32 had given warps 12 and 13
      // the four, and read Qc twice)
      // P's values in qk first, then (unless the norms bound it) its range over the warpgroup
      // and P's exponent pi, then P stored once at 2^-pi (two passes of stores had been 5 KB more
      // code in the loop, about 2.5% of the step: docs/NOTES.md, forty-second session)
      uint16_t* p_hi = &s.p_slot[buf][0][0];
      float p_absmax = 0.f;
      query_key_block_by_logs(16 * w, 0, lane, qk[0], G, rq, rk, p.scale, &p_absmax);
      if (w >= 2) query_key_block_by_logs(16 * w, 32, lane, qk[1], G, rq, rk, p.scale, &p_absmax);
      if (check_p) {
        p_absmax = warp_max_nonnegative(p_absmax);  // (fmaxf's running maximum: never NaN)
        if (lane == 0) s.p_max[buf][w] = p_absmax;
        outputs_sync();  // every warp's largest |P|
        // (the slot's last reader, chunk c - 2's, is done: its readers passed chunk c - 1's
        // barriers since)
        const float4 pm = *reinterpret_cast<const float4*>(s.p_max[buf]);
        const int pi = p_exponent(fmaxf(fmaxf(pm.x, pm.y), fmaxf(pm.z, pm.w)));
        if (pi != 0) {  // (warpgroup-uniform) P at 2^-pi: powers of two, no bit of a mantissa
          const float f = pow2(-pi);
          scale_tiles(qk[0], f);
          scale_tiles(qk[1], f);
        }
        if (ptid == 0) s.p_exp[buf] = pi;
      }
      GDN_WS_MARK(c, 5);  // the warp's P formed
      store_p_block<CoreTiles>(p_hi, 16 * w, 0, lane, qk[0], p.scale);
      if (w >= 2) store_p_block<CoreTiles>(p_hi, 16 * w, 32, lane, qk[1], p.scale);
      fence_shared_for_wgmma();  // P -> the chain's wgmma; this thread's reads of q, Kc -> the TMA refills
      // (a barrier of the warpgroup first: compute-sanitizer's racecheck reported the merge's last
      // stores, followed by no bar.sync of their own, against the chain's reads after kBarPrepared,
      // with a CTA fence before the arrival or without one)
      outputs_sync();
      GDN_WS_MARK(c, 6);  // every warp's P stored
      // (chunk c + 2's arrival on this id needs chunk c + 2's q, issued or copied after the
      // chain's chunk c, which waits for this one. With one id for every chunk, chunk c's arrival
      // could come before the chain's wait for chunk c - 1 while the chain waited for the inverse
      // role: a hang in the tests.)
      GDN_WS_MARK(c, 7);  // P, gates and norms handed to the chain
      ws::arrive(ws::kBarPrepared + buf);
    }
    return;
  }

  // ---- the chain (warps 0..7)
  registers_up<kWsChainRegs>();
  const int g = lane >> 2, q = lane & 3;
  const auto chain_sync = [] { named_barrier(ws::kBarChain, kWsChainThreads); };
  float S[16][4];  // the state's rows [16 warp, +16), all K columns, times 2^-sigma
  int sigma = 0;   // (the warp's: chunked_range.cuh)
  load_state(p, sq.slot, h, S, 16 * warp, 0, g, q);
  int64_t next_checkpoint = kCheckpoints ? first_checkpoint_chunk(p, 0) : -1;
  for (int64_t c = 0; c < chunks; ++c) {
    const int buf = int(c & 1);
    const int64_t tok0 = sq.bos + c * kC;
    const int rows = live_rows(c);
    const bool next = c + 1 < chunks;
    uint16_t* k_tile = k_tile_of(c);
    uint16_t* v_tile = v_tile_of(c);
    uint16_t* q_tile = &s.q[buf][0][0];
    keep_state_in_range(S, sigma);  // (as loaded, or after the last chunk's completed update)
    GDN_WS_MARK(c, 0);  // chain: the step's start
    // Chunk c prepared: its T and Xw (the inverse role), its P, gates and norms (the outputs role).
    ws::wait(ws::kBarXReady + buf);
    GDN_WS_MARK(c, 1);  // T and Xw ready
    ws::wait(ws::kBarPrepared + buf);
    GDN_WS_MARK(c, 2);  // P ready
    const int pi = s.p_exp[buf];  // P slot buf holds 2^-pi P
    mbarrier_wait(&s.q_full[buf], parity(c));  // (complete: q, Kc for this thread too)
    mbarrier_wait(&s.k_full[buf], parity(c));
    // The chunk's gates and norms, in their slots (rewritten for chunk c + 8 and c + 4 at the
    // earliest, while the preparation runs at most two chunks ahead)
    const float* G = s.G_s[c % kGateSlots];
    const float* rq = s.rq_s[c % kNormSlots];
    const float* rk = s.rk_s[c % kNormSlots];
    if (tid < kC) {  // o's scale folded into q_f (and P): o = scale (O diag(q_f) + D^T P^T)
      const ChainTiles own{nullptr, nullptr, nullptr, nullptr, nullptr, G, rq, rk};
      s.q_f[tid] = output_factor<false>(own, tid) * (p.scale * pow2(-pi));
      s.k_f[tid] = state_factor<false>(own, G[kC - 1], tid);
    }
    if (copier) {  // chunk c - 1's o read out of the staging tile (this chunk's o goes there)
      bulk_wait_all<true>();
      // chunk c + 1's Vc into chunk c - 1's Kc buffer (read by that chunk's state update)
      if (next && c >= 1) tma_v(c + 1);
    }
    GDN_WS_MARK(c, 3);  // before the step's first barrier (the copier's waits and copies above)
    chain_sync();
    mbarrier_wait(&s.v_full[buf], parity(c));
    if (packed_tail(c)) {  // Vc's rows past the sequence zeroed (the chunk's rows: chain-uniform)
      ws::zero_rows_from<kWsChainThreads>(v_tile, rows, tid);
      fence_shared_for_wgmma();
      chain_sync();
    }
    float D[8][4];  // D^T of the chunk: [16 value rows, C tokens]
    {
      const WsMinusWTiles view{reinterpret_cast<const uint16_t(*)[kC][kK]>(k_tile),
                               reinterpret_cast<const uint16_t(*)[kC][kV]>(v_tile), s.xw[buf], s.t[buf], G,
                               s.w_neg};
      wgmma_minus_w_new_values<M, const WsMinusWTiles, MmaF16>(view, 0, warp, lane, D);
    }
    if (sigma != 0) scale_tiles(D, pow2(-sigma));  // U in the state's units
    fence_shared_for_wgmma();  // -W -> the chain's wgmma; this thread's reads of Vc -> the TMA refill
    GDN_WS_MARK(c, 4);  // the warp's -W and U done
    chain_sync();
    if (copier && c + 2 < chunks) tma_k(c + 2);  // into Vc's buffer: U has read it
    GDN_WS_MARK(c, 5);  // every warp's -W and U done

    const ChainTiles ct{&s.w_neg[0][0], q_tile, k_tile, &s.p_slot[buf][0][0], nullptr,
                        G, s.q_f, s.k_f};
    float O[8][4];  // O^T of the chunk: [16 value rows, C tokens]
    const float decay = chunk_decay(ct);
    uint32_t a[4][2][4];
    wgmma_chain_outputs_half<M, true, 4>(ct, lane, S, D, O, sigma, decay,
                                         [&] { wgmma_state_update<M>(ct, lane, decay, S, D, a); });
    // o staged while the state update runs (chunk c - 1's TMA store has read the staging tile:
    // the copier's wait before the barrier after gate_inverse)
    uint16_t* o_stage = &s.o_stage[0][0];
    const bool box_store = rows == kC || !p.cu_seqlens;
    if (sigma + pi != 0) scale_tiles(O, pow2(sigma + pi));
    stage_o_stmatrix<M>(o_stage, O, 1.f, warp, lane);
    wgmma_wait<0>();  // the state update has read Kc
    if (kCheckpoints && c == next_checkpoint) {  // S is the state after chunk c
      if (sigma != 0) scale_tiles(S, pow2(sigma));
      store_checkpoint(p, n, sq, h, c, S, 16 * warp, g, q, checkpoint_slot(p, n, sq, c));
      if (sigma != 0) scale_tiles(S, pow2(-sigma));
      next_checkpoint += checkpoint_every_chunks(p);
    }
    fence_shared_for_wgmma();  // o -> the TMA store; this thread's reads of q -> the TMA refill
    GDN_WS_MARK(c, 6);  // the warp's outputs and state update done
    chain_sync();  // o staged; q, Kc and P slot buf read
    GDN_WS_MARK(c, 7);  // every warp's (the step's last barrier)
    if (box_store) {
      if (copier) {
        tma_store_4d(&maps.o, o_stage, 0, h, int(tok0), seq_coord);
        tma_store_4d(&maps.o, o_stage + kC * 64, 64, h, int(tok0), seq_coord);
        bulk_commit();
      }
    } else {
      store_chunk_output<CoreTiles::Q>(p, o_stage, n, tok0, rows, h, tid);
    }
    if (copier && c + 2 < chunks) tma_q(c + 2);  // into q[c & 1]: the outputs and the preparation have read it
  }
  if (copier) bulk_wait_all<false>();  // the last chunks' o written before the CTA ends
  if (p.ht.p) {
    if (sigma != 0) scale_tiles(S, pow2(sigma));
    store_state(p, sq.slot, h, S, 16 * warp, 0, g, q);
  }
#endif
}

}  // namespace gdn::cuda::chunked

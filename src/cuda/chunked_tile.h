// The chunked (WY / UT-transform) prefill kernels' tiles: chunk length, warps, shared-memory
// layouts, the workspace's prepared chunks, the auto-path crossover, the choice of form and the
// sequence split's plan. Host and device code read it; the choices and their
// reasons live here alone: chunk_tile(), auto_prefers_chunked(), choose_form(),
// plan_segments().
// Letters as in SPEC.md: N sequences, T tokens, Hk / Hv heads, K / V head dims, C chunk length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include <vector_types.h>  // float4

namespace gdn::cuda::chunked {

struct ChunkTile {
  int C = 0;        // tokens per chunk
  int K = 0, V = 0;  // head dims the kernel is built for
  int warps = 0;    // warp w owns state rows v in [16 w, 16 w + 16): V / 16 warps
  int ld_tok = 0;   // row stride (elements) of [C, K] / [C, V] half-precision tiles
  int ld_cc = 0;    // row stride of [C, C] half-precision tiles
  int ld_f32 = 0;   // row stride of [C, C] f32 tiles
};

// One configuration, for the released models' K = V = 128:
//  - C = 64: the chain costs 6 C K V per chunk whatever C is, the intra-chunk work grows as
//    C^2 K; 64 is where the chunk's tiles (Q, K, V double-buffered, P, T, W, X) still fit the
//    227 KB of shared memory one Hopper block may take, and what fla and FlashInfer use.
//  - 8 warps: the V x K = 128 x 128 f32 state lives in registers, 16 rows (64 floats per
//    thread) per warp, as m16n8 accumulator tiles that double as the A operand of the chain's
//    products (no shared-memory round trip for S).
//  - Row strides padded by 16 bytes: the 8 row addresses of one ldmatrix land in 8 distinct
//    4-bank groups (272 B and 144 B rows shift by 4 banks per row), no conflicts.
constexpr ChunkTile chunk_tile(int K, int V) {
  if (K == 128 && V == 128) return ChunkTile{64, 128, 128, 8, 128 + 8, 64 + 8, 64 + 4};
  return ChunkTile{};  // no kernel
}

inline constexpr ChunkTile kTile = chunk_tile(128, 128);
inline constexpr int kC = kTile.C;
inline constexpr int kK = kTile.K;
inline constexpr int kV = kTile.V;
inline constexpr int kWarps = kTile.warps;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kLdTok = kTile.ld_tok;
inline constexpr int kLdCC = kTile.ld_cc;
inline constexpr int kLdF = kTile.ld_f32;

// ---- where element (r, c) of a half-precision tile lives (elements from the tile's start)
//
// Row-major with a padded row stride (kLd elements); in core matrices of 8 rows x 16 bytes,
// each 128 contiguous bytes (KMajorAt: a no-swizzle layout wgmma reads its B operand from,
// sm_90a); or 128-byte swizzled (Swizzle128At). Each keeps every ldmatrix row (16
// bytes) contiguous and the 8 rows of an ldmatrix matrix in distinct bank groups, so the
// mma.sync code reads them all without conflicts. kAdditive: At::at(r0 + dr, c0 + dc) =
// At::at(r0, c0) + At::at(dr, dc) for r0, c0 multiples of 8 (the fragment helpers then form a
// lane's part once and add the block's as a constant).
template <int kLd>
struct RowMajorAt {
  static constexpr bool kAdditive = true;
  __host__ __device__ static constexpr int at(int r, int c) { return r * kLd + c; }
  __host__ __device__ static constexpr int block(int r0, int c0) { return at(r0, c0); }
  __host__ __device__ static constexpr int lane(int dr, int dc) { return at(dr, dc); }
};
// kRowXor: row r stored at row r ^ kRowXor (bits 4 and up: whole 16-row blocks permuted, as the
// wgmma chain's token-indexed tiles take them: kTokenRowXor below). Additive in the split form
// at(r0 + dr, c0 + dc) = block(r0, c0) + lane(dr, dc) wherever dr adds no carry into the permuted
// bits (r0 a multiple of 16 and dr < 16, or r0 a multiple of 8 and dr < 8: every caller's).
template <int kCols, int kRowXor = 0>
struct KMajorAt {
  static_assert((kRowXor & 15) == 0, "whole 16-row blocks");
  static constexpr bool kAdditive = true;
  __host__ __device__ static constexpr int plain(int r, int c) {
    return (r >> 3) * (kCols * 8) + (c >> 3) * 64 + (r & 7) * 8 + (c & 7);
  }
  __host__ __device__ static constexpr int at(int r, int c) { return plain(r ^ kRowXor, c); }
  __host__ __device__ static constexpr int block(int r0, int c0) { return plain(r0 ^ kRowXor, c0); }
  __host__ __device__ static constexpr int lane(int dr, int dc) { return plain(dr, dc); }
};
// 128-byte swizzle of a [kRows, 128] tile as two column halves of [kRows, 64] (128-byte rows),
// the 16-byte chunk index XOR the row's low 3 bits, as the hardware's 128-byte swizzle does with
// address bits 7..9 into 4..6 (so the tile must start at a 1024-byte boundary for wgmma). wgmma
// reads it as a K-major operand with the columns as k (Qc) or as an MN-major one with the rows as
// k (Kc in the state update; chunked_wgmma.cuh's descriptors). A row's 64-element global line lands
// in one aligned 128-byte segment of shared memory, which is what cp.async fills cheaply:
// copies into core-matrix layouts, where a line's eight pieces fall in eight segments, cost the
// fused step 10% (H200, Nsight Compute: 3 to 8 shared wavefronts a piece). Not additive (the XOR).
template <int kRows>
struct Swizzle128At {
  static constexpr bool kAdditive = false;
  __host__ __device__ static constexpr int at(int r, int c) {
    return (c >> 6) * (kRows * 64) + r * 64 + ((((c >> 3) & 7) ^ (r & 7)) << 3) + (c & 7);
  }
};

// The layouts of the chunk's tiles (Vc, Qc, Kc, -W: [C, K]; P, T: [C, C]), one policy a kernel:
// PaddedTiles for the split form's kernels, CoreTiles for the fused kernel, whose products run
// on wgmma on sm_90a (Qc, -W, P and T as K-major operands, Kc as a K-major or an MN-major one,
// Vc^T from registers) and on mma.sync elsewhere (the same tiles through ldmatrix). Vc, Qc, Kc
// arrive by TMA or cp.async, -W, P and T by fragment stores (conflict-free in plain core
// matrices). Kc swizzled rather than in core matrices took 5% off the fused step (H200;
// docs/NOTES.md). kCore: not padded rows.
struct PaddedTiles {
  static constexpr bool kCore = false;
  using V = RowMajorAt<kLdTok>;
  using Q = RowMajorAt<kLdTok>;
  using K = RowMajorAt<kLdTok>;
  using W = RowMajorAt<kLdTok>;
  using P = RowMajorAt<kLdCC>;
  using T = RowMajorAt<kLdCC>;
};
// The wgmma chain's D^T (value rows x tokens) holds its token columns in 16-token blocks in
// reverse order (3, 2, 1, 0: column n is token n ^ 48), so that T's rows (D's columns) that can
// be nonzero at a k-step are a prefix of them: U^T = Vc^T T^T takes k-step ks's product on the
// first 64 - 16 ks columns only (wgmma accumulates into a prefix of its registers, not into a
// suffix: ptxas then serialises the pipeline). -W's rows follow (D^T += S (-W)^T); D's readers
// map its column block to the token block (the Kc and P k-steps, the state factors). On sm_90a
// only: the mma.sync code of other targets reads the same tiles in token order.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
inline constexpr int kTokenRowXor = 48;
#else
inline constexpr int kTokenRowXor = 0;
#endif
static_assert(kC == 64, "the token block reversal is 48 for four blocks of 16");
struct CoreTiles {
  static constexpr bool kCore = true;
  using V = Swizzle128At<kC>;
  using Q = Swizzle128At<kC>;
  using K = Swizzle128At<kC>;
  using W = KMajorAt<kK, kTokenRowXor>;
  using P = KMajorAt<kC>;
  using T = KMajorAt<kC, kTokenRowXor>;
};
// The mma.sync prepare kernel (split form, the mma.sync chains): its own tiles padded; P written
// to the prepared chunk row-major, which the chains' 16-byte copies into padded rows keep whole.
struct PrepareForMmaTiles : PaddedTiles {
  using P = RowMajorAt<kC>;
};
static_assert(Swizzle128At<kC>::at(kC - 1, kK - 1) < kC * kLdTok,
              "the fused kernel's Vc, Qc, Kc fit the padded tiles' space");

// Path auto takes the chunked kernel from this many tokens per sequence (dense: T; packed: the
// mean T_total / N, since the host cannot read cu_seqlens). Measured (bench/bench_prefill.py
// --crossover, H200, N = 32, Hv = 32, bf16, results in bench/results/*-prefill-longest-first.json):
// recurrent 0.104 / 0.191 / 0.368 ms against chunked 0.181 / 0.183 / 0.184 ms at T = 8 / 16 / 32.
// The recurrent kernel costs one state pass plus about 11 us a token, the chunked one a chunk
// step (13.4 us) per wave whatever T <= 64 is; both scale with N Hv alike, so the crossover
// (between 8 and 16 tokens) does not move with the batch.
inline constexpr int64_t kAutoMinTokens = 16;
// f32 inputs (chunked_f32.cu, 3xTF32; bench_prefill.py --inputs f32 --crossover, H200, N = 32,
// Hv = 32): recurrent 0.188 / 0.364 / 0.540 / 1.419 ms against chunked 0.314 / 0.323 / 0.338 /
// 0.717 ms at T = 16 / 32 / 48 / 128 (fifty-sixth session, bench/results/2026-12-04-session56/;
// the fifty-fourth session's slower kernel crossed between 32 and 48). The recurrent kernel adds
// about 11 us a token, the chunked one costs a chunk step whatever T <= 64 is, so they meet near
// 29 tokens.
inline constexpr int64_t kAutoMinTokensF32 = 32;
constexpr bool auto_prefers_chunked(int64_t tokens_per_sequence, bool f32_inputs = false) {
  return tokens_per_sequence >= (f32_inputs ? kAutoMinTokensF32 : kAutoMinTokens);
}

// Row stride of the inverse's merge scratch (f32): the tf32 B-fragment reads (row q, column g)
// fall in 32 distinct banks (8 q + g).
inline constexpr int kLdMerge = 32 + 8;

// Shared memory of one block (uint16_t: bf16 or f16 bits, the kernel's input dtype). About
// 197 KB: the kernel needs a device whose opt-in block limit is at least that (Hopper: 227 KB).
struct HalfPair {  // a [C, C] matrix as hi + lo half-precision parts (x = hi + lo to ~2^-16)
  uint16_t hi[kC][kLdCC];
  uint16_t lo[kC][kLdCC];
};

// The fused kernel's tiles. q, k, v are double-buffered: the next chunk's rows land while
// this one is worked on.
struct Smem {
  uint16_t q[2][kC][kLdTok];  // [C, K] query rows of the chunk; o staging
  uint16_t k[2][kC][kLdTok];  // [C, K] key rows
  uint16_t v[2][kC][kLdTok];  // [C, V] value rows
  HalfPair p;                 // [C, C] P = Mask o (Qn Kn^T)
  HalfPair t;                 // [C, C] T = Mask o (X diag(beta)); in CoreTiles::T, whose blocks
                              // above the diagonal are zeroed once (for wgmma) and never written
  float merge[32][kLdMerge];  // scratch of the inverse's block merges
  uint16_t xw[kC][kLdCC];     // [C, C] X diag(beta rk): W's left factor (one rounding)
  union {
    float m[kC][kLdF];           // [C, C] strictly lower diag(beta) Kn Kn^T (f32)
    uint16_t w_neg[kC][kLdTok];  // [C, K] -W, once the inverse no longer needs m
  };
  float x[kC][kLdF];          // [C, C] X = (I + m)^-1, unit lower triangular (f32)
  float G[kC];                // cumulative log-decay inside the chunk
  float beta[kC];
  float rq[kC], rk[kC];       // 1 / ||q_t||, 1 / ||k_t|| (1 without qk_l2norm)
  float q_f[kC], k_f[kC];     // the chain's per-token factors (output_factor, state_factor)
  float G_next[kC], beta_next[kC];  // the next chunk's G and beta, formed a chunk ahead
  uint64_t tiles_full[2];     // the fused kernel's TMA: buffer b's q, k, v have landed (mbarriers)
};

inline constexpr size_t kSmemBytes = sizeof(Smem);
// The fused kernel's dynamic shared memory: Smem from the first 1024-byte boundary (the 128-byte
// swizzled tiles' pattern is anchored to absolute address bits 7..9 for wgmma).
inline constexpr size_t kFusedSmemBytes = kSmemBytes + 1024;
static_assert(offsetof(Smem, q) == 0 && sizeof(uint16_t[kC][kLdTok]) % 1024 == 0,
              "every q, k, v buffer of the fused kernel starts at a 1024-byte boundary (swizzle, TMA)");
static_assert(offsetof(Smem, x) % 16 == 0 && offsetof(Smem, m) % 16 == 0 && offsetof(Smem, t) % 16 == 0 &&
                  offsetof(Smem, G) % 8 == 0 &&
                  offsetof(Smem, beta) % 8 == 0 && offsetof(Smem, G_next) % 8 == 0 &&
                  offsetof(Smem, beta_next) % 8 == 0,
              "f32 tiles take float4 and gate rows float2 accesses");
static_assert(sizeof(float[kC][kLdF]) >= sizeof(uint16_t[kC][kLdTok]), "w_neg must fit in m");

// ---- the split form: a prepare kernel and a chain kernel
//
// Where few (sequence, value head) pairs run long chains (1 x T, Hk/Hv = 2/8), the fused
// kernel leaves most SMs idle and pays the state-independent two thirds of every chunk step on
// the chain's critical path. The split form runs those steps for every chunk at once (prepare:
// one CTA per (chunk, value head), writing a PreparedChunk to the workspace), then the chain
// alone (one CTA per (sequence, value head, block of kChainRows state rows)), reading the
// prepared chunks in order.

// The prepare kernel's tiles: one chunk, no double buffers, and P goes straight to global
// memory, so two CTAs share an SM (about 105 KB each). v takes q's place once m and P are
// computed (q's last reader).
struct PrepSmem {
  union {
    uint16_t q[1][kC][kLdTok];  // [C, K] query rows
    uint16_t v[1][kC][kLdTok];  // [C, V] value rows, after key_products
  };
  uint16_t k[1][kC][kLdTok];    // [C, K] key rows
  union {
    HalfPair t;
    float merge[32][kLdMerge];
  };
  uint16_t xw[kC][kLdCC];
  union {
    float m[kC][kLdF];
    uint16_t w_neg[kC][kLdTok];
  };
  float x[kC][kLdF];
  float G[kC];
  float beta[kC];
  float rq[kC], rk[kC];
};
inline constexpr int kPrepCtasPerSm = 2;
static_assert(offsetof(PrepSmem, x) % 16 == 0 && offsetof(PrepSmem, m) % 16 == 0 && offsetof(PrepSmem, t) % 16 == 0,
              "f32 tiles take float4 loads and float2 stores");

// The wgmma prepare kernel's tiles (sm_90a): one chunk for every value head of a group that
// shares a key head (prep_group_heads). q and k stay for the whole group (the key products are
// formed again for each head's gates), v is the current head's (the next head's lands while
// the key products and the inverse run), all three 128-byte swizzled at 1024-byte boundaries.
// Each later phase's tiles take the space of an earlier phase's dead ones:
//   m (the inverse's f32 input)        then T (gate_inverse writes it once the inverse is done)
//   X (the inverse, f32)               then -W (written once gate_inverse has read X)
//   the inverse's merge scratch        then Xw
// About 106 KB: two CTAs an SM. G_next / beta_next: the next head's gates, formed during the
// inverse's first phase (where warps 4..7 wait).
struct PrepWgSmem {
  uint16_t q[1][kC][kLdTok];  // [C, K] query rows (CoreTiles::Q)
  uint16_t k[1][kC][kLdTok];  // [C, K] key rows (CoreTiles::K)
  uint16_t v[1][kC][kLdTok];  // [C, V] value rows of the current head (CoreTiles::V)
  union {
    float m[kC][kLdF];
    HalfPair t;
  };
  union {
    float x[kC][kLdF];
    uint16_t w_neg[kC][kLdTok];
  };
  union {
    float merge[32][kLdMerge];
    uint16_t xw[kC][kLdCC];
  };
  float G[kC];
  float beta[kC];
  float rq[kC], rk[kC];
  float G_next[kC], beta_next[kC];
};
static_assert(offsetof(PrepWgSmem, k) % 1024 == 0 && offsetof(PrepWgSmem, v) % 1024 == 0 &&
                  offsetof(PrepWgSmem, m) % 16 == 0 && offsetof(PrepWgSmem, x) % 16 == 0 &&
                  offsetof(PrepWgSmem, merge) % 16 == 0,
              "swizzled tiles at 1024-byte boundaries, f32 tiles float4-aligned");
static_assert(2 * (sizeof(PrepWgSmem) + 1024 + 1024) <= 228 * 1024, "two wgmma prepare CTAs an SM");

// Value heads a wgmma prepare CTA takes (all of one key head's, up to kMaxPrepHeads): the
// largest divisor of the ratio Hv / Hk not above it; `forced` > 0 (GDN_CHUNKED_PREP_HEADS)
// takes the largest divisor not above that instead.
inline constexpr int kMaxPrepHeads = 4;
constexpr int prep_group_heads(int64_t ratio, int forced) {
  const int64_t cap = forced > 0 ? forced : kMaxPrepHeads;
  int best = 1;
  for (int g = 1; g <= cap && g <= ratio; ++g)
    if (ratio % g == 0) best = g;
  return best;
}

// One chunk of one value head as the prepare kernel leaves it (global memory, the workspace).
// All C rows are written; padding rows past a sequence's end hold zeros (w_neg, p, uT) and the
// chunk's last cumulative log-decay (G), so the chain needs no mask for them. For the wgmma
// chain (ChunkParams::chain_wgmma) the tiles are in CoreTiles' layouts and PreparedTiles is one
// contiguous run, which it copies to shared memory whole (a bulk copy) and reads there as wgmma
// operands; for the mma.sync chains they are row-major (-W [C][K], P [C][C]).
// For the wgmma chain (runs_wgmma_chain) -W and P are f16, P as one value in p_hi at 2^-p_exp
// times its values (its exponent, chunked_range.cuh; q_f carries the same factor); for the
// mma.sync chains -W is in the inputs' type and P a hi + lo pair, p_exp 0.
struct PreparedTiles {
  uint16_t w_neg[kC * kK];  // -W = -diag(gamma) X diag(beta rk) Kc   [C, K] half precision
  uint16_t p_hi[kC * kC];   // P = Mask o (Qn Kn^T), hi part           [C, C]
  uint16_t p_lo[kC * kC];   // and lo part
  float G[kC];              // cumulative log-decay inside the chunk
  float q_f[kC];            // gamma_t / ||q_t||: o's factor (output_factor, chunked_steps.cuh)
  float k_f[kC];            // exp(G_C - G_t) / ||k_t||: the state update's (state_factor)
  int p_exp;                // pi (above)
  float unused[kC - 1];     // (pads the run to a multiple of 256 bytes)
};
struct PreparedChunk {
  PreparedTiles tiles;
  union {
    float4 u_frags[kV / 16][8][32];  // mma.sync chains: U^T = (T Vc)^T [V, C] f32, as accumulator
                                     // fragments: rows [16 b, +16), token tile t, lane: (row g,
                                     // tokens 8t + 2q, +1), (row g + 8, the same), g = lane / 4,
                                     // q = lane % 4
    uint16_t t_pair[2][kC * kC];     // the wgmma chain: T = hi + lo [C, C] in CoreTiles::T's layout,
                                     // zeros above the diagonal (the chain forms U^T itself)
  };
};
static_assert(sizeof(PreparedTiles) % 256 == 0 && sizeof(PreparedChunk) % 256 == 0,
              "prepared chunks stay 256-byte aligned");

// The chain CTA comes in two shapes, ChunkParams::chain_split CTAs per (sequence, value head):
//  2 (kVSplit): kChainRows = 64 state rows. On sm_90a the wgmma chain (below: one warpgroup,
//    the rows as its m64n128 accumulators; 2.1 us a step). Elsewhere the key-half chain: warp w
//    holds rows [16 (w % 4), +16) and key columns [64 (w / 4), +64) of them (32 f32 registers
//    a thread), so each warp does half the key-dimension products of a fused-kernel warp and a
//    pair of warps adds its two partial sums through shared memory (3.6 us a step). Twice the
//    CTAs: for few long sequences, where SMs would idle.
//  1 (the full chain): all 128 rows; warp w holds rows [16 w, +16) and every key column (64
//    f32 registers, as the fused kernel), no partial sums; U^T comes through shared memory.
//    Half the CTAs, but a step of 5.2 us: without wgmma it pays where the key-half chain would
//    need a second wave and the full one leaves half the SMs to the preparation beside it (1 x
//    32768 at Hv 64).
inline constexpr int kVSplit = 2;                     // chain CTAs per (sequence, value head)
inline constexpr int kChainRows = kV / kVSplit;       // state rows per chain CTA
inline constexpr int kChainRowBlocks = kChainRows / 16;
inline constexpr int kChainWarps = 2 * kChainRowBlocks;
inline constexpr int kChainThreads = 32 * kChainWarps;

// One chunk's tiles in the chain kernel (two stages: the next chunk lands while this one runs).
// U is not here: the warps that need it read it a chunk ahead into registers.
struct ChainStage {
  uint16_t w_neg[kC][kLdTok];  // [C, K] -W
  uint16_t q[kC][kLdTok];      // [C, K] Qc (o staging once the chain has read it)
  uint16_t k[kC][kLdTok];      // [C, K] Kc
  uint16_t p_hi[kC][kLdCC];    // [C, C] P
  uint16_t p_lo[kC][kLdCC];
  float G[kC], q_f[kC], k_f[kC];  // PreparedChunk's
};
// Token blocks (16 tokens each) whose outputs a key half finishes: the triangular D^T P^T costs
// 1, 2, 3, 4 k-steps for blocks 0..3, so halves {0, 3} and {1, 2} take 5 each.
constexpr unsigned key_half_blocks(int kh) { return kh == 0 ? 0x9u : 0x6u; }
// The i-th (0..3) n8 token tile of key half kh's blocks.
constexpr int key_half_tile(int kh, int i) { return kh == 0 ? (i < 2 ? i : 4 + i) : 2 + i; }
inline constexpr int kOStageLd = 16 + 8;  // row stride of a warp's o staging tile (48 B: no store conflicts)

struct ChainSmem {
  ChainStage stage[2];
  float4 partial_d[kChainWarps][8][32];  // a warp's D^T partial sum: 8 tiles x 32 lanes
  float4 partial_o[kChainWarps][4][32];  // its O^T partial sum over the partner's tokens
  uint16_t o_stage[kChainWarps][kC / 2][kOStageLd];  // a warp's o: its 32 tokens x 16 rows
};
// The full chain's stage: ChainStage and U^T of all V rows as the warps' accumulator fragments
// (PreparedChunk::u_frags copied whole); warp w's 4 KB of it become its o staging tile (64 tokens
// x 16 rows) once the warp has read them.
struct ChainStageFull {
  ChainStage base;            // first: its members keep ChainStage's offsets
  float4 u[kV / 16][8][32];  // [V, C] U^T: row block, token tile, lane (PreparedChunk::u_frags)
};
struct ChainSmemFull {
  ChainStageFull stage[2];
};
static_assert(sizeof(uint16_t[kC][kOStageLd]) <= sizeof(float4[8][32]), "a warp's o fits its U fragments");

// The wgmma chain (sm_90a; the same grid as the key-half chain, kVSplit CTAs per (sequence,
// value head), each of one warpgroup): its state rows [64 b, +64) are the m64n128 accumulators of
// the fused kernel's warpgroups (warp w rows [16 w, +16) of them), and every product runs on
// wgmma with its operands in shared memory as they land: Qc and Kc by TMA (swizzled), the
// prepared tiles and the CTA's half of U^T by bulk copies, all on one mbarrier a stage; or, where
// the chain forms U^T = Vc^T T^T itself (ChunkParams::chain_forms_u: never in the sequence
// split), T by a bulk copy and the CTA's 64 columns of Vc by TMA, on a second mbarrier, for a
// warpgroup of its own beside the state's (the U warpgroup, a chunk ahead, into the stage's u).
// o leaves through its own staging tile (64 tokens x the CTA's 64 values, swizzled: one TMA
// box), two of them so that a store's read overlaps the next chunk.
inline constexpr int kWgChainThreads = 128;
// A chain CTA's threads (chunk_chain_wgmma_kernel): three warpgroups, the state's, a second one
// and the copier warp's. The second is the U warpgroup where the chain forms U^T
// (ChunkParams::chain_forms_u), a middle segment's A run in pass 1 of the sequence split, and
// otherwise leaves at once. ptxas budgets registers by whole warpgroups (a warpgroup and a warp
// would get 168 a thread where the state, D and O need more), so the copier's warpgroup lowers its
// registers to kWgCopierRegs and the others raise theirs to kWgPairedChainRegs (setmaxnreg: a warp
// of each in a scheduler's quarter of the register file); its warps but the copier leave at once.
// Where the second warpgroup leaves at once this shape is still the faster one: the chain on 1 x
// 16384 in one pass took 350 us against 369 with a warpgroup and a copier warp of 160 threads
// (launch-bounded to 214 registers), whose loop formed its wgmma descriptors in vector registers
// and moved them over (118 R2UR against 24; fifty-second session, docs/NOTES.md).
inline constexpr int kWgChainCtaThreads = 3 * kWgChainThreads;
constexpr int wg_chain_workers(bool pass1) { return pass1 ? 2 * kWgChainThreads : kWgChainThreads; }
inline constexpr int kWgPairedChainRegs = 232, kWgCopierRegs = 40;  // 2 x 128 x 232 + 128 x 40 <= 65536
struct WgChainStage {
  uint16_t q[kC * kK];  // [C, K] Qc, CoreTiles::Q (128-byte swizzled: the stage at a 1024-byte boundary)
  uint16_t k[kC * kK];  // [C, K] Kc, CoreTiles::K
  PreparedTiles tiles;  // -W, P, G and the factors, as PreparedChunk holds them; P's lo half (not
                        // copied: this chain reads P as one f16 value) holds Vc's columns (wg_chain_v)
  float4 u[kChainRows / 16][8][32];  // U^T of the CTA's rows as the state's accumulator fragments
                                     // (PreparedChunk::u_frags' layout), from the U warpgroup
  uint16_t t_pair[2][kC * kC];       // [C, C] T hi, lo (PreparedChunk::t_pair)
};
// [C, 64] Vc's columns [v0, +64) (the CTA's values), CoreTiles::V's first half: in P's lo half
__host__ __device__ inline uint16_t* wg_chain_v(WgChainStage& st) { return st.tiles.p_lo; }
__host__ __device__ inline const uint16_t* wg_chain_v(const WgChainStage& st) { return st.tiles.p_lo; }
static_assert(sizeof(PreparedTiles::p_lo) == kC * kChainRows * 2 &&
                  (offsetof(WgChainStage, tiles) + offsetof(PreparedTiles, p_lo)) % 1024 == 0,
              "Vc's swizzled columns fit P's lo half, at a 1024-byte boundary");
struct WgChainSmem {
  WgChainStage stage[2];
  uint16_t o_stage[2][kC * 64];  // [C, 64] o of the CTA's values, Swizzle128At<kC>'s first half
  uint64_t full[2];              // stage s has landed (mbarriers), but for
  uint64_t u_full[2];            // its Vc columns and T
};
static_assert(sizeof(WgChainStage) % 1024 == 0 && offsetof(WgChainSmem, o_stage) % 1024 == 0,
              "every swizzled tile of the wgmma chain starts at a 1024-byte boundary");
inline constexpr size_t kWgChainSmemBytes = sizeof(WgChainSmem) + 1024;  // from the first 1024-byte boundary

// The f32-input kernel's tiles (chunked_f32.cu: one chunk, not double buffered; about 225 KB,
// one CTA an SM, with no static shared memory beside it: a block's static and dynamic shared
// memory together may not exceed the 227 KB opt-in). q and k hold their rows' tf32 high parts (the top 19 bits) and q_lo, k_lo the
// f32 remainders, split once a chunk for every warp's products. Rows 136 floats apart (8 banks
// mod 32): the float2 B-fragment reads (row g, columns 2q, 2q + 1) of a half warp fall in 32
// distinct banks; the C x C tiles' rows 72.
inline constexpr int kLdF32Tok = kK + 8;  // [C, 128] f32 tiles
inline constexpr int kLdF32CC = kC + 8;   // [C, C] f32 tiles
struct F32Smem {
  float q[kC][kLdF32Tok];     // [C, K] Qn, high parts (then Y^T's partial sums: F32Partials)
  float k[kC][kLdF32Tok];     // [C, K] Kn, high parts
  float q_lo[kC][kLdF32Tok];  // [C, K] Qn - q (then O^T's partial sums)
  float k_lo[kC][kLdF32Tok];  // [C, K] Kn - k
  float v[kC][kLdF32Tok];     // [C, V / split] the CTA's columns of Vc, then o's staging (token-major)
  float a[kC][kLdF32CC];      // [C, C] A (strictly lower)
  float x[kC][kLdF32CC];      // [C, C] X = (I + A)^-1 (lower; T = X diag(beta) is formed as it is read)
  float p[kC][kLdF32CC];      // [C, C] P = scale (Mask o Qn Kn^T), zeros above the diagonal
  float G[kC], beta[kC];      // chunk_gates
  float gamma[kC];            // exp(G_t)
  float tail[kC];             // exp(G_C - G_t)
};

// The f32 split form's prepare kernel (chunked_f32.cu), two CTAs an SM: the chunk's q and k rows
// in f32 (split into tf32 parts at each use), and once their products are in registers, A, X
// and P over them.
struct F32PrepSmem {
  float rows[2][kC][kLdF32Tok];  // [C, K] Qn, Kn; then [3][C, C] A, X, P
  float G[kC], beta[kC];         // chunk_gates
};
static_assert(3 * kC * kLdF32CC <= 2 * kC * kLdF32Tok, "A, X and P fit over the rows");

// The f32 split form's prepared chunk, one per (chunk slot, value head) of the workspace: the key
// side of the chunk as the fused f32 kernel forms it in shared memory (the same bits), which the
// chain kernel copies in instead of forming it (32 KB).
struct F32PreparedChunk {
  float x[kC][kC];  // [C, C] X = (I + A)^-1, unit lower triangular
  float p[kC][kC];  // [C, C] P = scale (Mask o Qn Kn^T), zeros above the diagonal
};

// The f32 kernel's CTAs per (sequence, value head): each takes V / split of the state's rows and
// forms the chunk's key side (A, X, P: no state) itself, so a second or fourth CTA of a pair
// halves or quarters the state's products at the price of that key side again. Taken only where
// the extra CTAs find idle SMs (one CTA an SM: every pair's CTAs in one wave); `forced` (1, 2
// or 4; GDN_CHUNKED_F32_SPLIT) overrides. Measured: docs/NOTES.md, fifty-sixth session.
inline constexpr int kF32MaxValueSplit = 4;
constexpr int f32_value_split(int64_t pairs, int sms, int64_t forced) {
  if (forced == 1 || forced == 2 || forced == 4) return int(forced);
  for (int s = kF32MaxValueSplit; s > 1; s /= 2)
    if (sms > 0 && pairs * s <= sms) return s;
  return 1;
}

// Whether f32 inputs run in the split form (a prepare kernel forms every chunk's key side at once,
// over all SMs, two CTAs an SM, into the workspace; the chain kernel copies it in) rather than
// fused (each CTA forms its chunks' key side in turn, one CTA an SM, and where a pair's state is
// split over CTAs, each of them the same key side): from a number of chunks a sequence that
// depends on the value split, measured (H200, Hv 32 unless said, `gdn bench`, fused / split ms,
// docs/NOTES.md, fifty-seventh session):
//   four CTAs a pair  N = 1, T = 192 0.062 / 0.064, T = 256 0.085 / 0.080: from 4 chunks;
//   two               N = 2, T = 256 0.092 / 0.095 (Hv 64: 0.090 / 0.100), T = 384 0.128 /
//                     0.124, T = 512 0.167 / 0.150: from 6;
//   one               N = 8, T = 128 0.153 / 0.151, T = 256 0.251 / 0.241; N = 32, T = 64 0.315 /
//                     0.292, T = 128 0.602 / 0.496; 4 x 8192 2.967 / 2.816: from 2 (a single
//                     chunk stays fused: no workspace for the shortest calls).
constexpr int64_t f32_split_min_chunks(int value_split) { return value_split >= 4 ? 4 : value_split == 2 ? 6 : 2; }
constexpr bool f32_split_form(int value_split, int64_t chunks_per_sequence) {
  return chunks_per_sequence >= f32_split_min_chunks(value_split);
}

// The most shared memory any chunked kernel's block takes: a device must allow this much (Hopper:
// 227 KB opt-in).
constexpr size_t max_of(size_t a, size_t b) { return a > b ? a : b; }
inline constexpr size_t kChunkedSmemBytes =
    max_of(max_of(max_of(kFusedSmemBytes, sizeof(ChainSmemFull)), max_of(sizeof(ChainSmem), sizeof(PrepSmem))),
           max_of(kWgChainSmemBytes, sizeof(F32Smem)));
static_assert(kChunkedSmemBytes <= 227 * 1024, "every chunked block fits Hopper's opt-in shared memory");

// Chunk slots of the workspace: dense, sequence n's chunk c is slot n ceil(T / C) + c; packed,
// it is floor(bos_n / C) + n + c, which no other sequence's chunks reach (floor(b / C) +
// ceil(l / C) <= floor((b + l) / C) + 1) and which the host can bound without reading
// cu_seqlens: T_total / C + N + 1 slots.
constexpr int64_t chunk_slots(bool packed, int64_t N, int64_t T, int64_t T_total) {
  return packed ? T_total / kC + N + 1 : N * ((T + kC - 1) / kC);
}

// ---- the exact sequence split (ALGORITHMS.md), on the split form, dense batches
//
// Where even the split form's chain leaves SMs idle (few long sequences, few heads), each
// sequence's chunks are cut into `segments` runs of seg_chunks chunks:
//   pass 1   segment 0 from the true initial state (o written; its end state is segment 1's
//            start); every middle segment m twice, as R_m (from a zero state) and A_m (from
//            the identity with U = 0: the product of its chunks' transitions, K x K);
//   combine  S_start(m + 1) = S_start(m) A_m + R_m, m = 1 .. segments - 2, in f32;
//   pass 2   segments 1 .. segments - 1 from their true start states: o, and the final state.
// Exact algebra: the state after a segment is affine in its start state. The states live in
// the workspace after the prepared chunks: [N, segments, Hv, {R, A, S_start}, V, K] f32.
enum SegState { kSegR = 0, kSegA = 1, kSegStart = 2, kSegStates = 3 };
inline constexpr int kMaxSegments = 64;

// The forgotten start's modes (ChunkParams::forget_mode; chunked_runs.cuh): each head's layout
// by its gates, or every head that layout.
inline constexpr int kForgetByGates = 1, kForgetAlways = 2;

// The combine kernel's CTAs: one per (sequence, value head, block of kCombineRows state rows).
inline constexpr int kCombineRows = 8;

// Chain CTAs of pass 1 per (sequence, value head, row block): segment 0 and two per middle one.
constexpr int pass1_runs(int segments) { return segments < 2 ? 1 : 1 + 2 * (segments - 2); }
// The wgmma chain's pass-1 CTAs per (sequence, value head, row block): segment 0's, and one of
// two warpgroups for each middle segment's two runs (chunk_chain_wgmma_kernel<M, true>).
constexpr int wg_chain_pass1_ctas(int segments) { return segments < 2 ? 1 : segments - 1; }

// The number of segments for `chunks` chunks a sequence when `units` chain CTAs run one
// segment of every sequence: the cheapest by a count of chain-step waves (each pass's CTAs
// over the SMs, times its segment length, plus about one step per combine), 1 unless a split
// saves at least a tenth. `forced` > 0 (GDN_CHUNKED_SEGMENTS) takes that many instead. (The
// count is of pass1_runs: the wgmma chain pairs a middle segment's two runs in one CTA, a step
// as long as a run with o (measured), so its pass 1 is a wave shorter where the runs need two;
// the count chosen for 1 x 32768 at Hv 8, 9, is the cheapest under either count.)
struct SegmentPlan {
  int segments = 1;
  int64_t seg_chunks = 0;
};
// `chunks` cut into about m segments of equal length, none empty (so fewer than m where the
// length rounds up).
constexpr SegmentPlan even_segments(int64_t chunks, int m) {
  const int64_t len = (chunks + m - 1) / m;
  return SegmentPlan{int((chunks + len - 1) / len), len};
}
constexpr SegmentPlan plan_segments(int64_t chunks, int64_t units, int sms, int forced) {
  SegmentPlan best{1, chunks};
  if (chunks < 2 || units <= 0 || sms <= 0) return best;
  const auto waves = [&](int64_t ctas) { return (ctas + sms - 1) / sms; };
  const auto plan = [&](int m) { return even_segments(chunks, m); };
  if (forced > 0) {
    const SegmentPlan f = plan(forced < kMaxSegments ? forced : kMaxSegments);
    return f.segments >= 2 ? f : best;
  }
  const double unsplit = double(waves(units) * chunks);
  double best_cost = unsplit;
  for (int m = 2; m <= kMaxSegments; ++m) {
    const SegmentPlan s = plan(m);
    if (s.segments < 2) continue;
    const double cost = double((waves(pass1_runs(s.segments) * units) + waves((s.segments - 1) * units)) *
                               s.seg_chunks) + double(s.segments - 2);
    if (cost < best_cost && cost < 0.9 * unsplit) best_cost = cost, best = s;
  }
  return best;
}

// The sequence split for f32 inputs (chunked_f32.cu, on the f32 split form; dense batches
// without checkpoints): pass 1's runs write no o (no Qn S^T, D P^T, P or o: cheaper steps) at
// pass1_split CTAs a run, and pass 2 runs every segment, segment 0 again, at value_split (pass 1's
// role 0 leaves the initial state's copy for it). Chosen by the chain's time as a count of waves
// (one CTA an SM) times a segment's steps at kF32StepUs (by CTAs a run; with o, without), plus
// kF32CombineStepUs a middle segment, against the unsplit chain's at unsplit_value_split; taken
// where it saves at least a tenth (the passes' launches and state loads are not counted: they
// are a step or two). Forced (> 0): segments (GDN_CHUNKED_SEGMENTS; 1: none), the passes' CTAs a
// run (GDN_CHUNKED_F32_PASS1_SPLIT, GDN_CHUNKED_F32_SPLIT). The step times are the H200's
// (Nsight Compute, 1 x 32768 at Hk / Hv 2 / 8, one wave a pass: the pass's time over its
// segment's chunks; docs/NOTES.md, fifty-eighth session); the choices they make were the fastest
// of the sweep there (2/8: 16 segments at one CTA a run in both passes, 1.42 ms against 4.95
// unsplit; 9 segments 1.74, 32 segments 1.47, 16 at two CTAs a run in either pass 1.63 and 1.65),
// and one sequence at Hv 32 or 64 stays unsplit (1 x 4096: unsplit 0.706 ms, the best split 0.736;
// 1 x 16384 2.717, 2.769; Hv 64 7.06, 8.07).
struct F32StepUs {
  int split;
  double with_o, without_o;
};
inline constexpr F32StepUs kF32StepUs[] = {{1, 16.9, 10.9}, {2, 12.1, 7.2}, {4, 9.4, 5.2}};
inline constexpr double kF32CombineStepUs = 2.0;
struct F32SegmentPlan {
  SegmentPlan seg;
  int pass1_split = 1;
  int value_split = 1;  // pass 2's (or the unsplit chain's)
};
constexpr F32SegmentPlan plan_f32_segments(int64_t chunks, int64_t pairs, int sms, int unsplit_value_split,
                                           int forced_segments, int forced_pass1, int forced_pass2) {
  F32SegmentPlan best{{1, chunks}, 1, unsplit_value_split};
  if (chunks < 2 || pairs <= 0 || sms <= 0 || forced_segments == 1) return best;
  const auto waves = [&](int64_t ctas) { return double((ctas + sms - 1) / sms); };
  const auto step = [](int split, bool with_o) {
    for (const F32StepUs& t : kF32StepUs)
      if (t.split == split) return with_o ? t.with_o : t.without_o;
    return 1e30;
  };
  const auto forced_ok = [](int forced, int split) { return forced <= 0 || forced == split; };
  const double unsplit = waves(pairs * unsplit_value_split) * double(chunks) * step(unsplit_value_split, true);
  double best_cost = forced_segments > 1 ? 1e300 : 0.9 * unsplit;
  for (int m = 2; m <= kMaxSegments; ++m) {
    const SegmentPlan sp = even_segments(chunks, m);
    const int64_t len = sp.seg_chunks;
    if (sp.segments < 2 || (forced_segments > 1 && m != (forced_segments < kMaxSegments ? forced_segments : kMaxSegments)))
      continue;
    for (const F32StepUs& t1 : kF32StepUs)
      for (const F32StepUs& t2 : kF32StepUs) {
        if (!forced_ok(forced_pass1, t1.split) || !forced_ok(forced_pass2, t2.split)) continue;
        const double cost = waves(pass1_runs(sp.segments) * pairs * t1.split) * double(len) * t1.without_o +
                            waves(sp.segments * pairs * t2.split) * double(len) * t2.with_o +
                            double(sp.segments - 2) * kF32CombineStepUs;
        if (cost < best_cost) best_cost = cost, best = F32SegmentPlan{sp, t1.split, t2.split};
      }
  }
  return best;
}

// The split form's workspace grows with T x Hv (about 1 KB per token and value head). Above
// kMaxSplitWorkspaceBytes a dense call runs in windows (below) whose two buffers fit it. Calls
// that prepare every chunk at once because they cannot use windows (packed batches: their
// lengths are in device memory; the sequence split) may take up to kMaxOnePassWorkspaceBytes
// (2^20 tokens at Hv = 2: 2.2 GB); above it they run unsplit in windows (the sequence split)
// or fused, without workspace (packed), unless GDN_CHUNKED_FORM=split asks for the split form.
inline constexpr size_t kMaxSplitWorkspaceBytes = size_t(1) << 30;
inline constexpr size_t kMaxOnePassWorkspaceBytes = size_t(4) << 30;

// ---- windows (dense batches, the split form without a sequence split)
//
// The chunks of every sequence are cut into windows of window_chunks chunks: prepare(w) writes
// window w's prepared chunks into buffer w % 2 of the workspace, chain(w) runs them, starting
// from the state chain(w - 1) left in the workspace (f32: the same numbers as one chain). Two
// uses:
//  - the workspace is bounded by two windows, not the whole call;
//  - overlap: when the chain leaves most SMs idle (its CTAs at most half the SMs), chain(w)
//    runs on a second, high-priority stream beside prepare(w + 1) on the caller's, so the
//    preparation (about 0.033 us a chunk and head over the whole GPU) hides behind the chain
//    (1.37 us a chunk) instead of preceding it. The first window's preparation is the only exposed
//    one, and each window costs a gap (the chain's launch, its state and first chunk loads), so
//    the window length W (chunks) is the one that minimises
//        W a + ceil(chunks / W) kWindowGapUs,   a = heads kPrepSmUsPerChunkHead / SMs
//    (a: one chunk of every head prepared over the whole GPU), over multiples of
//    kWindowChunkStep up to half the chunks (at least two windows) and at most
//    kMaxOverlapWindows windows. Fitted to the fiftieth session's sweep (same run, ms): 1 x 65536
//    (Hv 32) windows of 32, 48, 64, 96, 128 chunks 2.42, 2.25, 2.18, 2.14, 2.14; 1 x 16384 32, 64,
//    128: 0.623, 0.582, 0.610; 1 x 4096 32, 64: 0.175, 0.181; and again for 1 x 65536, 64, 96,
//    128: 2.18 to 2.19, 2.138 to 2.139, 2.158 to 2.184. The rule takes 96, 64 and 32 there (the
//    fixed 64 before it: 1 x 65536 2% slower; the eighth session's 1 x 65536 had measured 8 to
//    64 chunks, best at 64, with kernels about twice as slow).
inline constexpr int kWindowBuffers = 2;
inline constexpr int64_t kMinOverlapChunks = 64;   // fewer: one pass
inline constexpr int64_t kMaxOverlapWindows = 64;  // more chunks: longer windows
inline constexpr int64_t kWindowChunkStep = 32;
inline constexpr double kWindowGapUs = 10;            // a window's gap (fitted to the sweeps above)
inline constexpr double kPrepSmUsPerChunkHead = 4.35;  // the wgmma prepare kernel's SM time a chunk and head
// (writing U^T. Since the fifty-third session the chain forms U^T beside overlapped windows too,
// and the prepare kernel writing T takes about 3.5; with that figure the rule would take 128
// chunks for 1 x 65536, measured within the spread of 96's, 2.032 to 2.049 against 2.047 to
// 2.052 ms, for a third more workspace: the fitted 4.35 stays.)

struct WindowPlan {
  int64_t window_chunks = 0;  // 0: no windows
  int64_t windows = 0;
  bool overlap = false;
};

// chain_ctas: N Hv kVSplit; bytes_per_chunk_of_all: N Hv sizeof(PreparedChunk); carry_bytes:
// the f32 states between windows, N Hv V K 4 (the workspace holds both buffers and them).
constexpr WindowPlan plan_windows(int64_t chunks, int64_t chain_ctas, int sms, size_t bytes_per_chunk_of_all,
                                  size_t carry_bytes) {
  WindowPlan w;
  if (chunks <= 0 || bytes_per_chunk_of_all == 0 || carry_bytes >= kMaxSplitWorkspaceBytes) return w;
  const int64_t fit = int64_t((kMaxSplitWorkspaceBytes - carry_bytes) / (kWindowBuffers * bytes_per_chunk_of_all));
  if (sms > 0 && 2 * chain_ctas <= sms && chunks >= kMinOverlapChunks) {
    const double heads = double(bytes_per_chunk_of_all / sizeof(PreparedChunk));
    const double exposed = heads * kPrepSmUsPerChunkHead / double(sms);  // us a window chunk (the first window)
    const int64_t longest = (chunks + 1) / 2 < fit ? (chunks + 1) / 2 : fit;
    const int64_t shortest = (chunks + kMaxOverlapWindows - 1) / kMaxOverlapWindows;
    double best = 0;
    for (int64_t step = kWindowChunkStep; longest >= shortest; step += kWindowChunkStep) {
      const int64_t wc = step < longest ? step : longest;
      const double cost = double(wc) * exposed + double((chunks + wc - 1) / wc) * kWindowGapUs;
      if (wc >= shortest && (!w.overlap || cost < best)) w.window_chunks = wc, w.overlap = true, best = cost;
      if (wc == longest) break;
    }
  }
  if (!w.overlap) {
    if (size_t(chunks) * bytes_per_chunk_of_all <= kMaxSplitWorkspaceBytes || fit < 1) return w;
    w.window_chunks = fit;
  }
  w.windows = (chunks + w.window_chunks - 1) / w.window_chunks;
  return w;
}

// Which form runs a call: the cheapest by a cost model per chunk step of the longest chain (us,
// H200, measured: docs/NOTES.md).
//   fused      one CTA per (sequence, value head): fused_step_us(wgmma) per wave of CTAs.
//   split(s)   s chain CTAs per (sequence, value head) (chunked_tile.h's chain shapes): the
//              prepare kernel's CTAs for every chunk of every head (prep_cta_us each,
//              kPrepCtasPerSm per SM), then chain_step_us(s, wgmma) per wave of chain CTAs; or,
//              where the window plan would overlap them (overlaps(s): plan_windows' own answer
//              for that chain), the slower of the chain (a little slower beside the preparation)
//              and the preparation on the SMs the chain leaves.
// The windows may still run one after the other at run time (a graph capture, no side stream
// free): the call then takes serial_chain_split, the best chain without overlap (the full chain
// pays only beside the preparation). The sequence split (plan_segments) runs the two-CTA chain.
// Measured in one pass (Nsight Compute, 1 x 16384, Hv 32: 8192 prepare CTAs, 256 chain steps;
// thirteenth session): prepare 344 us, the wgmma chain 541, the key-half chain 927, the full
// chain 1,331, the fused kernel 1,918.
// Where the wgmma chain runs (sm_90a), the fused form is the warp-specialised kernel and the
// two-CTA chain has its copier warp: kFusedWsStepUs and kWgChainStepUs are the twenty-fourth
// session's figures, checked at the boundary (gdn bench, each form forced, 8192 tokens a sequence,
// Hk/Hv 4/8: split against fused 0.428 / 0.648 ms at 48 pairs, 0.503 / 0.646 at 64, 0.741 / 0.652
// at 72, 0.829 / 0.655 at 96; the model's estimates 3.97 and 5.78 us a chunk at 64 and 72 pairs
// against 3.93 and 5.79 measured; bench/results/2026-12-01-session24/form-boundary.json). The
// constants before them took the split form at 72 pairs, 11% slower. The twenty-eighth session's
// fused kernel (two preparing warpgroups) takes 0.617 ms on 4 x 8192 against 0.660: the fused
// form there is about 7% faster, which moves no choice at those points (scaled by 0.93, the
// fused form's 0.646 and 0.652 ms become about 0.60 and 0.61: still behind the split form's
// 0.503 at 64 pairs, still ahead of its 0.741 at 72; not measured at the boundary again).
// kFusedStepUs (the one-role fused kernel) is the twelfth session's figure, for GPUs without
// wgmma.
inline constexpr double kFusedStepUs = 7.6;        // 4 x 8192: 0.974 ms over 128 chunks (twelfth session)
inline constexpr double kFusedWsStepUs = 4.8;      // warp-specialised: 4 x 8192 0.617 ms over 128 chunks
                                                   // (two preparing warpgroups, twenty-eighth session)
inline constexpr double kPrepCtaUs = 11.1;         // 344 us x 132 SMs x 2 CTAs / 8192 (368 us for the mma.sync chains' layout)
inline constexpr double kPrepWgmmaCtaUs = kPrepSmUsPerChunkHead * kPrepCtasPerSm;  // 8.7: the wgmma chain's prepare
                                                   // kernel, 271 us (twenty-sixth session)
inline constexpr double kWgChainStepUs = 1.4;      // the wgmma chain (sm_90a): 350 us / 256 (three warpgroups,
                                                   // fifty-second session; 377 with a copier warp alone)
inline constexpr double kChainStepUs = 3.6;        // the key-half chain: 927 us / 256
inline constexpr double kFullChainStepUs = 5.2;    // the full chain: 1,331 us / 256
inline constexpr double kOverlapSlowdown = 1.08;   // the chain beside the preparation (1 x 65536)
// wgmma: the two-CTA shape runs the wgmma chain (compute capability 9.x, ChunkParams::chain_wgmma),
// whose chunks the wgmma prepare kernel prepares.
constexpr double chain_step_us(int chain_split, bool wgmma) {
  return chain_split == 1 ? kFullChainStepUs : wgmma ? kWgChainStepUs : kChainStepUs;
}
constexpr double fused_step_us(bool wgmma) { return wgmma ? kFusedWsStepUs : kFusedStepUs; }
constexpr double prep_cta_us(int chain_split, bool wgmma) {
  return chain_split != 1 && wgmma ? kPrepWgmmaCtaUs : kPrepCtaUs;
}

struct FormChoice {
  bool split = false;
  int chain_split = kVSplit;         // with the windows overlapped where the plan overlaps them
  int serial_chain_split = kVSplit;  // when they run one after the other
  double us_per_chunk = 0;           // the model's cost (for the tests)
};
// overlaps(s): whether the window plan overlaps the chain of s CTAs per pair with the preparation.
// full_chain false: the two-CTA chain only (calls with state checkpoints, which the wgmma chain
// stores and the full chain does not).
template <class Overlaps>
constexpr FormChoice choose_form(int64_t sequence_heads, int sms, bool wgmma_chain, Overlaps overlaps,
                                 bool full_chain = true) {
  FormChoice best;
  if (sms <= 0 || sequence_heads <= 0) return best;
  const auto waves = [&](int64_t ctas) { return double((ctas + sms - 1) / sms); };
  best.us_per_chunk = waves(sequence_heads) * fused_step_us(wgmma_chain);
  double best_serial = 1e300;
  for (int split : {kVSplit, 1}) {
    if (split == 1 && !full_chain) break;
    const int64_t ctas = sequence_heads * split;
    const double prep_all = double(sequence_heads) * prep_cta_us(split, wgmma_chain) / double(sms * kPrepCtasPerSm);
    const double serial = prep_all + waves(ctas) * chain_step_us(split, wgmma_chain);
    double cost = serial;
    if (overlaps(split) && 2 * ctas <= sms) {
      const double prep_beside =
          double(sequence_heads) * prep_cta_us(split, wgmma_chain) / double((sms - ctas) * kPrepCtasPerSm);
      const double chain = chain_step_us(split, wgmma_chain) * kOverlapSlowdown;
      const double overlapped = chain > prep_beside ? chain : prep_beside;
      if (overlapped < cost) cost = overlapped;
    }
    if (serial < best_serial) best_serial = serial, best.serial_chain_split = split;
    if (cost < best.us_per_chunk) best.split = true, best.chain_split = split, best.us_per_chunk = cost;
  }
  if (!best.split) best.serial_chain_split = kVSplit;
  return best;
}

}  // namespace gdn::cuda::chunked

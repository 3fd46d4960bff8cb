// The chunked (WY / UT-transform) prefill kernel's tile: chunk length, warps, shared-memory
// layout, and the auto-path crossover. Host and device code read it; the choices and their
// reasons live in chunk_tile() and auto_prefers_chunked() alone.
// Letters as in SPEC.md: N sequences, T tokens, Hk / Hv heads, K / V head dims, C chunk length.
#pragma once

#include <cstddef>
#include <cstdint>

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

// Path auto takes the chunked kernel from this many tokens per sequence (dense: T; packed: the
// mean T_total / N, since the host cannot read cu_seqlens). Measured (bench/bench_prefill.py
// --crossover, H200, N = 32, Hv = 32, bf16, results in bench/results/*-prefill-longest-first.json):
// recurrent 0.104 / 0.191 / 0.368 ms against chunked 0.181 / 0.183 / 0.184 ms at T = 8 / 16 / 32.
// The recurrent kernel costs one state pass plus about 11 us a token, the chunked one a chunk
// step (13.4 us) per wave whatever T <= 64 is; both scale with N Hv alike, so the crossover
// (between 8 and 16 tokens) does not move with the batch.
inline constexpr int64_t kAutoMinTokens = 16;
constexpr bool auto_prefers_chunked(int64_t tokens_per_sequence) {
  return tokens_per_sequence >= kAutoMinTokens;
}

// Shared memory of one block (uint16_t: bf16 or f16 bits, the kernel's input dtype). About
// 197 KB: the kernel needs a device whose opt-in block limit is at least that (Hopper: 227 KB).
struct HalfPair {  // a [C, C] matrix as hi + lo half-precision parts (x = hi + lo to ~2^-16)
  uint16_t hi[kC][kLdCC];
  uint16_t lo[kC][kLdCC];
};

struct Smem {
  uint16_t q[2][kC][kLdTok];  // [C, K] query rows of the chunk (double-buffered); o staging
  uint16_t k[2][kC][kLdTok];  // [C, K] key rows
  uint16_t v[2][kC][kLdTok];  // [C, V] value rows
  HalfPair p;                 // [C, C] P = Mask o (Qn Kn^T)
  union {
    HalfPair t;               // [C, C] T = Mask o (X diag(beta))
    float merge[32][32 + 4];  // before T: scratch of the inverse's block merges
  };
  HalfPair xw;                // [C, C] X diag(beta rk): W's left factor
  union {
    float m[kC][kLdF];           // [C, C] strictly lower diag(beta) Kn Kn^T (f32)
    uint16_t w_neg[kC][kLdTok];  // [C, K] -W, once the inverse no longer needs m
  };
  float x[kC][kLdF];          // [C, C] X = (I + m)^-1, unit lower triangular (f32)
  float G[kC];                // cumulative log-decay inside the chunk
  float beta[kC];
  float rq[kC], rk[kC];       // 1 / ||q_t||, 1 / ||k_t|| (1 without qk_l2norm)
};

inline constexpr size_t kSmemBytes = sizeof(Smem);
static_assert(sizeof(float[kC][kLdF]) >= sizeof(uint16_t[kC][kLdTok]), "w_neg must fit in m");

}  // namespace gdn::cuda::chunked

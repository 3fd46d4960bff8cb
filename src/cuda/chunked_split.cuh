// The split form of the chunked prefill (chunked_tile.h says when it runs): two kernels with
// the workspace between them, one after the other on the caller's stream, or per window of
// chunks (the chain of window w beside the preparation of window w + 1: chunked_host.cpp).
//   prepare  one CTA of 8 warps per (chunk slot, value head), all chunks at once, two CTAs an
//            SM: the state-independent steps of chunked_steps.cuh (gates, norms, m and P, the
//            inverse, T, -W, U), written out as a PreparedChunk; for the wgmma chain with the
//            fused kernel's wgmma products (chunk_prepare_wgmma_kernel), else on mma.sync.
//   chain    per (sequence, value head, block of kChainRows state rows): on sm_90a the wgmma
//            chain, one warpgroup whose m64n128 accumulators hold the rows' f32 state, its
//            chunk's tiles landing by bulk copies and TMA; elsewhere (or GDN_CHUNKED_CHAIN=mma)
//            the key-half chain, kChainWarps warps with the state split over two warps by key
//            columns, copying by cp.async. Per chunk: D = U - W S^T, O, the next state. (The
//            sequence split's pass 1 on wgmma runs a middle segment's two runs in one CTA of two
//            warpgroups.)
//            (The full chain, one CTA of all 128 rows on mma.sync, is the third shape.)
//   combine  the sequence split's segment start states, between its two chain passes.
// The roundings are the fused kernel's, step for step; only the order of some f32 sums differs
// (the key-half chain sums the two key halves apart, then adds them). The prepared tiles' layout
// follows the chain that runs (runs_wgmma_chain). Included by one .cu per input dtype.
#pragma once

#include <cstdlib>
#include <type_traits>

#include "cuda/chunked_combine.cuh"
#include "cuda/chunked_runs.cuh"
#include "cuda/chunked_slots.cuh"
#include "cuda/chunked_steps.cuh"
#include "cuda/chunked_wgmma.cuh"
#include "cuda/tma.cuh"

namespace gdn::cuda::chunked {

// Whether the chain that runs is the wgmma one (the key-half shape with chain_wgmma; the prepare
// kernel lays the prepared tiles out for it).
__host__ __device__ __forceinline__ bool runs_wgmma_chain(const ChunkParams& p) {
  return p.chain_wgmma && p.chain_split == kVSplit;
}

// ---- prepare

// The chunk a prepare CTA works on (chunk slot blockIdx.x, value head h), or false for a slot
// no chunk uses, a flagged sequence, or padding (the chain writes its zeros).
struct PrepChunk {
  int h, j;  // value head, key / query head
  int64_t n, c, tok0;
  int rows;  // live rows of the chunk
  Sequence sq;
  PreparedChunk* out;
};
__device__ __forceinline__ PreparedChunk* prepared_chunk(const ChunkParams& p, int h) {
  return static_cast<PreparedChunk*>(p.prepared) + int64_t(blockIdx.x) * p.Hv + h;
}
// The CTA's chunk in two steps: its slot's owner (sequence n, chunk c: arithmetic alone for a
// dense batch), then the sequence's index checks (a state pool's entry: a load) and span.
__device__ __forceinline__ bool prep_chunk_owner(const ChunkParams& p, PrepChunk& pc, int h) {
  pc.h = h;
  pc.j = p.tiled ? pc.h % p.Hk : pc.h / p.ratio;
  pc.n = pc.c = 0;
  return slot_owner(p, int64_t(blockIdx.x), pc.n, pc.c);
}
__device__ __forceinline__ bool prep_chunk_resolve(const ChunkParams& p, PrepChunk& pc) {
  if (!resolve_sequence(p, pc.n, pc.sq) || pc.sq.slot < 0) return false;
  pc.tok0 = pc.sq.bos + pc.c * kC;
  pc.rows = int(pc.sq.len - pc.c * kC < kC ? pc.sq.len - pc.c * kC : kC);
  pc.out = prepared_chunk(p, pc.h);
  return true;
}
__device__ __forceinline__ bool prep_chunk(const ChunkParams& p, PrepChunk& pc, int h) {
  return prep_chunk_owner(p, pc, h) && prep_chunk_resolve(p, pc);
}

// Value head i (0 .. p.prep_heads - 1) of the wgmma prepare CTA's group blockIdx.y: the group's
// heads share one key head (p.prep_heads divides the ratio). Block map: heads j ratio ..
// j ratio + ratio - 1 of key head j, in groups of prep_heads; tiled: heads j, j + Hk, ...
__device__ __forceinline__ int prep_group_head(const ChunkParams& p, int i) {
  const int y = int(blockIdx.y);
  if (!p.tiled) return y * p.prep_heads + i;
  return y % p.Hk + p.Hk * ((y / p.Hk) * p.prep_heads + i);
}

// The mma.sync prepare kernel's chunk start: q and k rows in flight by cp.async, the gates
// formed by warp 0, rq and rk 1 without the L2 norm.
__device__ __forceinline__ void prep_chunk_start(const ChunkParams& p, const PrepChunk& pc, PrepSmem& s, int tid,
                                                 int warp, int lane) {
  if (!p.l2norm && tid < kC) s.rq[tid] = s.rk[tid] = 1.f;
  load_token_rows<kThreads>(p.q, pc.n, pc.tok0, pc.rows, pc.j, &s.q[0][0][0], tid);
  load_token_rows<kThreads>(p.k, pc.n, pc.tok0, pc.rows, pc.j, &s.k[0][0][0], tid);
  cp_async_commit();
  if (warp == 0)
    chunk_gates(p, s.G, s.beta, head_gate(p, pc.h), load_raw_gates(p, pc.n, pc.sq, pc.h, pc.c, lane), pc.rows, lane);
}

// G and the chain's per-token factors (chunked_steps.cuh's expressions) into the prepared chunk.
template <class Sm>
__device__ __forceinline__ void store_prepared_factors(const Sm& s, PreparedTiles& out, int tid, int p_exp = 0) {
  if (tid < kC) {
    const ChainTiles own{nullptr, nullptr, nullptr, nullptr, nullptr, s.G, s.rq, s.rk};
    out.G[tid] = s.G[tid];
    out.q_f[tid] = output_factor<false>(own, tid) * pow2(-p_exp);  // (P at 2^-p_exp: PreparedTiles)
    out.k_f[tid] = state_factor<false>(own, s.G[kC - 1], tid);
  }
}

// P's exponent for the wgmma chain's f16 P (PreparedTiles), from each warp's largest |P| in
// p_max (after the barrier that follows their stores). Without qk_l2norm only: with it, |P| <= 1
// (the prepared P carries no scale).
__device__ __forceinline__ int prepared_p_exponent(const float* p_max) {
  float m = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m = fmaxf(m, p_max[w]);
  return p_exponent(m);
}

template <class M>
__global__ void __launch_bounds__(kThreads, kPrepCtasPerSm) chunk_prepare_kernel(const __grid_constant__ ChunkParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  PrepSmem& s = *reinterpret_cast<PrepSmem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  PrepChunk pc;
  if (!prep_chunk(p, pc, int(blockIdx.y))) return;
  const int64_t n = pc.n, tok0 = pc.tok0;
  const int h = pc.h, rows = pc.rows;
  PreparedChunk& out = *pc.out;
  prep_chunk_start(p, pc, s, tid, warp, lane);
  cp_async_wait<0>();
  __syncthreads();
  if (p.l2norm) {
    row_norms<M>(s, 0, warp, lane);
    __syncthreads();
  }
  key_products<M, PrepareForMmaTiles>(s, 0, warp, lane, out.tiles.p_hi, out.tiles.p_lo, s.G, s.beta);
  __syncthreads();  // q is read: v takes its place, landing while the inverse runs
  if (tid == 0) out.tiles.p_exp = 0;
  load_token_rows<kThreads>(p.v, n, tok0, rows, h, &s.v[0][0][0], tid);
  cp_async_commit();
  invert_unit_lower(s, warp, lane);
  __syncthreads();
  gate_inverse<M>(s, tid);
  cp_async_wait<0>();
  __syncthreads();
  float D[8][4];  // U^T of the chunk: [16 value rows, C tokens]
  minus_w<M>(s, 0, warp, lane);
  new_values<M>(s, 0, warp, lane, D);
#pragma unroll
  for (int t = 0; t < 8; ++t)  // U^T as this warp's accumulator fragments (512-byte warp stores)
    out.u_frags[warp][t][lane] = make_float4(D[t][0], D[t][1], D[t][2], D[t][3]);
  __syncthreads();  // -W is complete
#pragma unroll
  for (int i = 0; i < kC * kK / 8 / kThreads; ++i) {  // piece idx is the prepared tile's 16 bytes idx
    const int idx = tid + kThreads * i;
    *reinterpret_cast<uint4*>(&out.tiles.w_neg[8 * idx]) = *reinterpret_cast<const uint4*>(&s.w_neg[idx >> 4][8 * (idx & 15)]);
  }
  store_prepared_factors(s, out.tiles, tid);
}

// The prepare kernel for the wgmma chain (sm_90a; runs_wgmma_chain): the fused kernel's
// preparation of one chunk for p.prep_heads value heads of one key head (prep_group_head), one
// after the other. q and k land once for them all, v for each head (the first head's issued
// after its key products, as q and k's landing waits on nothing else; each next head's after
// the head before's U, landing while the next key products and the inverse run), all
// swizzled (CoreTiles) by TMA, one thread issuing the boxes
// (the fused kernel's maps; a packed sequence's partial chunk, or views TMA cannot describe, by
// cp.async as the fused kernel copies them). Per head: Kc Kc^T and Qc Kc^T on wgmma again (a
// few tensor instructions: the f32 products would not fit beside the rest in registers) and
// their epilogue with the head's gates, the inverse, T and Xw, -W and U on wgmma
// (wgmma_minus_w_new_values). P goes straight to the prepared chunk, -W is already in its
// layout (one contiguous copy), U^T's accumulators are the mma.sync kernel's fragments. The
// same sums as the mma.sync kernel above, but the
// inverse's merges take f16 operands on one warpgroup (merge_inverse_blocks_mma, as the
// warp-specialised fused kernel's; as 3xTF32 products they took 15.6% of this kernel's samples,
// Nsight Compute, fourteenth session, and the split cases 3 to 4% longer, twenty-sixth). Two
// instances: kGroup for p.prep_heads > 1, and one head a CTA (without the loop's live values:
// fewer registers). kWritesT (ChunkParams::chain_forms_u): T's halves to the prepared chunk
// instead of U^T, and no v (the chain's U warpgroup forms U^T = Vc^T T^T).
template <class M, bool kGroup, bool kWritesT>
__global__ void __launch_bounds__(kThreads, kPrepCtasPerSm)
    chunk_prepare_wgmma_kernel(const __grid_constant__ ChunkParams p, const __grid_constant__ TileMaps maps) {
#if GDN_CHUNKED_WGMMA
  extern __shared__ __align__(128) unsigned char smem_raw[];
  PrepWgSmem& s = *reinterpret_cast<PrepWgSmem*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
  __shared__ uint64_t landed[2];  // q and k have landed (one phase); v (a phase a head)
  __shared__ float p_max[kWarps];  // each warp's largest |P| (without qk_l2norm)
  const int tid = threadIdx.x, warp = __shfl_sync(0xffffffffu, tid >> 5, 0), lane = tid & 31;  // warp: known uniform
  constexpr int kGateWarp = 4;  // forms the next head's gates while warps 0..3 substitute
  PrepChunk pc;
  if (!prep_chunk_owner(p, pc, prep_group_head(p, 0))) return;
  constexpr uint32_t kBoxBytes = kC * 64 * 2;
  // q and k of the chunk's key head by TMA onto landed[0] (thread 0)
  const auto load_q_k = [&](int seq, int tok) {
    mbarrier_init(&landed[0], 1);
    mbarrier_init(&landed[1], 1);
    fence_mbarrier_init();
    mbarrier_arrive_expect(&landed[0], 4 * kBoxBytes);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      tma_load_4d(&s.q[0][0][0] + half * kC * 64, &maps.q, &landed[0], 64 * half, pc.j, tok, seq);
      tma_load_4d(&s.k[0][0][0] + half * kC * 64, &maps.k, &landed[0], 64 * half, pc.j, tok, seq);
    }
  };
  // A dense batch's boxes go out before the sequence's checks, their latency beside those and
  // the gates (Nsight Compute had 22% of the one-head instance's samples at the wait for them
  // and 16% before they were issued; measured: the split cases 0.1 to 0.6% faster, so the wait
  // is mostly the loads' own latency); a sequence that then writes nothing (padding, an invalid
  // pool entry) waits for them before it leaves.
  const bool early = maps.on && !p.cu_seqlens;
  if (early && tid == 0) load_q_k(int(pc.n), int(pc.c * kC));
  if (!prep_chunk_resolve(p, pc)) {
    if (early && tid == 0) mbarrier_wait(&landed[0], 0u);
    return;
  }
  const int heads = kGroup ? p.prep_heads : 1;
  const bool tma = maps.on && !(p.cu_seqlens && pc.rows < kC);  // uniform over the CTA
  const int seq = p.cu_seqlens ? 0 : int(pc.n), tok = int(pc.tok0);  // the maps' coordinates
  // head h's v rows into s.v (TMA: on landed[1], by thread 0); none with kWritesT
  const auto load_v = [&](int h) {
    if constexpr (kWritesT) {
      if (!tma) cp_async_commit();
    } else if (!tma) {
      load_token_rows<kThreads, CoreTiles::V>(p.v, pc.n, pc.tok0, pc.rows, h, &s.v[0][0][0], tid);
      cp_async_commit();
    } else if (tid == 0) {
      mbarrier_arrive_expect(&landed[1], 2 * kBoxBytes);
#pragma unroll
      for (int half = 0; half < 2; ++half)
        tma_load_4d(&s.v[0][0][0] + half * kC * 64, &maps.v, &landed[1], 64 * half, h, tok, seq);
    }
  };
  if (!p.l2norm && tid < kC) s.rq[tid] = s.rk[tid] = 1.f;
  if (tma) {
    if (!early && tid == 0) load_q_k(seq, tok);
  } else {
    load_token_rows<kThreads, CoreTiles::Q>(p.q, pc.n, pc.tok0, pc.rows, pc.j, &s.q[0][0][0], tid);
    load_token_rows<kThreads, CoreTiles::K>(p.k, pc.n, pc.tok0, pc.rows, pc.j, &s.k[0][0][0], tid);
    load_v(pc.h);  // one commit group with q and k
  }
  if (warp == 0) chunk_gates(p, s.G, s.beta, head_gate(p, pc.h), load_raw_gates(p, pc.n, pc.sq, pc.h, pc.c, lane), pc.rows, lane);
  if (tma) {
    __syncthreads();  // the mbarriers are initialised before anyone waits on them
    mbarrier_wait(&landed[0], 0u);
  } else {
    cp_async_wait<0>();
    fence_shared_for_wgmma();  // this thread's q, k, v copies -> wgmma
  }
  __syncthreads();
  if (p.l2norm) {
    row_norms<M, CoreTiles>(s, 0, warp, lane);
    __syncthreads();
  }
  for (int i = 0; i < heads; ++i) {
    const int h = i == 0 ? pc.h : prep_group_head(p, i);
    const int h_next = i + 1 < heads ? prep_group_head(p, i + 1) : h;
    PreparedChunk& out = *prepared_chunk(p, h);
    RawGates gates_next;  // kGateWarp: the next head's gate inputs, in flight through the products
    if (warp == kGateWarp && i + 1 < heads) gates_next = load_raw_gates(p, pc.n, pc.sq, h_next, pc.c, lane);
    int p_exp = 0;  // P in f16 at 2^-p_exp (PreparedTiles)
    {
      float kk[4][4], qk[4][4];
      wgmma_key_products_issue<M>(s, 0, warp, kk, qk);
      if (i > 0) __syncthreads();  // the head's G and beta (kGateWarp, the head before's end)
      wgmma_wait<0>();
      float p_absmax = 0.f;
      wgmma_key_products_store<M, true, !kGroup>(s, warp, lane, kk, qk, out.tiles.p_hi, out.tiles.p_lo, s.G, s.beta,
                                                 1.f, &p_absmax);
      if (!p.l2norm) {
        p_absmax = warp_max(p_absmax);
        if (lane == 0) p_max[warp] = p_absmax;
      }
      __syncthreads();  // m is complete
      p_exp = p.l2norm ? 0 : prepared_p_exponent(p_max);
      if (p_exp != 0) {  // (CTA-uniform) P again at 2^-p_exp (m again too: the same values)
        wgmma_key_products_store<M, true, !kGroup>(s, warp, lane, kk, qk, out.tiles.p_hi, out.tiles.p_lo, s.G,
                                                   s.beta, pow2(-p_exp), &p_absmax);
        __syncthreads();
      }
      if (tid == 0) out.tiles.p_exp = p_exp;
    }
    if (!kWritesT && i == 0 && tma) load_v(h);  // not with q and k: it delayed their landing (Nsight
                                                // Compute: the kernel 5% slower, its wait for them 22 -> 25%)
    if (warp == kGateWarp && i + 1 < heads)
      chunk_gates(p, s.G_next, s.beta_next, head_gate(p, h_next), gates_next, pc.rows, lane);
    // (the merges read no block above it)
    invert_diagonal_blocks_doubling(s, warp, lane);
    __syncthreads();  // every diagonal block of X
    // warps 0..3 merge, 4..7 take the same CTA barriers: with a barrier of warps 0..3 alone
    // (bar.sync 1, 128), racecheck reported the next head's stores against this head's reads
    merge_inverse_blocks_mma(s, warp & 3, lane, [] { named_barrier(0, kThreads); }, warp < 4);
    __syncthreads();  // X is complete, m is dead: T takes its place, Xw the merge scratch's
    gate_inverse<M, CoreTiles>(s, tid);  // T's blocks on and below the diagonal
    {  // and its six above it as zeros (wgmma reads them; m had their space): 4 core matrices of
       // 128 bytes a block, hi and lo
      for (int e = tid; e < 2 * 6 * 4 * 8; e += kThreads) {
        const int b = (e >> 5) % 6, core = (e >> 3) & 3, piece = e & 7;  // blocks (0, 1..3), (1, 2..3), (2, 3)
        const int bi = b < 3 ? 0 : b < 5 ? 1 : 2, bj = b < 3 ? b + 1 : b < 5 ? b - 1 : 3;
        uint16_t* half = e < 6 * 4 * 8 ? &s.t.hi[0][0] : &s.t.lo[0][0];
        const int at = CoreTiles::T::at(16 * bi + 8 * (core >> 1), 16 * bj + 8 * (core & 1)) + 8 * piece;
        *reinterpret_cast<uint4*>(half + at) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
    if constexpr (kWritesT) {
      __syncthreads();  // T is complete, X is read: -W takes its place
      // T's halves to the prepared chunk (the chain's U warpgroup forms U^T = Vc^T T^T)
      static_assert(sizeof(PreparedChunk::t_pair) == 2 * kC * kC * 2, "T's 16 KB, four pieces a thread");
#pragma unroll
      for (int e = 0; e < 2 * kC * kC / 8 / kThreads; ++e) {
        const int idx = tid + kThreads * e, half = idx / (kC * kC / 8), at = 8 * (idx % (kC * kC / 8));
        *reinterpret_cast<uint4*>(&out.t_pair[half][at]) =
            *reinterpret_cast<const uint4*>((half ? &s.t.lo[0][0] : &s.t.hi[0][0]) + at);
      }
      float D[8][4];  // (not formed: UProducts::kNone)
      wgmma_minus_w_new_values<M, PrepWgSmem, MmaF16, UProducts::kNone>(s, 0, warp, lane, D);
      __syncthreads();  // -W is complete, in CoreTiles::W's layout: the prepared tile's
    } else {
      if (tma)
        mbarrier_wait(&landed[1], uint32_t(i) & 1u);
      else
        cp_async_wait<0>();
      fence_shared_for_wgmma();  // this thread's v copies and T stores -> wgmma
      __syncthreads();  // X is read: -W takes its place
      float D[8][4];  // U^T of the chunk: [16 value rows, C tokens], rows [16 warp, +16)
      // (every row of T, its zeros above the diagonal written above: with the diagonal blocks'
      // powers' check, ptxas serialised the wgmma of either instance with U's triangular forms,
      // C7511; the one-head instance's triangular form after -W, without the check, was 1.1 to
      // 2% faster on the overlapped-window cases: docs/NOTES.md, fifty-first session)
      wgmma_minus_w_new_values<M, PrepWgSmem, MmaF16, UProducts::kFull>(s, 0, warp, lane, D);
#pragma unroll
      for (int t = 0; t < 8; ++t)  // U^T as this warp's accumulator fragments: 512-byte warp stores
        out.u_frags[warp][t][lane] = make_float4(D[t][0], D[t][1], D[t][2], D[t][3]);
      if (kGroup && tma) fence_shared_for_wgmma();  // this thread's reads of v -> the TMA that refills it
      __syncthreads();  // -W is complete, in CoreTiles::W's layout: the prepared tile's; v is read
      if (i + 1 < heads) load_v(h_next);
    }
    static_assert(sizeof(PreparedTiles::w_neg) == kC * kK * 2, "-W's 16 KB, one piece a thread and step");
#pragma unroll
    for (int e = 0; e < kC * kK / 8 / kThreads; ++e) {
      const int idx = tid + kThreads * e;
      *reinterpret_cast<uint4*>(&out.tiles.w_neg[8 * idx]) = *reinterpret_cast<const uint4*>(&s.w_neg[0][0] + 8 * idx);
    }
    if (warp == kGateWarp) {  // G and the chain's factors (the last reader of G), then the next head's gates
#pragma unroll
      for (int e = 0; e < 2; ++e) store_prepared_factors(s, out.tiles, 2 * lane + e, p_exp);
      __syncwarp();
      if (i + 1 < heads) {
        *reinterpret_cast<float2*>(&s.G[2 * lane]) = *reinterpret_cast<const float2*>(&s.G_next[2 * lane]);
        *reinterpret_cast<float2*>(&s.beta[2 * lane]) = *reinterpret_cast<const float2*>(&s.beta_next[2 * lane]);
      }
    }
  }
#endif
}
inline constexpr size_t kPrepWgmmaSmemBytes = sizeof(PrepWgSmem) + 1024;  // from the first 1024-byte boundary
static_assert(Swizzle128At<kC>::at(kC - 1, kK - 1) < kC * kLdTok && CoreTiles::W::plain(kC - 1, kK - 1) < kC * kLdTok,
              "the swizzled and core-matrix tiles fit the padded tiles' space");

// ---- chain

// The chain's per-thread copy plan, fixed for the CTA: where its 16-byte pieces of q and k
// start (token 0 of the sequence, key head j), and the shared-memory address of stage 0 (a
// ChainStage, or with kWithU a ChainStageFull, which also takes U^T).
template <bool kWithU>
struct ChainLoader {
  using Stage = typename std::conditional<kWithU, ChainStageFull, ChainStage>::type;
  const uint16_t* q;      // q of token bos, this thread's column
  const uint16_t* k;
  int64_t q_tok, k_tok;   // token strides (elements)
  uint32_t stage0;        // shared address of stage 0
  int tid;

  __device__ __forceinline__ ChainLoader(const ChunkParams& p, const Stage* stages, int64_t n, const Sequence& sq,
                                         int j, int tid_)
      : q_tok(p.q.tok), k_tok(p.k.tok), stage0(smem_addr(stages)), tid(tid_) {
    const int col = (tid & 15) * 8;
    q = static_cast<const uint16_t*>(p.q.p) + n * p.q.seq + sq.bos * p.q.tok + j * p.q.head + col;
    k = static_cast<const uint16_t*>(p.k.p) + n * p.k.seq + sq.bos * p.k.tok + j * p.k.head + col;
  }

  // cp.async of chunk c (`rows` live tokens) into stage `buf`, in three parts that a step
  // issues at different points (all in one commit group), so that the eight warps' copies do not
  // queue at the memory pipe all at once: q and k rows (zero past rows); the prepared chunk's
  // -W, G and factors (and U^T); its P.
  __device__ __forceinline__ uint32_t stage_at(int buf) const {
    return stage0 + uint32_t(buf) * uint32_t(sizeof(Stage));
  }
  __device__ __forceinline__ void load_tokens(int64_t c, int rows, int buf) const {
    const uint32_t st = stage_at(buf);
    const int col = (tid & 15) * 8;
#pragma unroll
    for (int i = 0; i < kC * kK / 8 / kChainThreads; ++i) {  // 16 pieces a row
      const int r = (tid >> 4) + (kChainThreads / 16) * i;
      const bool live = r < rows;
      const int64_t tok = c * kC + (live ? r : 0);
      const uint32_t at = uint32_t((r * kLdTok + col) * 2);
      cp_async16_at(st + uint32_t(offsetof(ChainStage, q)) + at, q + tok * q_tok, live ? 16 : 0);
      cp_async16_at(st + uint32_t(offsetof(ChainStage, k)) + at, k + tok * k_tok, live ? 16 : 0);
    }
  }
  __device__ __forceinline__ void load_prepared(const PreparedChunk& pc, int buf) const {
    const uint32_t st = stage_at(buf);
    const int col = (tid & 15) * 8;
#pragma unroll
    for (int i = 0; i < kC * kK / 8 / kChainThreads; ++i) {
      const int r = (tid >> 4) + (kChainThreads / 16) * i;
      cp_async16_at(st + uint32_t(offsetof(ChainStage, w_neg)) + uint32_t((r * kLdTok + col) * 2),
                    &pc.tiles.w_neg[r * kK + col], 16);
    }
    if (tid < 3 * kC / 4) {  // G, q_f, k_f: 16 pieces each (contiguous in both)
      static_assert(offsetof(PreparedTiles, q_f) == offsetof(PreparedTiles, G) + kC * 4 &&
                        offsetof(PreparedTiles, k_f) == offsetof(PreparedTiles, G) + 2 * kC * 4 &&
                        offsetof(ChainStage, q_f) == offsetof(ChainStage, G) + kC * 4 &&
                        offsetof(ChainStage, k_f) == offsetof(ChainStage, G) + 2 * kC * 4,
                    "G, q_f, k_f are one run of 3 C floats");
      cp_async16_at(st + uint32_t(offsetof(ChainStage, G)) + 16 * tid, pc.tiles.G + 4 * tid, 16);
    }
    if constexpr (kWithU) {  // U^T fragments: one contiguous 32 KB run in both
      constexpr int kPieces = int(sizeof(PreparedChunk::u_frags) / 16);
      const float4* from = &pc.u_frags[0][0][0];
#pragma unroll
      for (int i = 0; i < kPieces / kChainThreads; ++i) {
        const int idx = tid + kChainThreads * i;
        cp_async16_at(st + uint32_t(offsetof(ChainStageFull, u)) + 16 * idx, from + idx, 16);
      }
    }
  }
  __device__ __forceinline__ void load_products(const PreparedChunk& pc, int buf) const {
    const uint32_t st = stage_at(buf);
#pragma unroll
    for (int i = 0; i < kC * kC / 8 / kChainThreads; ++i) {  // 8 pieces a row
      const int idx = tid + kChainThreads * i, r = idx >> 3, pc_col = (idx & 7) * 8;
      const uint32_t at = uint32_t((r * kLdCC + pc_col) * 2);
      cp_async16_at(st + uint32_t(offsetof(ChainStage, p_hi)) + at, &pc.tiles.p_hi[r * kC + pc_col], 16);
      cp_async16_at(st + uint32_t(offsetof(ChainStage, p_lo)) + at, &pc.tiles.p_lo[r * kC + pc_col], 16);
    }
  }
  __device__ __forceinline__ void load(const PreparedChunk& pc, int64_t c, int rows, int buf) const {
    load_tokens(c, rows, buf);
    load_prepared(pc, buf);
    load_products(pc, buf);
  }
};

// The warp's partial sums of chunk c, and their halves for its partner, into shared memory.
template <class M, int kh>
__device__ __forceinline__ void chain_partials(ChainSmem& s, const ChainTiles& ct, int warp, int lane,
                                               const float (&S)[8][4], float (&D)[8][4], float (&O)[8][4]) {
  key_products<M>(ct, lane, S, D, O, 64 * kh);
#pragma unroll
  for (int t = 0; t < 8; ++t) s.partial_d[warp][t][lane] = make_float4(D[t][0], D[t][1], D[t][2], D[t][3]);
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // the partner's tokens
    const int t = key_half_tile(1 - kh, i);
    s.partial_o[warp][i][lane] = make_float4(O[t][0], O[t][1], O[t][2], O[t][3]);
  }
}

// The partner's partial sums in, then the warp's outputs and its half of the next state.
template <class M, int kh>
__device__ __forceinline__ void chain_finish(const ChainSmem& s, const ChainTiles& ct, int partner, int lane,
                                             float (&S)[8][4], float (&D)[8][4], float (&O)[8][4]) {
#pragma unroll
  for (int t = 0; t < 8; ++t) {  // (U + half 0) + half 1 in both warps: the same bits
    const float4 x = s.partial_d[partner][t][lane];
    D[t][0] += x.x, D[t][1] += x.y, D[t][2] += x.z, D[t][3] += x.w;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // own + partner's half (either order: the same bits)
    const int t = key_half_tile(kh, i);
    const float4 x = s.partial_o[partner][i][lane];
    O[t][0] += x.x, O[t][1] += x.y, O[t][2] += x.z, O[t][3] += x.w;
  }
  finish_outputs<M, key_half_blocks(kh), true>(ct, lane, D, O);
  advance_state<M, true>(ct, lane, D, S, 64 * kh);
}

// The warp's o (its key half's 32 tokens, its 16 rows, scaled) to global memory through its own
// staging tile (token-major, local token 16 i + x for token 16 block_i + x): a warp-local
// transpose, so no block barrier; then one 32-byte piece per token row.
template <class M, int kh>
__device__ __forceinline__ void chain_store_o(const ChunkParams& p, uint16_t (*stage)[kOStageLd],
                                              const float (&O)[8][4], int64_t n, int h, int64_t tok0, int rows,
                                              int col0, int lane) {
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int t = key_half_tile(kh, i), local = 8 * i + 2 * q + e;
      stage[local][g] = M::one(p.scale * O[t][e]);
      stage[local][g + 8] = M::one(p.scale * O[t][2 + e]);
    }
  __syncwarp();
#pragma unroll
  for (int k = 0; k < 2; ++k) {  // lane: local token 16 k + lane / 2, half lane % 2 of its 16 rows
    const int local = 16 * k + (lane >> 1), half = lane & 1;
    const int tok = 16 * (key_half_tile(kh, 2 * k) / 2) + (local & 15);
    if (tok < rows) {
      uint16_t* o = static_cast<uint16_t*>(p.o.p) + n * p.o.seq + (tok0 + tok) * p.o.tok + h * p.o.head;
      *reinterpret_cast<uint4*>(o + col0 + 8 * half) = *reinterpret_cast<const uint4*>(&stage[local][8 * half]);
    }
  }
}

// Key half 0's warps: U^T of a prepared chunk into registers (the fragments of rows
// [row0, +16)), read a chunk ahead.
__device__ __forceinline__ void load_u(const PreparedChunk& pc, int row0, int lane, float4 (&u)[8]) {
#pragma unroll
  for (int t = 0; t < 8; ++t) u[t] = pc.u_frags[row0 / 16][t][lane];
}

// Run `role` of pass p.seg_pass for sequence n (chunks of it) and value head h; `forgets`: pass
// 1's verdict on the head's layout (forgotten_layout; pass 2 reads it from the live words).
// kSegments / kWhole: whether the caller's instance runs the sequence split's passes / whole
// sequences and windows (the code of the others compiled out).
template <bool kSegments = true, bool kWhole = true>
__device__ __forceinline__ ChainRun chain_run(const ChunkParams& p, int role, int64_t n, int h, int64_t chunks,
                                              bool forgets = false) {
  ChainRun run;
  run.c_end = chunks;
  if (kWhole && p.seg_pass == 0) return run;
  if (kWhole && p.seg_pass == kPassWindow) {  // from the initial state or the previous window's end
    float* carry = p.window_state + (n * p.Hv + h) * int64_t(kV * kK);
    run.c_begin = p.window_begin;
    run.c_end = p.window_begin + p.window_chunks < chunks ? p.window_begin + p.window_chunks : chunks;
    if (p.window_begin > 0) {
      run.start = kStartSegment;
      run.start_state = carry;
    }
    run.end_final = run.c_end == chunks;
    run.end_state = run.end_final ? nullptr : carry;
    return run;
  }
  if constexpr (!kSegments) return run;  // (not reached)
  // segment m of the head's layout (the forgotten start's, or the default)
  const auto span = [&](int m, bool forgotten) {
    const int64_t len = forgotten ? p.seg_chunks_forget : p.seg_chunks;
    run.c_begin = m * len;
    run.c_end = m == p.segments - 1 || (m + 1) * len > chunks ? chunks : (m + 1) * len;
  };
  run.end_final = false;
  if (p.seg_pass == 1) {
    if (role == 0) {  // segment 0 from the true initial state; its end starts segment 1
      span(0, forgets);
      run.end_state = seg_state(p, n, 1, h, kSegStart);
      return run;
    }
    const int m = 1 + (role - 1) / 2;
    const bool transition = (role - 1) % 2 == 1;
    span(m, forgets);
    // in the forgotten start's layout the local run writes o (pass 2 redoes only the chunks
    // whose start is still live); with p.seg_live the transition run notes where that ends (-1
    // in the default layout)
    run.write_o = !transition && forgets;
    run.start = transition ? kStartIdentity : kStartZero;
    run.use_u = !transition;
    run.end_state = seg_state(p, n, m, h, transition ? kSegA : kSegR);
    if (transition && p.seg_live) run.live_words = seg_live_words(p, n, m, h);
    return run;
  }
  const int m = role + 1;  // pass 2: segments 1 .. segments - 1 from their true start
  run.end_final = m == p.segments - 1;
  int last = -1;  // the last live chunk of the segment (relative), where pass 2 may stop after it
  if (p.seg_live) {  // the head's layout from the live words: its own, the last segment's from
                     // segment 1's (it has no pass-1 runs: it runs whole in either layout)
    const int32_t* live = seg_live_words(p, n, run.end_final ? 1 : m, h);
    int lowest = 0;
#pragma unroll
    for (int w = 0; w < 8; ++w) lowest = min(lowest, live[w]), last = max(last, live[w]);
    forgets = lowest >= 0;
  }
  span(m, forgets);
  run.start = kStartSegment;
  run.start_state = seg_state(p, n, m, h, kSegStart);
  if (forgets && !run.end_final && run.c_begin + last + 1 < run.c_end) run.c_end = run.c_begin + last + 1;
  return run;
}

// What a chain CTA of a launch with kSplit CTAs per (sequence, value head) works on: its run
// (chain_run's role), row block, sequence (longest first), value head and key head.
struct ChainCta {
  int role, block;
  int64_t n;
  int h, j;
};
template <int kSplit>
__device__ __forceinline__ ChainCta chain_cta(const ChunkParams& p) {
  const int64_t units = p.N * p.Hv * kSplit;  // CTAs per run of every sequence
  const int64_t unit = blockIdx.x % units, sequence_head = unit / kSplit;
  ChainCta c;
  c.role = int(blockIdx.x / units);
  c.block = int(unit % kSplit);
  c.n = longest_first(p, sequence_head / p.Hv);
  c.h = int(sequence_head % p.Hv);
  c.j = p.tiled ? c.h % p.Hk : c.h / p.ratio;
  return c;
}

// The full chain's warp: its o (all C tokens, its 16 rows, scaled) to global memory through its
// 4 KB of the stage's U^T (read at the step's start), token-major: a warp-local transpose.
template <class M>
__device__ __forceinline__ void chain_store_o_full(const ChunkParams& p, uint16_t (*stage)[kOStageLd],
                                                   const float (&O)[8][4], int64_t n, int h, int64_t tok0, int rows,
                                                   int col0, int lane) {
  const int g = lane >> 2, q = lane & 3;
  __syncwarp();  // every lane has read its U^T fragments
#pragma unroll
  for (int t = 0; t < 8; ++t)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tok = 8 * t + 2 * q + e;
      stage[tok][g] = M::one(p.scale * O[t][e]);
      stage[tok][g + 8] = M::one(p.scale * O[t][2 + e]);
    }
  __syncwarp();
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // lane: token 16 k + lane / 2, half lane % 2 of its 16 rows
    const int tok = 16 * k + (lane >> 1), half = lane & 1;
    if (tok < rows) {
      uint16_t* o = static_cast<uint16_t*>(p.o.p) + n * p.o.seq + (tok0 + tok) * p.o.tok + h * p.o.head;
      *reinterpret_cast<uint4*>(o + col0 + 8 * half) = *reinterpret_cast<const uint4*>(&stage[tok][8 * half]);
    }
  }
}

// One chain CTA (chunked_tile.h): kSplit = 2, the key-half chain (64 state rows, ChainSmem);
// kSplit = 1, the full chain (all 128 rows, ChainSmemFull).
template <class M, int kSplit>
__global__ void __launch_bounds__(kChainThreads, 1) chunk_chain_kernel(const __grid_constant__ ChunkParams p) {
  static_assert(kSplit == 1 || kSplit == 2, "chain shapes");
  constexpr bool kFull = kSplit == 1;
  constexpr int kRows = kV / kSplit;    // state rows of the CTA
  constexpr int kTiles = kK / 8 / kSplit;  // a warp's key-column tiles
  using Smem = typename std::conditional<kFull, ChainSmemFull, ChainSmem>::type;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, q = lane & 3;
  const int rb = kFull ? warp : warp % kChainRowBlocks;  // the warp's row block
  const int kh = kFull ? 0 : warp / kChainRowBlocks;     // key half (key-half chain)
  const int partner = warp ^ kChainRowBlocks;            // same rows, other key half
  const ChainCta cta = chain_cta<kSplit>(p);
  const int role = cta.role;
  const int64_t n = cta.n;
  const int h = cta.h, j = cta.j;
  const int v0 = cta.block * kRows;  // this CTA's state rows [v0, v0 + kRows)
  const int row0 = v0 + 16 * rb;     // the warp's
  const int col0 = kFull ? 0 : 64 * kh;  // the warp's key columns [col0, +8 kTiles)

  Sequence sq;
  if (!resolve_sequence(p, n, sq)) return;
  if (sq.slot < 0) {  // padding: this block's o columns zero (once), no state read or written
    if (role != 0 || p.seg_pass == 2 || (p.seg_pass == kPassWindow && p.window_begin > 0)) return;
    constexpr int kPieces = kRows / 8;  // 16-byte pieces a token row
    for (int64_t r = tid / kPieces; r < sq.len; r += kChainThreads / kPieces) {
      uint16_t* o = static_cast<uint16_t*>(p.o.p) + n * p.o.seq + (sq.bos + r) * p.o.tok + h * p.o.head;
      *reinterpret_cast<uint4*>(o + v0 + (tid % kPieces) * 8) = make_uint4(0u, 0u, 0u, 0u);
    }
    return;
  }
  const int64_t chunks = (sq.len + kC - 1) / kC;
  const ChainRun run = chain_run(p, role, n, h, chunks);

  float S[kTiles][4];  // state rows [row0, +16), key columns [col0, +8 kTiles), f32
  load_run_start(p, run, sq.slot, h, S, row0, col0, g, q);
  const PreparedChunk* prepared_h = static_cast<const PreparedChunk*>(p.prepared) + h;
  const auto prepared = [&](int64_t c) -> const PreparedChunk& { return prepared_h[chunk_slot(p, n, sq, c) * p.Hv]; };
  const bool read_u = kh == 0 && run.use_u;
  float4 u_next[kFull ? 1 : 8];  // key-half chain, key half 0: U^T of the next chunk
  const ChainLoader<kFull> loader(p, s.stage, n, sq, j, tid);
  const auto live_rows = [&](int64_t c) { return int(sq.len - c * kC < kC ? sq.len - c * kC : kC); };
  if (run.c_begin < run.c_end) {
    loader.load(prepared(run.c_begin), run.c_begin, live_rows(run.c_begin), 0);
    if constexpr (!kFull)
      if (read_u) load_u(prepared(run.c_begin), row0, lane, u_next);
  }
  cp_async_commit();

  for (int64_t c = run.c_begin; c < run.c_end; ++c) {
    const int buf = int((c - run.c_begin) & 1);
    const int64_t tok0 = sq.bos + c * kC;
    const int rows = live_rows(c);
    float D[8][4];  // D^T <- U^T (key half 0 / the full chain) or 0: [16 value rows, C tokens]
    if constexpr (!kFull) {
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        D[t][0] = read_u ? u_next[t].x : 0.f;
        D[t][1] = read_u ? u_next[t].y : 0.f;
        D[t][2] = read_u ? u_next[t].z : 0.f;
        D[t][3] = read_u ? u_next[t].w : 0.f;
      }
    }
    __syncthreads();  // chunk c - 1 is done with the other stage (and the partial sums)
    // chunk c + 1 into the other stage, in three parts through the step (one commit group, at
    // the step's end): q and k now, the prepared -W, factors and U after the key products, P
    // after the exchange
    const bool next = c + 1 < run.c_end;
    if (next) loader.load_tokens(c + 1, live_rows(c + 1), buf ^ 1);
    cp_async_wait<0>();  // chunk c's group (committed last step)
    __syncthreads();
    const auto load_next_prepared = [&] {
      if (!next) return;
      loader.load_prepared(prepared(c + 1), buf ^ 1);
      if constexpr (!kFull)
        if (read_u) load_u(prepared(c + 1), row0, lane, u_next);
    };
    const auto load_next_products = [&] {
      if (next) loader.load_products(prepared(c + 1), buf ^ 1);
      cp_async_commit();
    };
    float O[8][4];  // O^T: [16 value rows, C tokens]
    if constexpr (kFull) {
      ChainStageFull& sf = s.stage[buf];
      const ChainStage& st = sf.base;
      const ChainTiles ct{&st.w_neg[0][0], &st.q[0][0], &st.k[0][0], &st.p_hi[0][0], &st.p_lo[0][0], st.G, st.q_f, st.k_f};
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const float4 u = run.use_u ? sf.u[rb][t][lane] : make_float4(0.f, 0.f, 0.f, 0.f);
        D[t][0] = u.x, D[t][1] = u.y, D[t][2] = u.z, D[t][3] = u.w;
      }
      key_products<M>(ct, lane, S, D, O, 0);
      load_next_prepared();
      finish_outputs<M, 0xFu, true>(ct, lane, D, O);
      advance_state<M, true>(ct, lane, D, S, 0);
      load_next_products();
      if (run.write_o)
        chain_store_o_full<M>(p, reinterpret_cast<uint16_t(*)[kOStageLd]>(&sf.u[rb][0][0]), O, n, h, tok0, rows,
                              row0, lane);
    } else {
      ChainStage& st = s.stage[buf];
      const ChainTiles ct{&st.w_neg[0][0], &st.q[0][0], &st.k[0][0], &st.p_hi[0][0], &st.p_lo[0][0], st.G, st.q_f, st.k_f};
      if (kh == 0)
        chain_partials<M, 0>(s, ct, warp, lane, S, D, O);
      else
        chain_partials<M, 1>(s, ct, warp, lane, S, D, O);
      load_next_prepared();
      __syncthreads();
      load_next_products();
      if (kh == 0)
        chain_finish<M, 0>(s, ct, partner, lane, S, D, O);
      else
        chain_finish<M, 1>(s, ct, partner, lane, S, D, O);
      if (run.write_o) {
        if (kh == 0)
          chain_store_o<M, 0>(p, s.o_stage[warp], O, n, h, tok0, rows, row0, lane);
        else
          chain_store_o<M, 1>(p, s.o_stage[warp], O, n, h, tok0, rows, row0, lane);
      }
    }
  }
  cp_async_wait<0>();
  if (run.end_state) store_segment_state(run.end_state, S, row0, col0, g, q);
  if (run.end_final && p.ht.p) store_state(p, sq.slot, h, S, row0, col0, g, q);
}

// The wgmma chain CTA (chunked_tile.h: one warpgroup, state rows [64 b, +64) of a (sequence,
// value head), kVSplit CTAs a pair, the key-half chain's grid and runs). A chunk's stage lands
// on one mbarrier: Qc, Kc by TMA (a packed sequence's partial chunk by cp.async, rows past its
// end as zeros), the prepared tiles and the CTA's U^T half by bulk copies, all issued a chunk
// ahead. Per chunk: D^T = U^T + S (-W)^T, O^T, then the state update, whose products run while
// o is staged and stored (a TMA box, or thread stores for a packed partial chunk). The same
// sums as the fused kernel's chain, on the prepared chunk's factors.
// kPass1: the sequence split's pass 1 (wg_chain_pass1_ctas CTAs of two warpgroups a (sequence,
// value head, row block)). CTA role 0: segment 0 on warpgroup 0 (with o; warpgroup 1 leaves at
// once); CTA role m >= 1: middle segment m, warpgroup 0 its local state R (from zeros, with U),
// warpgroup 1 its transition A (from I, U = 0), both on the one stage they share. Those runs
// write no o and skip O's products (a second loop); the other launches take the kernel with
// the one loop (measured: a second loop cost them about 1%).
// kCheckpoints: the instances for calls with state checkpoints (p.ckpt_tokens > 0): the runs
// that carry the true state (those that write o: whole sequences, windows, segment 0 in pass 1,
// pass 2) store it after the chunks that ask (store_checkpoint); a sequence whose snapshot
// indices checkpoint_index_check_kernel found invalid writes nothing.
// A copier warp (its warpgroup's first: kWgChainCtaThreads) issues each chunk's bulk copies and TMA
// loads as soon as the barrier that opens the step before frees their stage, so that no warp of
// the warpgroups carries them into the step's first product (where the other three waited for
// it: 13% of the chain's samples).
// Named barriers: 1 the state's warpgroups, 2 and the copier (a step's first), kBarUStaged + s
// the U warpgroup -> the state's (stage s's U^T), kBarURead + s the state's -> the U warpgroup
// (stage s's U^T is read: the next into it may be written; the copies between the two order
// them too, but through an mbarrier racecheck does not follow), kBarPipeIdle the state's ->
// the U warpgroup (D's products are done: the U warpgroup's products run beside the state's
// ALU work, not between its dependent products), 5 the U warpgroup alone, 7 every thread (once).
// kBarOStage: the forgotten start's pass-1 instance (kForget), its runs that write o (segment
// 0's and the local runs), their warpgroup alone (a paired CTA's transition run writes none).
inline constexpr int kBarUStaged = 3, kBarURead = 8, kBarPipeIdle = 6, kBarOStage = 10;
// kForget (pass 1 with p.seg_live, no checkpoints: its own instance, so that the others keep
// their code): each CTA first takes its head's layout (forgotten_layout); in the forgotten
// start's, the local runs write o, and the transition runs note their last live chunk and stop
// their products once their rows are zero (chunked_runs.cuh); in the default one, the loops are
// the default instance's (chunks_loop without `vote`).
template <class M, bool kPass1, bool kCheckpoints, bool kUWarpgroup, bool kForget = false>
__global__ void __launch_bounds__(kWgChainCtaThreads, 1)
    chunk_chain_wgmma_kernel(const __grid_constant__ ChunkParams p, const __grid_constant__ TileMaps maps) {
#if GDN_CHUNKED_WGMMA
  extern __shared__ __align__(128) unsigned char smem_raw[];
  WgChainSmem& s = *reinterpret_cast<WgChainSmem*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
  constexpr int kWorkers = wg_chain_workers(kPass1);                // the state warpgroups' threads
  // kUWarpgroup: U^T by a warpgroup of its own (threads [kWorkers, +128)), the instance for
  // p.chain_forms_u (never in pass 1: the sequence split's prepared chunks hold U^T)
  static_assert(!(kPass1 && kUWarpgroup), "pass 1 takes U^T as prepared");
  static_assert(!kForget || (kPass1 && !kCheckpoints), "the forgotten start: pass 1 without checkpoints");
  constexpr int kCopier0 = 2 * kWgChainThreads;                      // (kWgChainCtaThreads)
  // the warp's index broadcast from its lane 0, so that the compiler knows every role test below
  // is warp-uniform (the roles' loops then keep their indices and descriptors uniform)
  const int warp_index = __shfl_sync(0xffffffffu, int(threadIdx.x) / 32, 0);
  const bool copier = warp_index >= kCopier0 / 32;                   // the copier warp's warpgroup
  // the second warpgroup outside pass 1: the U warpgroup (kUWarpgroup), or gone at once
  const bool u_role = !kPass1 && !copier && warp_index >= kWorkers / 32;
  const bool idle = warp_index >= kCopier0 / 32 + 1;                 // its other warps
  const int wg = !kPass1 || copier ? 0 : warp_index / 4;             // the warpgroup (the copier's run: 0's)
  // (the copier's tid is kCopier0 + lane: never a warpgroup's thread 0; the U warpgroup's 0..127)
  const int tid = int(threadIdx.x) - wg * kWgChainThreads - (u_role ? kWorkers : 0), warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, q = lane & 3;
  const ChainCta cta = chain_cta<kVSplit>(p);
  bool forgets = false;  // the head's layout (forgotten_layout: every thread of the CTA, before any leaves)
  if constexpr (kForget) forgets = forgotten_layout(p, cta.n, cta.h);
  if (kPass1 && cta.role == 0 && wg == 1) return;  // segment 0 has no transition to run
  const int role = kPass1 && cta.role > 0 ? 1 + 2 * (cta.role - 1) + wg : cta.role;  // chain_run's
  const int threads = kPass1 && cta.role > 0 ? 2 * kWgChainThreads : kWgChainThreads;  // working
  const auto sync = [&] {  // the working threads (not the copier)
    named_barrier(1, threads);
  };
  // the step's first barrier: the copier too. With `vote` (a CTA whose head takes the forgotten
  // start's layout: every barrier of its id in the CTA is then the same instruction) a
  // reduction: whether every thread's `pred` holds (a transition run's rows all zero); else false
  const auto sync_with_copier = [&](auto vote, bool pred) {
    if constexpr (decltype(vote)::value) return named_barrier_and(2, threads + 32, pred);
    named_barrier(2, threads + 32);
    return false;
  };
  using NoVote = std::false_type;
  const int64_t n = cta.n;
  const int h = cta.h, j = cta.j;
  const int v0 = cta.block * kChainRows;  // this CTA's state rows (o's values) [v0, v0 + 64)
  const int row0 = v0 + 16 * warp;    // the warp's

  Sequence sq;
  if (!resolve_sequence(p, n, sq)) return;
  if (sq.slot < 0) {  // padding: this block's o columns zero (once), no state read or written
    if (copier || u_role || role != 0 || wg != 0 || p.seg_pass == 2 || (p.seg_pass == kPassWindow && p.window_begin > 0))
      return;
    for (int64_t r = tid >> 3; r < sq.len; r += kWgChainThreads / 8) {
      uint16_t* o = static_cast<uint16_t*>(p.o.p) + n * p.o.seq + (sq.bos + r) * p.o.tok + h * p.o.head;
      *reinterpret_cast<uint4*>(o + v0 + (tid & 7) * 8) = make_uint4(0u, 0u, 0u, 0u);
    }
    return;
  }
  if (kCheckpoints && p.ckpt_seq_ok && !p.ckpt_seq_ok[n]) return;  // (the flag is raised)
  const int64_t chunks = (sq.len + kC - 1) / kC;
  // (pass 1 runs segments only; the U warpgroup's instance never runs them)
  const ChainRun run = chain_run<!kUWarpgroup, !kPass1>(p, role, n, h, chunks, forgets);

  float S[16][4];  // state rows [row0, +16), all key columns, f32: the warpgroup's m64n128 accumulators,
                   // at 2^-sigma times their values (the warp's sigma: chunked_range.cuh)
  int sigma = 0;
  // a window's state as the window before left it: the registers' values and their exponent
  // (never in pass 1: known there at compile time, so that no register holds it through the loop)
  int32_t* const window_sigma = !kPass1 && p.seg_pass == kPassWindow ? p.window_sigma + (n * p.Hv + h) * (kV / 16) + row0 / 16 : nullptr;
  if (!copier && !u_role) {
    load_run_start(p, run, sq.slot, h, S, row0, 0, g, q);
    if (window_sigma && run.start == kStartSegment) sigma = *window_sigma;
  }
  if (tid == 0 && wg == 0 && !u_role) {
    mbarrier_init(&s.full[0], 1);
    mbarrier_init(&s.full[1], 1);
    if constexpr (kUWarpgroup) {
      mbarrier_init(&s.u_full[0], 1);
      mbarrier_init(&s.u_full[1], 1);
    }
    fence_mbarrier_init();
  }
  if constexpr (!kPass1) {
    if (!idle) named_barrier(7, kCopier0 + 32);  // the barriers are initialised: every working thread
  } else if (!idle) {
    sync_with_copier(NoVote{}, true);
  }

  const PreparedChunk* prepared_h = static_cast<const PreparedChunk*>(p.prepared) + h;
  const auto live_rows = [&](int64_t c) { return int(sq.len - c * kC < kC ? sq.len - c * kC : kC); };
  const bool tma = maps.on != 0;
  const auto by_tma = [&](int64_t c) { return tma && !(p.cu_seqlens && live_rows(c) < kC); };
  const int seq = p.cu_seqlens ? 0 : int(n);  // the maps' sequence coordinate
  // chunk c into stage b: everything but cp.async'd rows is credited to full[b], but U^T's
  // operands (Vc's columns, T) where the U warpgroup forms it (kUWarpgroup): to u_full[b], which only
  // that warpgroup waits on. The copier's first lane issues the copies (issue; its run is
  // warpgroup 0's, which takes U whenever a run of the CTA does); warpgroup 0 copies the rows
  // that come by cp.async (load), the U warpgroup its Vc columns.
  const auto issue = [&](int b, int64_t c) {
    WgChainStage& st = s.stage[b];
    const int64_t tok0 = sq.bos + c * kC;
    constexpr uint32_t kBoxBytes = kC * 64 * 2;
    const PreparedChunk& pc = prepared_h[chunk_slot(p, n, sq, c) * p.Hv];
    // the prepared tiles but P's lo half (P is one f16 value for this chain: PreparedTiles)
    constexpr uint32_t kHead = uint32_t(offsetof(PreparedTiles, p_lo));
    constexpr uint32_t kTail = uint32_t(sizeof(PreparedTiles) - offsetof(PreparedTiles, G));
    static_assert(kHead % 16 == 0 && kTail % 16 == 0 && offsetof(PreparedTiles, G) % 16 == 0, "bulk copies");
    if (kUWarpgroup) {  // first Vc's columns and T
      mbarrier_arrive_expect(&s.u_full[b], uint32_t(sizeof(st.t_pair)) + (by_tma(c) ? kBoxBytes : 0u));
      if (by_tma(c)) tma_load_4d(wg_chain_v(st), &maps.v, &s.u_full[b], v0, h, int(tok0), seq);  // the CTA's 64 values
      bulk_load(&st.t_pair[0][0], &pc.t_pair[0][0], sizeof(st.t_pair), &s.u_full[b]);
    }
    const bool u_copied = run.use_u && !kUWarpgroup;  // U^T of the CTA's rows, as prepared
    mbarrier_arrive_expect(&s.full[b], kHead + kTail + (u_copied ? uint32_t(sizeof(st.u)) : 0u) +
                                           (by_tma(c) ? 4 * kBoxBytes : 0u));
    bulk_load(&st.tiles, &pc.tiles, kHead, &s.full[b]);
    bulk_load(&st.tiles.G[0], &pc.tiles.G[0], kTail, &s.full[b]);
    if (u_copied) bulk_load(&st.u[0][0][0], &pc.u_frags[v0 / 16][0][0], sizeof(st.u), &s.full[b]);
    if (by_tma(c)) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        tma_load_4d(st.q + half * kC * 64, &maps.q, &s.full[b], 64 * half, j, int(tok0), seq);
        tma_load_4d(st.k + half * kC * 64, &maps.k, &s.full[b], 64 * half, j, int(tok0), seq);
      }
    }
  };
  const auto load = [&](int b, int64_t c) {
    WgChainStage& st = s.stage[b];
    const int64_t tok0 = sq.bos + c * kC;
    if (!by_tma(c) && wg == 0) {
      load_token_rows<kWgChainThreads, CoreTiles::Q>(p.q, n, tok0, live_rows(c), j, st.q, tid);
      load_token_rows<kWgChainThreads, CoreTiles::K>(p.k, n, tok0, live_rows(c), j, st.k, tid);
    }
  };

  if (copier) {  // the copies of each chunk after the barrier that frees its stage, then gone
    registers_down<kWgCopierRegs>();  // its warpgroup gives registers to the others (at the roles'
    if (idle) return;                   // split: ptxas budgets each role's code by its setmaxnreg)
    if (lane == 0 && run.c_begin < run.c_end) issue(0, run.c_begin);
    const auto copies = [&](auto vote) {
      for (int64_t c = run.c_begin; c < run.c_end; ++c) {
        sync_with_copier(vote, true);  // chunk c - 1 is done with the other stage
        if (lane == 0 && c + 1 < run.c_end) issue(int(c - run.c_begin + 1) & 1, c + 1);
      }
    };
    if (kForget && forgets)
      copies(std::bool_constant<kForget>{});
    else
      copies(NoVote{});
    return;
  }
  registers_up<kWgPairedChainRegs>();
  if (u_role) {  // the second warpgroup outside pass 1: gone at once where U^T comes prepared
    if constexpr (kUWarpgroup) {  // U^T = Vc^T T^T of each chunk into its stage's u, a chunk ahead of
                                  // the state's warpgroup, which waits for it on named barrier 3 +
                                  // the stage (kBarUStaged)
      for (int64_t c = run.c_begin; c < run.c_end; ++c) {
        const int it = int(c - run.c_begin), b = it & 1;
        WgChainStage& st = s.stage[b];
        if (!by_tma(c)) {  // this chunk's Vc columns by cp.async (only this warpgroup reads them)
          load_token_half_rows<kWgChainThreads, CoreTiles::V>(p.v, n, sq.bos + c * kC, live_rows(c), h, v0,
                                                               wg_chain_v(st), tid);
          cp_async_commit();
          cp_async_wait<0>();
          fence_shared_for_wgmma();
          named_barrier(5, kWgChainThreads);
        }
        mbarrier_wait(&s.u_full[b], uint32_t(it >> 1) & 1u);  // T (and Vc's box)
        if (it >= 2) named_barrier(kBarURead + b, 2 * kWgChainThreads);  // chunk c - 2's U^T is read
        if (it >= 1) named_barrier(kBarPipeIdle, 2 * kWgChainThreads);    // the step before has D
        float U[8][4];  // U^T: [16 value rows, C tokens], warp w's rows as the state's warp w holds them
        wgmma_u_products<M>(wg_chain_v(st), st.t_pair[0], st.t_pair[1], warp, lane, U);
        wgmma_wait<0>();
        fence_shared_for_wgmma();  // this thread's ldmatrix reads of Vc -> the TMA that refills the stage
#pragma unroll
        for (int t = 0; t < 8; ++t) st.u[warp][t][lane] = make_float4(U[t][0], U[t][1], U[t][2], U[t][3]);
        named_barrier_arrive(kBarUStaged + b, 2 * kWgChainThreads);
      }
    }
    return;
  }
  if (run.c_begin < run.c_end) load(0, run.c_begin);
  cp_async_commit();
  int last_live = 0;  // a transition run's last chunk live in this thread's values (run.live_words: the warp's largest)
  // a transition run in the forgotten start's layout notes it (in the default one its words
  // are -1: pass 2 runs whole); the words' address is formed again at the end
  const bool notes_live = kForget && run.live_words && forgets;
  const bool transition = kForget && run.live_words;  // (writes its words in either layout)
  // the thread's vote at each step's first barrier (sync_with_copier): a transition run's, whether
  // its rows were all zero at the step before's start (they stay zero: no U, each row's next
  // value a product of the row), from that step's range check; every other thread's true
  bool zero_vote = !transition;
  // The chunks: with o (kOutputs), or without it for the sequence split's runs that write none,
  // which skip O's products (20 of the step's 52 m64n64k16 equivalents). Each loop is one
  // straight wgmma pipeline (a branch around products inside one would let ptxas serialise them).
  // `vote`: the CTA's head takes the forgotten start's layout (kForget and forgets): its steps'
  // first barrier is the zero vote, and its transition runs note their live chunks; the default
  // layout's loops are the default instance's.
  const auto chunks_loop = [&](auto outputs, auto vote) {
    constexpr bool kOutputs = decltype(outputs)::value, kVote = decltype(vote)::value;
    const auto chunk_step = [&](int64_t c) {
      const int it = int(c - run.c_begin), buf = it & 1;
      const int64_t tok0 = sq.bos + c * kC;
      const int rows = live_rows(c);
      // chunk c - 1 is done with the other stage; with the vote, whether every transition row
      // of the CTA is zero, so that no step from this one needs products
      if (sync_with_copier(vote, zero_vote) && kVote && !kOutputs && transition) return false;
      if (c + 1 < run.c_end) load(buf ^ 1, c + 1);
      cp_async_commit();
      mbarrier_wait(&s.full[buf], uint32_t(it >> 1) & 1u);
      const WgChainStage& st = s.stage[buf];
      if (!by_tma(c)) {  // this chunk's rows came by cp.async: every thread's, visible to wgmma
        cp_async_wait<1>();
        fence_shared_for_wgmma();
        sync();
      }
      if (kUWarpgroup) named_barrier(kBarUStaged + buf, 2 * kWgChainThreads);  // the U warpgroup has staged U^T
      wgmma_wait<0>();  // (nothing is in flight here; without it ptxas cannot tell, and waits inside)
      if constexpr (kVote && !kOutputs) {
        const float s_max = abs_max(S);  // (2^-sigma times the values)
        // a transition run: whether chunk c's start is still live in this thread's values (the
        // warp's word is its lanes' largest, formed once at the run's end: no reduction in the
        // step), and its zero vote
        if (notes_live && transition_live(s_max, sigma)) last_live = it;
        if (transition) zero_vote = s_max == 0.f;
        keep_state_in_range(S, sigma, s_max);
      } else {
        keep_state_in_range(S, sigma);
      }
      float D[8][4];  // D^T <- U^T or 0: [16 value rows, C tokens], at 2^-sigma as S
      const float u_scale = pow2(-sigma);
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const float4 u = run.use_u ? st.u[warp][t][lane] : make_float4(0.f, 0.f, 0.f, 0.f);
        D[t][0] = u.x * u_scale, D[t][1] = u.y * u_scale, D[t][2] = u.z * u_scale, D[t][3] = u.w * u_scale;
      }
      if (kUWarpgroup && c + 2 < run.c_end) named_barrier_arrive(kBarURead + buf, 2 * kWgChainThreads);
      // -W and P in f16 (PreparedTiles), P at 2^-p_exp
      const ChainTiles ct{st.tiles.w_neg, st.q, st.k, st.tiles.p_hi, nullptr, st.tiles.G, st.tiles.q_f, st.tiles.k_f};
      float O[8][4];  // O^T: [16 value rows, C tokens]
      const float decay = chunk_decay(ct);
      uint32_t a[4][2][4];
      wgmma_chain_outputs_half<M, kOutputs, 4, 2, true>(
          ct, lane, S, D, O, sigma, decay, [&] { wgmma_state_update<M, false>(ct, lane, decay, S, D, a); },
          [&] {  // the U warpgroup's products for chunk c + 1 go now (kBarPipeIdle)
            if (kUWarpgroup && c + 1 < run.c_end) named_barrier_arrive(kBarPipeIdle, 2 * kWgChainThreads);
          });
      if constexpr (kOutputs) {  // beside the state update's products
        // the o staging's barrier: the run's warpgroup alone (in pass 1 the other may not write o)
        const auto o_sync = [&] { named_barrier(kForget ? kBarOStage : 1, kWgChainThreads); };
        uint16_t* o_stage = s.o_stage[buf];
        if (tid == 0) bulk_wait_read<1>();  // chunk c - 2's store has read o_stage[buf]
        o_sync();
        // the CTA's 64 values: the tile's first half (O at 2^-(sigma + p_exp) times o / scale)
        stage_o_stmatrix<M>(o_stage, O, p.scale * pow2(sigma + st.tiles.p_exp), warp, lane);
        const bool box_store = tma && (rows == kC || !p.cu_seqlens);
        if (box_store) fence_shared_for_wgmma();  // the staging -> the TMA store
        o_sync();
        if (box_store) {
          if (tid == 0) {
            tma_store_4d(&maps.o, o_stage, v0, h, int(tok0), seq);
            bulk_commit();
          }
        } else {
#pragma unroll
          for (int k = 0; k < kC * 8 / kWgChainThreads; ++k) {  // 8 pieces of 16 bytes a token row
            const int r = (tid >> 3) + (kWgChainThreads / 8) * k, col = (tid & 7) * 8;
            if (r < rows) {
              uint16_t* o = static_cast<uint16_t*>(p.o.p) + n * p.o.seq + (tok0 + r) * p.o.tok + h * p.o.head + v0;
              *reinterpret_cast<uint4*>(o + col) = *reinterpret_cast<const uint4*>(o_stage + CoreTiles::Q::at(r, col));
            }
          }
        }
      }
      wgmma_wait<0>();
      return true;
    };
    if constexpr (kCheckpoints && kOutputs) {
      // A run that writes o carries the true state: its chunks in spans that end at a
      // checkpoint or the run's end, the store after each span, so the loop is the plain one
      // (a test inside it measured 4% a step).
      const int64_t every = checkpoint_every_chunks(p);
      for (int64_t c_span = run.c_begin, checkpoint = first_checkpoint_chunk(p, run.c_begin); c_span < run.c_end;
           checkpoint += every) {
        const int64_t span_end = checkpoint + 1 < run.c_end ? checkpoint + 1 : run.c_end;
        // (the pool slot read before the span's chunks: its latency beside them)
        const int32_t slot = span_end == checkpoint + 1 ? checkpoint_slot(p, n, sq, checkpoint) : -1;
        for (int64_t c = c_span; c < span_end; ++c) chunk_step(c);
        if (span_end == checkpoint + 1) {
          if (sigma != 0) scale_tiles(S, pow2(sigma));
          store_checkpoint(p, n, sq, h, checkpoint, S, row0, g, q, slot);
          if (sigma != 0) scale_tiles(S, pow2(-sigma));
        }
        c_span = span_end;
      }
    } else if constexpr (kVote && !kOutputs) {
      for (int64_t c = run.c_begin; c < run.c_end; ++c)
        if (!chunk_step(c)) {  // a transition run's rows at zero from chunk c: the other run's
                               // steps' barriers only (chunk c's first is passed)
          if (!by_tma(c)) sync();
          for (++c; c < run.c_end; ++c) {
            sync_with_copier(vote, true);
            if (!by_tma(c)) sync();
          }
          break;
        }
    } else {
      for (int64_t c = run.c_begin; c < run.c_end; ++c) chunk_step(c);
    }
  };
  if constexpr (kPass1) {
    constexpr std::bool_constant<kForget> kForgetVote{};
    if (kForget && forgets) {
      if (run.write_o)
        chunks_loop(std::true_type{}, kForgetVote);
      else
        chunks_loop(std::false_type{}, kForgetVote);
    } else if (run.write_o) {
      chunks_loop(std::true_type{}, NoVote{});
    } else {
      chunks_loop(std::false_type{}, NoVote{});
    }
  } else {
    chunks_loop(std::true_type{}, NoVote{});
  }
  if (tid == 0) bulk_wait_all<false>();  // the o stores complete before the CTA ends
  if (window_sigma && run.end_state) {  // for the next window: S at 2^-sigma and sigma, so that it
                                        // scales its f16 operands as one pass would (f16's subnormals
                                        // round by scale: a window starting at sigma 0 with the true
                                        // values differed in a last bit now and then)
    store_segment_state(run.end_state, S, row0, 0, g, q);
    if (lane == 0) *window_sigma = sigma;
  }
  if (transition) {  // the segment's end, as if a chunk followed (and -1 in the default layout)
    if (notes_live && transition_live(abs_max(S), sigma)) last_live = int(run.c_end - run.c_begin);
    const int warp_last_live = __reduce_max_sync(0xffffffffu, last_live);  // (sigma is the warp's)
    if (lane == 0) seg_live_words(p, n, 1 + (role - 1) / 2, h)[cta.block * 4 + warp] = forgets ? warp_last_live : -1;
  }
  if (sigma != 0) scale_tiles(S, pow2(sigma));
  if (run.end_state && !window_sigma) store_segment_state(run.end_state, S, row0, 0, g, q);
  if (run.end_final && p.ht.p) store_state(p, sq.slot, h, S, row0, 0, g, q);
#endif
}

// Calls with state checkpoints into a pool (p.ckpt_seq_ok): every snapshot index of each live
// sequence checked once per call, before any chain CTA runs, by one CTA a sequence (1024
// threads, kIndexChecksInFlight loads in flight each: 65536 tokens in 8 rounds); the chains of
// every window and pass then read one word (checking all of a sequence's indices in each of
// them would cost every window's CTAs a pass over the whole sequence's indices). Nothing is
// written for a sequence whose indices are not all valid, as in the fused kernel; padding
// sequences are not checked.
inline constexpr int kIndexCheckThreads = 1024;
template <class M>  // (one copy per input dtype's translation unit; M is not used)
__global__ void __launch_bounds__(kIndexCheckThreads) checkpoint_index_check_kernel(const __grid_constant__ ChunkParams p) {
  const int64_t n = blockIdx.x;
  Sequence sq;
  if (!resolve_sequence(p, n, sq)) return;  // (flagged; no kernel writes the sequence)
  const bool ok = checkpoint_indices_valid(p, n, sq);  // (padding: not checked)
  if (threadIdx.x == 0) p.ckpt_seq_ok[n] = ok ? 1 : 0;
}

template <class M>
cudaError_t launch_checkpoint_indices(const ChunkParams& p, cudaStream_t stream) {
  if (!p.ckpt_seq_ok || p.N <= 0) return cudaSuccess;
  checkpoint_index_check_kernel<M><<<dim3(unsigned(p.N)), dim3(kIndexCheckThreads), 0, stream>>>(p);
  return cudaGetLastError();
}

// Whether chunk_chain_wgmma_kernel's loaded code has wgmma: built from sm_90a, not JIT-compiled
// from the portable PTX (its body is empty there). Asked once.
template <class M>
bool wgmma_chain_runs() {
  static const bool runs = [] {
    cudaFuncAttributes a{};
    if (cudaFuncGetAttributes(&a, chunk_chain_wgmma_kernel<M, false, false, false>) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return a.ptxVersion >= 90;
  }();
  return runs;
}

// GDN_CHUNKED_PREP_SMEM=B (a measurement knob, not a setting): the wgmma prepare CTAs take B
// bytes of dynamic shared memory (from their need up to 227 KB), so that fewer of them share an
// SM: how the kernel's time scales with the CTAs an SM says how latency-bound it is
// (docs/NOTES.md, thirty-first session). Unset: what the CTAs need. Read once a process (the
// windows launch this kernel many times a call).
inline size_t prepare_wgmma_smem_bytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("GDN_CHUNKED_PREP_SMEM");
    const long long b = v && *v ? std::atoll(v) : 0;
    return b > (long long)kPrepWgmmaSmemBytes && b <= 227 * 1024 ? size_t(b) : kPrepWgmmaSmemBytes;
  }();
  return bytes;
}
// The kernels' shared-memory limits (per call: cheap); the wgmma prepare
// kernels' is prepare_wgmma_smem_bytes().
template <class M>
cudaError_t set_split_smem_limits() {
  struct Limit {
    const void* kernel;
    size_t bytes;
  };
  const auto k = [](auto kernel) { return reinterpret_cast<const void*>(kernel); };
  const size_t prep_wgmma = prepare_wgmma_smem_bytes();
  const Limit limits[] = {
      {k(chunk_prepare_kernel<M>), sizeof(PrepSmem)},
      {k(chunk_prepare_wgmma_kernel<M, false, false>), prep_wgmma},  // <kGroup, kWritesT>
      {k(chunk_prepare_wgmma_kernel<M, false, true>), prep_wgmma},
      {k(chunk_prepare_wgmma_kernel<M, true, false>), prep_wgmma},
      {k(chunk_prepare_wgmma_kernel<M, true, true>), prep_wgmma},
      {k(chunk_chain_kernel<M, kVSplit>), sizeof(ChainSmem)},
      {k(chunk_chain_kernel<M, 1>), sizeof(ChainSmemFull)},
      {k(chunk_chain_wgmma_kernel<M, false, false, false>), kWgChainSmemBytes},  // <kPass1, kCheckpoints, kUWarpgroup>
      {k(chunk_chain_wgmma_kernel<M, false, false, true>), kWgChainSmemBytes},
      {k(chunk_chain_wgmma_kernel<M, false, true, false>), kWgChainSmemBytes},
      {k(chunk_chain_wgmma_kernel<M, false, true, true>), kWgChainSmemBytes},
      {k(chunk_chain_wgmma_kernel<M, true, false, false>), kWgChainSmemBytes},
      {k(chunk_chain_wgmma_kernel<M, true, true, false>), kWgChainSmemBytes},
      {k(chunk_chain_wgmma_kernel<M, true, false, false, true>), kWgChainSmemBytes},
      {k(segment_combine_kernel<M>), kCombineSmemBytes},
  };
  for (const Limit& l : limits) {
    const cudaError_t e = cudaFuncSetAttribute(l.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(l.bytes));
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// The prepare kernel over p.chunk_slots slots (a window's, with p.window_chunks).
// The wgmma chain's chunks by the wgmma prepare kernel (with the maps when on), p.prep_heads
// value heads a CTA.
template <class M>
cudaError_t launch_prepare(const ChunkParams& p, const TileMaps& maps, cudaStream_t stream) {
  if (p.chunk_slots <= 0) return cudaSuccess;
  const dim3 grid(unsigned(p.chunk_slots), unsigned(p.Hv));
  if (runs_wgmma_chain(p)) {
    if (p.prep_heads < 1 || p.ratio % p.prep_heads != 0) return cudaErrorInvalidValue;
    const dim3 groups(grid.x, unsigned(p.Hv / p.prep_heads));
    const size_t smem = prepare_wgmma_smem_bytes();  // (the kernels' limit: set_split_smem_limits)
    const bool group = p.prep_heads > 1;
    if (p.chain_forms_u)
      (group ? chunk_prepare_wgmma_kernel<M, true, true> : chunk_prepare_wgmma_kernel<M, false, true>)
          <<<groups, dim3(kThreads), smem, stream>>>(p, maps);
    else
      (group ? chunk_prepare_wgmma_kernel<M, true, false> : chunk_prepare_wgmma_kernel<M, false, false>)
          <<<groups, dim3(kThreads), smem, stream>>>(p, maps);
  } else
    chunk_prepare_kernel<M><<<grid, dim3(kThreads), sizeof(PrepSmem), stream>>>(p);
  return cudaGetLastError();
}

// The chain kernel for pass p.seg_pass: `runs` chain runs of every (sequence, value head)
// (chain_run: 1 for a whole pass or a window), p.chain_split CTAs each (with p.chain_wgmma,
// the wgmma chain).
template <class M>
cudaError_t launch_chain(const ChunkParams& p, int64_t runs, const TileMaps& maps, cudaStream_t stream) {
  const dim3 grid(unsigned(p.N * p.Hv * p.chain_split * runs));
  const bool ckpt = p.ckpt_tokens > 0;
  if (runs_wgmma_chain(p) && p.seg_pass == 1) {  // paired: one CTA for a middle segment's R and A
    const dim3 pass1(unsigned(p.N * p.Hv * kVSplit * wg_chain_pass1_ctas(p.segments)));
    (p.seg_live ? chunk_chain_wgmma_kernel<M, true, false, false, true>
     : ckpt     ? chunk_chain_wgmma_kernel<M, true, true, false>
                : chunk_chain_wgmma_kernel<M, true, false, false>)
        <<<pass1, dim3(kWgChainCtaThreads), kWgChainSmemBytes, stream>>>(p, maps);
  } else if (runs_wgmma_chain(p) && p.chain_forms_u) {  // U^T by the chain's U warpgroup
    (ckpt ? chunk_chain_wgmma_kernel<M, false, true, true> : chunk_chain_wgmma_kernel<M, false, false, true>)
        <<<grid, dim3(kWgChainCtaThreads), kWgChainSmemBytes, stream>>>(p, maps);
  } else if (runs_wgmma_chain(p)) {
    (ckpt ? chunk_chain_wgmma_kernel<M, false, true, false> : chunk_chain_wgmma_kernel<M, false, false, false>)
        <<<grid, dim3(kWgChainCtaThreads), kWgChainSmemBytes, stream>>>(p, maps);
  } else if (ckpt) {  // (the host sends such calls to the fused kernel)
    return cudaErrorInvalidValue;
  } else if (p.chain_split == 1)
    chunk_chain_kernel<M, 1><<<grid, dim3(kChainThreads), sizeof(ChainSmemFull), stream>>>(p);
  else if (p.chain_split == kVSplit)
    chunk_chain_kernel<M, kVSplit><<<grid, dim3(kChainThreads), sizeof(ChainSmem), stream>>>(p);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

// The chain kernel for one window (p.seg_pass = kPassWindow).
template <class M>
cudaError_t launch_window_chain(const ChunkParams& p, const TileMaps& maps, cudaStream_t stream) {
  return launch_chain<M>(p, 1, maps, stream);
}

// The kernels on `stream`: prepare, then the chain (one pass), or with p.segments > 1 the
// segment runs, the combine and the segments again. p.prepared holds p.chunk_slots x Hv
// prepared chunks and, with segments, p.seg_states the segment states. (Windows: the host runs
// launch_prepare and launch_window_chain per window, chunked_host.cpp.)
template <class M>
cudaError_t launch_chunked_split(ChunkParams p, const TileMaps& maps, cudaStream_t stream) {
  cudaError_t e = set_split_smem_limits<M>();
  if (e == cudaSuccess) e = launch_prepare<M>(p, maps, stream);
  if (e != cudaSuccess) return e;
  if (p.segments < 2) {
    p.seg_pass = 0;
    return launch_chain<M>(p, 1, maps, stream);
  }
  p.seg_pass = 1;
  if ((e = launch_chain<M>(p, pass1_runs(p.segments), maps, stream)) != cudaSuccess) return e;
  if (p.segments > 2) {
    segment_combine_kernel<M><<<dim3(unsigned(p.N * p.Hv * (kV / kCombineRows))), dim3(kCombineThreads),
                             kCombineSmemBytes, stream>>>(p);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
  }
  p.seg_pass = 2;
  return launch_chain<M>(p, p.segments - 1, maps, stream);
}

}  // namespace gdn::cuda::chunked

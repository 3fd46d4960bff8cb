// The fused chunked prefill kernel: one CTA of 8 warps per (sequence, value head) walks the
// sequence chunk by chunk and does every step (chunked_steps.cuh) of every chunk; the V x K f32
// state never leaves registers between chunks. No workspace. The form for batches with at
// least about one CTA per SM (choose_form() in chunked_tile.h). Included by one .cu per input
// dtype (explicit instantiations). The chunk's tiles (Vc, Qc, Kc, -W, P, T) are in CoreTiles'
// layouts (chunked_tile.h): on sm_90a the products run on wgmma (chunked_wgmma.cuh), q, k, v
// arrive by TMA and o leaves by TMA store (tma.cuh; where the views allow, else cp.async and
// thread stores); elsewhere everything runs on mma.sync through ldmatrix, the same sums.
// Chunk c + 1's m and P (its key products and their epilogue) are formed during chunk c's state
// update, whose products run beside the epilogue's CUDA-core work; on sm_90a so are chunk c's o
// staging and chunk c + 1's diagonal inverse blocks. State checkpoints
// (chunk_checkpoint_every) are stored from the registers at the chunks' ends that ask for them.
#pragma once

#include "cuda/chunked_fused_ws.cuh"
#include "cuda/chunked_steps.cuh"
#include "cuda/chunked_wgmma.cuh"
#include "cuda/tma.cuh"

namespace gdn::cuda::chunked {

#if GDN_CHUNKED_WGMMA
// The chunk's q, k (key head j) and v (value head h) rows from token tok0 into buffer `buf` by
// TMA (one thread): two 64-column boxes a tile, 128-byte swizzled as CoreTiles' Swizzle128At
// lays them out; rows past the tensor's tokens arrive as zeros. Not for a packed sequence's
// partial chunk (its box would hold the next sequence's rows: the kernel copies it by
// cp.async). Their 48 KB are credited to tiles_full[buf].
__device__ __forceinline__ void tma_chunk_tiles(const ChunkParams& p, const TileMaps& maps, Smem& s, int buf,
                                                int64_t n, int64_t tok0, int j, int h) {
  constexpr uint32_t kBoxBytes = kC * 64 * 2;
  const int seq = p.cu_seqlens ? 0 : int(n), tok = int(tok0);
  mbarrier_arrive_expect(&s.tiles_full[buf], 6 * kBoxBytes);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    tma_load_4d(&s.q[buf][0][0] + half * kC * 64, &maps.q, &s.tiles_full[buf], 64 * half, j, tok, seq);
    tma_load_4d(&s.k[buf][0][0] + half * kC * 64, &maps.k, &s.tiles_full[buf], 64 * half, j, tok, seq);
    tma_load_4d(&s.v[buf][0][0] + half * kC * 64, &maps.v, &s.tiles_full[buf], 64 * half, h, tok, seq);
  }
}
#endif


// kCheckpoints: the instance for calls with state checkpoints (p.ckpt_tokens > 0); the other
// one has none of their code (in the loop it cost the fused cases 2.5%: H200, same run).
template <class M, bool kCheckpoints>
__global__ void __launch_bounds__(kThreads, 1) chunked_prefill_kernel(const __grid_constant__ ChunkParams p,
                                                                  const __grid_constant__ TileMaps maps) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u));
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, q = lane & 3;
  const int64_t n = longest_first(p, blockIdx.x / p.Hv);
  const int h = int(blockIdx.x % p.Hv);
  const int j = p.tiled ? h % p.Hk : h / p.ratio;  // key / query head

  Sequence sq;
  if (!begin_fused_sequence<kCheckpoints, kThreads>(p, n, h, tid, sq)) return;

  float S[16][4];  // the state's rows [16 warp, +16), all K columns: f32, on chip for the sequence
  load_state(p, sq.slot, h, S, 16 * warp, 0, g, q);
  const HeadGate hg = head_gate(p, h);
  if (!p.l2norm && tid < kC) s.rq[tid] = s.rk[tid] = 1.f;
  {  // T's blocks above the diagonal: zeros for the whole sequence (gate_inverse writes the rest)
    constexpr int kPieces = int(sizeof(HalfPair) / sizeof(uint4));
    uint4* t = reinterpret_cast<uint4*>(&s.t);
    for (int i = tid; i < kPieces; i += kThreads) t[i] = make_uint4(0u, 0u, 0u, 0u);
  }

  // The gates: chunk 0's here; chunk c + 1's by kGateWarp at chunk c's loop top, beside the
  // inverse's first phase (warps 0..3: the forward substitution, or on sm_90a the 16 x 16
  // merges), into G_next / beta_next, which chunk c's state update
  // reads for chunk c + 1's m and P and kGateWarp moves to G / beta at chunk c + 1's top.
  // (Formed by warp 0 at the loop top, they kept the other seven warps at the next barrier for
  // about 6% of the step: Nsight Compute.)
  constexpr int kGateWarp = 4;
  const int64_t chunks = (sq.len + kC - 1) / kC;
  const auto live_rows = [&](int64_t c) { return int(sq.len - c * kC < kC ? sq.len - c * kC : kC); };
#if GDN_CHUNKED_WGMMA
  const bool tma = maps.on != 0;  // q, k, v by TMA (else cp.async)
  // The thread that issues the TMA copies (q, k, v in; o out: one thread, whose bulk groups
  // bulk_wait_all waits for). In warp 6, idle during the loop top's inverse phase; thread 0
  // delayed warp 0's share of the forward substitution by the copies' issue and its wait for
  // chunk c - 2's o (Nsight Compute: warp 0 and kGateWarp the phase's last warps).
  constexpr int kCopyThread = 6 * 32;
  const bool copier = tid == kCopyThread;
  if (tma && tid == 0) {
    mbarrier_init(&s.tiles_full[0], 1);
    mbarrier_init(&s.tiles_full[1], 1);
    fence_mbarrier_init();  // before the copies that complete on them
  }
  __syncthreads();  // the barriers initialised before anyone waits on them
  // A packed sequence's last partial chunk comes by cp.async even with TMA: a box would bring
  // the next sequence's first rows, which the padding rows' zero beta and gate keep out of
  // every sum only while they are finite (0 x Inf is NaN). It is the sequence's last chunk, so
  // the mbarrier phases of the chunks before it are unchanged.
  const auto by_tma = [&](int64_t c) { return tma && !(p.cu_seqlens && live_rows(c) < kC); };
#endif
  const auto load_tiles = [&](int b, int64_t c) {
#if GDN_CHUNKED_WGMMA
    if (tma && !by_tma(c)) {  // buffer b's last reader may be a TMA store of o: read out first
      if (copier) bulk_wait_all<true>();
      __syncthreads();
    }
    if (by_tma(c)) {
      if (copier) {
        bulk_wait_all<true>();  // chunk c - 2's o, staged in buffer b, has been read out
        tma_chunk_tiles(p, maps, s, b, n, sq.bos + c * kC, j, h);
      }
      return;
    }
#endif
    load_chunk_tiles(p, s, b, n, sq.bos + c * kC, live_rows(c), j, h, tid);
  };
  // Chunk c's tiles have landed (the copies issued at chunk c - 1's top, or before the loop),
  // visible to this thread and to wgmma; a barrier then makes them everyone's.
  const auto wait_tiles = [&](int64_t c) {
#if GDN_CHUNKED_WGMMA
    if (by_tma(c)) {
      mbarrier_wait(&s.tiles_full[c & 1], uint32_t(c >> 1) & 1u);
    } else {
      cp_async_wait<0>();
      fence_shared_for_wgmma();  // this thread's q, k, v copies -> wgmma
    }
#else
    cp_async_wait<0>();
#endif
  };
  // Chunk 0's m and P; chunk c + 1's are formed during chunk c's state update.
  if (chunks > 0) {
    load_tiles(0, 0);
    cp_async_commit();
    if (warp == 0) chunk_gates(p, s.G, s.beta, hg, load_raw_gates(p, n, sq, h, 0, lane), live_rows(0), lane);
    wait_tiles(0);
    __syncthreads();
    if (p.l2norm) {
      row_norms<M, CoreTiles>(s, 0, warp, lane);
      __syncthreads();
    }
#if GDN_CHUNKED_WGMMA
    {
      float kk[4][4], qk[4][4];
      wgmma_key_products_issue<M>(s, 0, warp, kk, qk);
      wgmma_wait<0>();
      wgmma_key_products_store<M>(s, warp, lane, kk, qk, &s.p.hi[0][0], &s.p.lo[0][0], s.G, s.beta, p.scale);
    }
    __syncthreads();  // m is complete
    invert_diagonal_blocks(s, warp, lane);  // chunk c's are formed during chunk c - 1's state update
#else
    key_products<M, CoreTiles>(s, 0, warp, lane, &s.p.hi[0][0], &s.p.lo[0][0], s.G, s.beta, p.scale);
#endif
  }

  RawGates gates_ahead;  // kGateWarp: the raw gates of the chunk after next
  if (warp == kGateWarp && chunks > 1) gates_ahead = load_raw_gates(p, n, sq, h, 1, lane);
  int64_t next_checkpoint = kCheckpoints ? first_checkpoint_chunk(p, 0) : -1;
  for (int64_t c = 0; c < chunks; ++c) {
    const int buf = int(c & 1);
    const int64_t tok0 = sq.bos + c * kC;
    const int rows = live_rows(c);
    const bool next = c + 1 < chunks;
    __syncthreads();  // chunk c - 1 is done with every buffer; chunk c's m and P are written
    if (next) load_tiles(buf ^ 1, c + 1);
    cp_async_commit();
    // chunk c + 1's raw gates, loaded during chunk c - 1's state update (used right after this
    // barrier: loaded here, their latency held up the inverse's first barrier)
    const RawGates gates = gates_ahead;

    // Intra-chunk: X = (I + m)^-1, T and Xw, -W and U (no dependence on S)
    if (warp == kGateWarp) {
      if (c > 0) {  // chunk c's gates, formed during chunk c - 1
        *reinterpret_cast<float2*>(&s.G[2 * lane]) = *reinterpret_cast<const float2*>(&s.G_next[2 * lane]);
        *reinterpret_cast<float2*>(&s.beta[2 * lane]) = *reinterpret_cast<const float2*>(&s.beta_next[2 * lane]);
      }
      __syncwarp();
      if (next) chunk_gates(p, s.G_next, s.beta_next, hg, gates, live_rows(c + 1), lane);
    }
#if GDN_CHUNKED_WGMMA
    merge_inverse_blocks(s, warp, lane);  // the diagonal blocks: during chunk c - 1's state update
#else
    invert_unit_lower(s, warp, lane);
#endif
    __syncthreads();
    gate_inverse<M, CoreTiles>(s, tid);  // T's lower blocks
    if (tid < kC) {  // the chain's per-token factors, once for all warps (the same expressions;
                     // o's scale is folded into q_f and P: o = scale (O diag(q_f) + D^T P^T))
      const ChainTiles own{nullptr, nullptr, nullptr, nullptr, nullptr, s.G, s.rq, s.rk};
      s.q_f[tid] = output_factor<false>(own, tid) * p.scale;
      s.k_f[tid] = state_factor<false>(own, s.G[kC - 1], tid);
    }
    float D[8][4];  // D^T of the chunk: [16 value rows, C tokens]
#if GDN_CHUNKED_WGMMA
    fence_shared_for_wgmma();  // this thread's P, T stores -> wgmma
    __syncthreads();
    wgmma_minus_w_new_values<M>(s, buf, warp, lane, D);
    fence_shared_for_wgmma();  // this thread's -W stores -> the chain's wgmma
#else
    __syncthreads();
    minus_w<M, CoreTiles>(s, buf, warp, lane);
    new_values<M, CoreTiles>(s, buf, warp, lane, D);
#endif
    __syncthreads();

    // The chain: D = U - W S^T, O, then the next start state; beside the state update, chunk
    // c + 1's m and P (-W, which shares m's space, and P are no longer read by then)
    const ChainTiles ct{&s.w_neg[0][0], &s.q[buf][0][0], &s.k[buf][0][0], &s.p.hi[0][0], &s.p.lo[0][0],
                        s.G, s.q_f, s.k_f};
    float O[8][4];  // O^T of the chunk: [16 value rows, C tokens]
#if GDN_CHUNKED_WGMMA
    const float decay = chunk_decay(ct);
    wgmma_chain_outputs<M>(ct, lane, S, D, O);
#else
    key_products<M, CoreTiles>(ct, lane, S, D, O, 0);
    finish_outputs<M, 0xFu, true, CoreTiles>(ct, lane, D, O);
    advance_state<M, true, CoreTiles>(ct, lane, D, S, 0);
#endif
    if (next) wait_tiles(c + 1);
    __syncthreads();  // every warp is done with -W and P; chunk c + 1's tiles are everyone's
    if (next && p.l2norm) {
      row_norms<M, CoreTiles>(s, buf ^ 1, warp, lane);  // chunk c's rq, rk are no longer read
      __syncthreads();
    }
    uint16_t* o_stage = &s.q[buf][0][0];  // chunk c's o, in q's layout: [C tokens, V]
#if GDN_CHUNKED_WGMMA
    // o by two TMA boxes where all 64 rows are this sequence's (dense: rows past T are clipped;
    // packed: a partial chunk's box would write the next sequence's rows), else thread by thread
    const bool box_store = tma && (rows == kC || !p.cu_seqlens);
    {  // issued and stored after the last chunk too, on stale tiles and gates, into m and P that
       // nothing reads again: the same straight line every chunk (ptxas serialises every wgmma
       // of the kernel when it cannot prove the accumulators read after wgmma_wait<4> complete)
      float kk[4][4], qk[4][4];
      uint32_t a[4][2][4];
      wgmma_key_products_issue<M>(s, buf ^ 1, warp, kk, qk);
      wgmma_state_update<M>(ct, lane, decay, S, D, a);
      // While the products run: chunk c's o staged (q[buf]'s last reader, the outputs' S Qc^T, is
      // done: the barrier above), chunk c + 1's m and P, then its inverse's diagonal blocks.
      stage_o_stmatrix<M>(o_stage, O, 1.f, warp, lane);
      if (box_store) fence_shared_for_wgmma();  // this thread's accesses of buf -> the TMA store
      wgmma_wait<4>();  // the key products (committed before the state update's four groups)
      wgmma_key_products_store<M>(s, warp, lane, kk, qk, &s.p.hi[0][0], &s.p.lo[0][0], s.G_next, s.beta_next, p.scale);
      // chunk c + 2's raw gates in flight while the state update runs: issued at the loop top,
      // their address arithmetic made kGateWarp the inverse phase's last warp
      if (warp == kGateWarp && c + 2 < chunks) gates_ahead = load_raw_gates(p, n, sq, h, c + 2, lane);
      __syncthreads();  // chunk c + 1's m is complete, chunk c's o staged
      if (box_store) {
        if (copier) {
          const int seq = p.cu_seqlens ? 0 : int(n);
          tma_store_4d(&maps.o, o_stage, 0, h, int(tok0), seq);
          tma_store_4d(&maps.o, o_stage + kC * 64, 64, h, int(tok0), seq);
          bulk_commit();
        }
      } else {
        store_chunk_output<CoreTiles::Q>(p, o_stage, n, tok0, rows, h, tid);
        if (tma) fence_shared_for_wgmma();  // this thread's reads and writes of buf -> the TMA that refills it
      }
      invert_diagonal_blocks(s, warp, lane);  // chunk c + 1's (stale after the last chunk, unread)
      wgmma_wait<0>();
    }
#else
    if (next)
      key_products<M, CoreTiles>(s, buf ^ 1, warp, lane, &s.p.hi[0][0], &s.p.lo[0][0], s.G_next, s.beta_next, p.scale);
    if (warp == kGateWarp && c + 2 < chunks) gates_ahead = load_raw_gates(p, n, sq, h, c + 2, lane);
#endif
    if (kCheckpoints && c == next_checkpoint) {  // S is the state after chunk c
      store_checkpoint(p, n, sq, h, c, S, 16 * warp, g, q, checkpoint_slot(p, n, sq, c));
      next_checkpoint += checkpoint_every_chunks(p);
    }

#if !GDN_CHUNKED_WGMMA
    __syncthreads();  // every warp is done reading q[buf]: stage o there, token-major
#pragma unroll
    for (int t = 0; t < 8; ++t)  // (tok, v) = lane (2q + e, g) + 8-aligned block
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        o_stage[at_split<CoreTiles::Q>(2 * q + e, g, 8 * t, 16 * warp)] = M::one(O[t][e]);
        o_stage[at_split<CoreTiles::Q>(2 * q + e, g, 8 * t, 16 * warp + 8)] = M::one(O[t][2 + e]);
      }
    __syncthreads();
    store_chunk_output<CoreTiles::Q>(p, o_stage, n, tok0, rows, h, tid);
#endif
  }
#if GDN_CHUNKED_WGMMA
  if (tma && copier) bulk_wait_all<false>();  // the last chunks' o written before the CTA ends
#endif

  if (p.ht.p) store_state(p, sq.slot, h, S, 16 * warp, 0, g, q);
}

// The fused form: the warp-specialised kernel (p.fused_ws, chunked_fused_ws.cuh) or this one.
template <class M>
cudaError_t launch_chunked(const ChunkParams& p, const TileMaps& maps, cudaStream_t stream) {
  using Kernel = void (*)(ChunkParams, TileMaps);
  const bool ckpt = p.ckpt_tokens > 0;
  const Kernel ws = ckpt ? chunked_prefill_ws_kernel<M, true> : chunked_prefill_ws_kernel<M, false>;
  const Kernel kernel = p.fused_ws ? ws : (ckpt ? chunked_prefill_kernel<M, true> : chunked_prefill_kernel<M, false>);
  const size_t smem = p.fused_ws ? kWsSmemBytes : kFusedSmemBytes;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  kernel<<<dim3(unsigned(p.N * p.Hv)), dim3(p.fused_ws ? kWsThreads : kThreads), smem, stream>>>(p, maps);
  return cudaGetLastError();
}

}  // namespace gdn::cuda::chunked

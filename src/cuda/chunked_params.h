// The chunked prefill kernel's parameter block: a POD passed by value as a __grid_constant__
// argument. chunked_host.cpp fills it from a validated Problem; the kernel reads nothing else.
// Letters as in SPEC.md: N sequences, T tokens, Hk / Hv heads, K / V head dims, P pool slots;
// R x C is the state's stored shape (V x K for the vk layout, K x V for kv).
#pragma once

#include <cstdint>

#include "cuda/batch_params.h"
#include "cuda/tensor_map.h"
#include "cuda/views.h"

namespace gdn::cuda::chunked {

// BatchParams (batch_params.h) and what only the chunked kernel reads.
struct ChunkParams : BatchParams {
  int32_t state_bf16 = 0;   // storage dtype bf16 (else f32)
  int32_t state_kv = 0;     // layout kv (else vk)
  // the split form (chunked_split.cuh) only
  void* prepared = nullptr;     // workspace: PreparedChunk [chunk slots, Hv]
  int64_t chunk_slots = 0;      // chunk_slots() of chunked_tile.h
  int64_t chunks_per_seq = 0;   // dense: ceil(T / C)
  int32_t chain_split = 2;      // chain CTAs per (sequence, value head): 2 key-half, 1 full (chunked_tile.h)
  int32_t chain_wgmma = 0;      // with chain_split 2: the wgmma chain (sm_90a) instead of the key-half one
                                // (runs_wgmma_chain; the prepared tiles' layout follows it)
  // the exact sequence split (context parallelism inside the GPU), dense batches only
  int32_t segments = 1;         // segments per sequence (1: none)
  int32_t seg_pass = 0;         // chain pass: 0 whole sequences, 1 segment runs, 2 segments again
  int64_t seg_chunks = 0;       // chunks per segment
  float* seg_states = nullptr;  // workspace: [N, segments, Hv, 3 (R, A, S_start), V, K] f32
  // the forgotten start (wgmma chain, no checkpoints; null: off): workspace after seg_states,
  // [N, segments, Hv, 8] int32, each transition run warp's (2 CTAs x 4 warps) last chunk of its
  // segment (relative) at whose start the transition from the segment's start was not yet below
  // 2^kForgetExponent, or -1 where its head takes the default layout; in the forgotten start's
  // layout pass 1's local runs write o, and pass 2 redoes only the chunks up to it
  // (chunked_runs.cuh)
  int32_t* seg_live = nullptr;
  int64_t seg_chunks_forget = 0;  // that layout's chunks per segment (the last: the remainder)
  int32_t forget_mode = 0;        // with seg_live: kForgetByGates or kForgetAlways (chunked_runs.cuh)
  // windows (dense batches, the split form without a sequence split; chunked_tile.h): one
  // prepare and one chain launch (seg_pass kPassWindow) per window of chunks
  // [window_begin, window_begin + window_chunks) of every sequence; `prepared` then holds that
  // window's chunks only, sequence n's chunk c at slot n window_chunks + c - window_begin
  int64_t window_begin = 0;
  int64_t window_chunks = 0;      // 0: no windows
  float* window_state = nullptr;  // workspace: [N, Hv, V, K] f32, the state between windows
  int32_t* window_sigma = nullptr;  // workspace, after it: [N, Hv, V / 16] each wgmma chain warp's state
                                    // exponent at its window's end (chunked_range.cuh), the state then
                                    // stored as the registers hold it: the next window goes on bit for bit
  int32_t prep_heads = 1;         // value heads a wgmma prepare CTA takes (prep_group_heads): a
                                  // divisor of the ratio, all sharing one key head
  int32_t chain_forms_u = 0;      // the wgmma chain's U warpgroup forms U^T from T and Vc (its
                                  // kUWarpgroup instance), the prepare kernel writing T for it
                                  // (kWritesT); else the prepared chunk holds U^T (set by
                                  // cuda_chunked_forward; GDN_CHUNKED_CHAIN_U forces it)
  // state checkpoints (chunk_checkpoint_every; the fused kernel and the wgmma chain): the state
  // after every ckpt_tokens tokens of a sequence (a multiple of C), to snapshots dense
  // [N, T, Hv, R, C] ((n, t, h, r * ckpt_row + c)) or a pool [P2, Hv, R, C] at slot
  // snapshot_indices[n, t]
  int64_t ckpt_tokens = 0;                   // 0: none
  TokenView ckpt_dense;                      // p null: pooled
  int64_t ckpt_row = 0;
  StateView ckpt_pool;
  const int32_t* snapshot_indices = nullptr;  // [N, T] | [T_total] in [-1, P2), checked by the kernel
  int64_t snap_idx_seq = 0, snap_idx_tok = 0;
  int64_t snap_pool_slots = 0;                // P2
  // the split form with snapshot_indices: workspace [N] int32, sequence n's indices all valid
  // (1) or not (0), written by checkpoint_index_check_kernel before any chain CTA reads it
  int32_t* ckpt_seq_ok = nullptr;
  // the fused form's warp-specialised kernel (chunked_fused_ws.cuh; sm_90a with TMA maps)
  // instead of chunked_fused.cuh's
  int32_t fused_ws = 0;
  // the f32-input kernel (chunked_f32.cu): CTAs per (sequence, value head), each taking
  // V / f32_value_split of the state's rows (f32_value_split, chunked_tile.h)
  int32_t f32_value_split = 1;
  // with the sequence split (segments > 1), pass 1's CTAs per run (f32_value_split: pass 2's)
  int32_t f32_pass1_split = 1;
};

// The second parameter block of the fused kernel and of the wgmma chain (its own, so that
// ChunkParams and the other kernels keep their layout): q, k, v and o as TMA tensor maps
// (tensor_map.h; dense [N, T, H, 128], packed [1, T_total, H, 128]) on sm_90a; on 0 the kernels
// copy by cp.async and store o thread by thread.
struct TileMaps {
  TokenTensorMap q, k, v, o;
  int32_t on = 0;
};

// ChunkParams::seg_pass of a window's chain launch.
inline constexpr int32_t kPassWindow = 3;

}  // namespace gdn::cuda::chunked

// The kernel-side parameter block of the CUDA recurrent (decode / verify) kernels: a POD passed
// by value as a __grid_constant__ argument. cuda_backend.cpp fills it from a validated Problem;
// the kernels read nothing else. Letters as in SPEC.md: N sequences, T tokens, Hk / Hv heads,
// K / V head dims, P (P2) state (snapshot) pool slots; R x C is the state's stored shape,
// V x K for the vk layout and K x V for kv.
#pragma once

#include <cstdint>

#include "cuda/batch_params.h"
#include "cuda/fast_div.h"
#include "cuda/views.h"

namespace gdn::cuda {

// Tag type of bf16 state storage (the kernels' state element type is float or Bf16).
struct Bf16 {
  uint16_t bits;
};

enum SnapshotMode : int32_t { kSnapNone = 0, kSnapDense = 1, kSnapPool = 2 };

// BatchParams (batch_params.h) and what only the recurrent kernels read.
struct DecodeParams : BatchParams {
  int32_t K = 0, V = 0;
  int32_t slices = 1;   // CTAs per (sequence, value head): V / (state rows or columns per CTA)
  FastDiv by_slices, by_Hv, by_Hk, by_ratio;  // divisors of CTA indices (cta_work): set_grid_divisors
  int32_t stream_state = 1;  // 0: the plain-hint instance where one exists (decode_launch.cuh); host side only
  int32_t first_inputs_early = 0;  // 1: the early-inputs instance where one exists (decode_launch.cuh); host side only

  // ---- per-token state snapshots
  int32_t snap_mode = kSnapNone;
  TokenView snap_dense;    // [N, T, Hv, R, C]: (n, t, h, r * snap_row + c)
  int64_t snap_row = 0;
  StateView snap_pool;     // [P2, Hv, R, C] at slot snapshot_indices[n, t]
  const int32_t* snapshot_indices = nullptr;  // [N, T] | [T_total] in [-1, P2), checked by the kernel
  int64_t snap_idx_seq = 0, snap_idx_tok = 0;
  int64_t snap_pool_slots = 0;                // P2
  int64_t snap_every = 0;  // > 0: only after tokens t with (t + 1) % snap_every == 0 (checkpoints)
};

// The by_ divisors from slices, Hv, Hk and ratio: whoever fills a DecodeParams calls it last.
inline void set_grid_divisors(DecodeParams& p) {
  p.by_slices = FastDiv::make(uint32_t(p.slices));
  p.by_Hv = FastDiv::make(uint32_t(p.Hv));
  p.by_Hk = FastDiv::make(uint32_t(p.Hk));
  p.by_ratio = FastDiv::make(uint32_t(p.ratio));
}

}  // namespace gdn::cuda

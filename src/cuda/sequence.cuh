// A batch's sequences on the device: where sequence n's tokens are and which state slot it uses,
// with the checks SPEC.md's "Errors" asks of index contents in device memory. Params: a kernel's
// parameter block with the fields T, T_total, cu_seqlens, cu_seqlens_i64, state_indices,
// state_indices_stride, pool_slots. Used by the recurrent and the chunked kernels.
#pragma once

#include <cstdint>

#include "gdn/gdn.h"

namespace gdn::cuda {

struct Sequence {
  int64_t bos = 0;   // first token in the batch's token axis
  int64_t len = 0;   // tokens
  int64_t slot = 0;  // state slot: n (dense), state_indices[n] (pool); -1: padding
};

template <class Params>
__device__ __forceinline__ int64_t cu_seqlen_at(const Params& p, int64_t i) {
  return p.cu_seqlens_i64 ? static_cast<const int64_t*>(p.cu_seqlens)[i]
                          : static_cast<const int32_t*>(p.cu_seqlens)[i];
}

// Sequence n's state slot alone: n (dense) or state_indices[n] (pool; -1: padding), and whether
// it is in [-1, P). A kernel may start reading the state before resolve_span checks the rest.
template <class Params>
__device__ __forceinline__ bool state_slot(const Params& p, int64_t n, int64_t& slot) {
  slot = n;
  if (!p.state_indices) return true;
  slot = p.state_indices[n * p.state_indices_stride];
  return slot >= -1 && slot < p.pool_slots;
}

// Sequence n's tokens and state slot. Checks cu_seqlens[n], cu_seqlens[n + 1] (start 0,
// non-decreasing, within T_total) and state_indices[n] in [-1, P); returns the
// GDN_ERROR_FLAG_* bits of the invalid ones (0: valid). kMayBePacked false: a kernel only
// ever launched for dense batches (no cu_seqlens) skips that code.
template <bool kMayBePacked = true, class Params>
__device__ __forceinline__ uint32_t resolve_span(const Params& p, int64_t n, Sequence& s) {
  uint32_t bad = 0;
  if (kMayBePacked && p.cu_seqlens) {
    const int64_t bos = cu_seqlen_at(p, n), eos = cu_seqlen_at(p, n + 1);
    if ((n == 0 && bos != 0) || bos < 0 || eos < bos || eos > p.T_total) bad |= GDN_ERROR_FLAG_CU_SEQLENS;
    s.bos = bos;
    s.len = eos - bos;
  } else {
    s.bos = 0;
    s.len = p.T;
  }
  if (!state_slot(p, n, s.slot)) bad |= GDN_ERROR_FLAG_STATE_INDICES;
  return bad;
}

// snapshot_indices[n, t] of the live sequence s in [-1, P2) for every t (Params with
// snapshot_indices, snap_idx_seq, snap_idx_tok and snap_pool_slots): the flag's bit, else 0.
// Every thread of the CTA calls it (a barrier). kInFlight loads a thread in flight at once (the
// chunked kernels' long sequences; decode's are one round).
template <int kInFlight = 1, class Params>
__device__ __forceinline__ uint32_t snapshot_indices_flag(const Params& p, int64_t n, const Sequence& s) {
  const int32_t* idx = p.snapshot_indices + n * p.snap_idx_seq + s.bos * p.snap_idx_tok;
  const int64_t threads = blockDim.x;
  int invalid = 0;
  for (int64_t t0 = threadIdx.x; t0 < s.len; t0 += kInFlight * threads) {
    int32_t slot[kInFlight];
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) {
      const int64_t t = t0 + i * threads;
      slot[i] = t < s.len ? idx[t * p.snap_idx_tok] : -1;
    }
#pragma unroll
    for (int i = 0; i < kInFlight; ++i) invalid |= slot[i] < -1 || slot[i] >= p.snap_pool_slots;
  }
  return __syncthreads_or(invalid) ? GDN_ERROR_FLAG_SNAPSHOT_INDICES : 0u;
}

// ORs `bad` into the error word (once per CTA) and says whether the sequence may be written.
__device__ __forceinline__ bool valid_or_flagged(uint32_t* error_flags, uint32_t bad) {
  if (bad == 0) return true;
  if (threadIdx.x == 0 && error_flags) atomicOr(error_flags, bad);
  return false;
}

}  // namespace gdn::cuda

// Where a split form's prepared chunks live in its workspace (chunk_slots() in chunked_tile.h):
// from a prepare CTA's slot to its (sequence, chunk), and from a chain's (sequence, chunk) to the
// slot. Shared by the half-precision split form (chunked_split.cuh) and the f32 kernels'
// (chunked_f32.cu).
#pragma once

#include <cstdint>

#include "cuda/chunked_params.h"
#include "cuda/chunked_tile.h"
#include "cuda/sequence.cuh"

namespace gdn::cuda::chunked {

// The (sequence n, chunk c) whose workspace slot is `slot`, or false for a slot between two
// sequences' slots. Packed: the CTA's threads test every valid sequence against the slot (a
// binary search would trust cu_seqlens to be sorted before anything has checked it).
__device__ __forceinline__ bool slot_owner(const ChunkParams& p, int64_t slot, int64_t& n, int64_t& c) {
  // dense: the slot is a block index and the divisors at most the grid's width, so 32-bit
  // divisions (64-bit ones are long emulated sequences at the CTA's start)
  if (!p.cu_seqlens && p.window_chunks > 0) {  // a window's chunks of every sequence
    const uint32_t s = uint32_t(slot), d = uint32_t(p.window_chunks);
    n = s / d;
    c = p.window_begin + s % d;
    return c < p.chunks_per_seq;
  }
  if (!p.cu_seqlens) {
    const uint32_t s = uint32_t(slot), d = uint32_t(p.chunks_per_seq);
    n = s / d;
    c = s % d;
    return true;
  }
  __shared__ long long owner;  // the highest-numbered sequence claiming the slot (one winner even
                               // when invalid entries make valid-looking sequences overlap)
  if (threadIdx.x == 0) owner = -1;
  __syncthreads();
  for (int64_t m = threadIdx.x; m < p.N; m += blockDim.x) {
    const int64_t bos = cu_seqlen_at(p, m), eos = cu_seqlen_at(p, m + 1);
    if ((m == 0 && bos != 0) || bos < 0 || eos < bos || eos > p.T_total) continue;  // invalid (resolve_span)
    const int64_t base = bos / kC + m;
    if (slot >= base && slot < base + (eos - bos + kC - 1) / kC) atomicMax(&owner, (long long)m);
  }
  __syncthreads();
  n = owner;
  if (n < 0) return false;
  c = slot - (cu_seqlen_at(p, n) / kC + n);
  return true;
}

// chunk_slots() in chunked_tile.h: sequence n's chunk c (in a window: of the window's slots).
__device__ __forceinline__ int64_t chunk_slot(const ChunkParams& p, int64_t n, const Sequence& sq, int64_t c) {
  if (p.cu_seqlens) return sq.bos / kC + n + c;
  return p.window_chunks > 0 ? n * p.window_chunks + (c - p.window_begin) : n * p.chunks_per_seq + c;
}

}  // namespace gdn::cuda::chunked

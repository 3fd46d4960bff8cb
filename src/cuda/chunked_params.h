// The chunked prefill kernel's parameter block: a POD passed by value as a __grid_constant__
// argument. chunked_host.cpp fills it from a validated Problem; the kernel reads nothing else.
// Letters as in SPEC.md: N sequences, T tokens, Hk / Hv heads, K / V head dims, P pool slots;
// R x C is the state's stored shape (V x K for the vk layout, K x V for kv).
#pragma once

#include <cstdint>

#include "cuda/batch_params.h"
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
  // the exact sequence split (context parallelism inside the GPU), dense batches only
  int32_t segments = 1;         // segments per sequence (1: none)
  int32_t seg_pass = 0;         // chain pass: 0 whole sequences, 1 segment runs, 2 segments again
  int64_t seg_chunks = 0;       // chunks per segment
  float* seg_states = nullptr;  // workspace: [N, segments, Hv, 3 (R, A, S_start), V, K] f32
};

}  // namespace gdn::cuda::chunked

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
};

}  // namespace gdn::cuda::chunked

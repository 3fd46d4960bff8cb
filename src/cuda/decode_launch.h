// The decode launchers, one explicit instantiation per (state layout, state storage dtype) in
// decode_{vk,kv}_{f32,bf16}.cu. Host code (cuda_backend.cpp) calls these; they return the
// launch's status and never synchronise.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/decode_params.h"

namespace gdn::cuda {

// Launches the kernel for K = p.K (decode_tile_valid) on `stream`: p.N * p.Hv * p.slices CTAs
// of decode_threads(KV) threads. S: float or Bf16; one: every sequence has at most one token
// (dense, T <= 1; decode_tile.h).
template <bool KV, class S>
cudaError_t launch_decode(const DecodeParams& p, bool one, cudaStream_t stream);

extern template cudaError_t launch_decode<false, float>(const DecodeParams&, bool, cudaStream_t);
extern template cudaError_t launch_decode<false, Bf16>(const DecodeParams&, bool, cudaStream_t);
extern template cudaError_t launch_decode<true, float>(const DecodeParams&, bool, cudaStream_t);
extern template cudaError_t launch_decode<true, Bf16>(const DecodeParams&, bool, cudaStream_t);

}  // namespace gdn::cuda

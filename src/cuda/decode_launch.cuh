// Definition of launch_decode (decode_launch.h): K and the held state's form to template
// arguments.
#pragma once

#include "cuda/decode_kv.cuh"
#include "cuda/decode_launch.h"
#include "cuda/decode_vk.cuh"

namespace gdn::cuda {

template <bool KV, int K, class S, bool Raw>
cudaError_t launch_tile(const DecodeParams& p, cudaStream_t stream) {
  if constexpr (DecodeTile<KV, K, int(sizeof(S)), Raw>::compiles) {
    const dim3 grid(unsigned(p.N * p.Hv * p.slices));
    if constexpr (KV)
      decode_kv_kernel<K, S, Raw><<<grid, decode_threads(true), 0, stream>>>(p);
    else
      decode_vk_kernel<K, S, Raw><<<grid, decode_threads(false), 0, stream>>>(p);
    return cudaGetLastError();
  } else {
    return cudaErrorInvalidConfiguration;
  }
}

template <bool KV, int K, class S>
cudaError_t launch_k(const DecodeParams& p, bool raw, cudaStream_t stream) {
  if constexpr (sizeof(S) == 2)  // a bf16 state: held as stored, or in f32
    if (raw) return launch_tile<KV, K, S, true>(p, stream);
  return launch_tile<KV, K, S, false>(p, stream);
}

template <bool KV, class S>
cudaError_t launch_decode(const DecodeParams& p, bool raw, cudaStream_t stream) {
  switch (p.K) {
    case 64: return launch_k<KV, 64, S>(p, raw, stream);
    case 128: return launch_k<KV, 128, S>(p, raw, stream);
    default: return cudaErrorInvalidConfiguration;
  }
}

}  // namespace gdn::cuda

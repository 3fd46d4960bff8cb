// Definition of launch_decode (decode_launch.h): K and the held state's form to template
// arguments.
#pragma once

#include "cuda/decode_kv.cuh"
#include "cuda/decode_launch.h"
#include "cuda/decode_vk.cuh"

namespace gdn::cuda {

template <bool KV, int K, class S, bool One, class In = AnyInputs>
cudaError_t launch_tile(const DecodeParams& p, cudaStream_t stream) {
  if constexpr (DecodeTile<KV, K, int(sizeof(S)), One>::compiles) {
    const dim3 grid(unsigned(p.N * p.Hv * p.slices));
    if constexpr (KV)
      decode_kv_kernel<K, S, One><<<grid, decode_threads(true), 0, stream>>>(p);
    else
      decode_vk_kernel<K, S, One, In><<<grid, decode_threads(false), 0, stream>>>(p);
    return cudaGetLastError();
  } else {
    return cudaErrorInvalidConfiguration;
  }
}

// One token per sequence: a kernel without the token loop where it differs from the general
// one (vk; a bf16 state, held as stored); kv with an f32 state would compile to the same tile.
// vk, plain or serving bf16 inputs: the one-token kernel with them fixed at compile time.
template <bool KV, int K, class S>
cudaError_t launch_k(const DecodeParams& p, DecodeForm form, cudaStream_t stream) {
  if constexpr (!KV) {
    if (form == DecodeForm::kOneTokenPlainBf16) return launch_tile<KV, K, S, true, PlainBf16Inputs>(p, stream);
    if (form == DecodeForm::kOneTokenServingBf16) return launch_tile<KV, K, S, true, ServingBf16Inputs>(p, stream);
  }
  if constexpr (sizeof(S) == 2 || !KV)
    if (form != DecodeForm::kTokens) return launch_tile<KV, K, S, true>(p, stream);
  return launch_tile<KV, K, S, false>(p, stream);
}

template <bool KV, class S>
cudaError_t launch_decode(const DecodeParams& p, DecodeForm form, cudaStream_t stream) {
  switch (p.K) {
    case 64: return launch_k<KV, 64, S>(p, form, stream);
    case 128: return launch_k<KV, 128, S>(p, form, stream);
    default: return cudaErrorInvalidConfiguration;
  }
}

}  // namespace gdn::cuda

// Definition of launch_decode (decode_launch.h): K and the held state's form to template
// arguments.
#pragma once

#include "cuda/decode_kv.cuh"
#include "cuda/decode_launch.h"
#include "cuda/decode_vk.cuh"

namespace gdn::cuda {

template <bool KV, int K, class S, bool One, class In = AnyInputs, bool Stream = true, bool FirstEarly = false>
cudaError_t launch_tile(const DecodeParams& p, bool early_launch, cudaStream_t stream) {
  if constexpr (DecodeTile<KV, K, int(sizeof(S)), One>::compiles) {
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = early_launch ? 1 : 0;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(p.N * p.Hv * p.slices));
    config.blockDim = dim3(decode_threads(KV));
    config.stream = stream;
    config.attrs = attribute;
    config.numAttrs = 1;
    cudaError_t e;
    if constexpr (KV)
      e = cudaLaunchKernelEx(&config, decode_kv_kernel<K, S, One>, p);
    else
      e = cudaLaunchKernelEx(&config, decode_vk_kernel<K, S, One, In, Stream, FirstEarly>, p);
    if (e != cudaSuccess) cudaGetLastError();  // returned here, not left for the caller's next check
    return e;
  } else {
    return cudaErrorInvalidConfiguration;
  }
}

// One token per sequence: a kernel without the token loop where it differs from the general
// one (vk; a bf16 state, held as stored); kv with an f32 state would compile to the same tile.
// vk, plain or serving bf16 inputs: the one-token kernel with them fixed at compile time.
// The plain and serving one-token forms of the released models' shape (K = 128, f32 state) come
// in a second instance with plain cache hints on the state, for large calls (p.stream_state 0:
// decode_streams_state in decode_tile.h); a run-time choice inside one kernel cost 3% at B = 1.
template <bool KV, int K, class S>
cudaError_t launch_k(const DecodeParams& p, DecodeForm form, bool early, cudaStream_t stream) {
  if constexpr (!KV) {
    constexpr bool kPlainInstance = K == 128 && sizeof(S) == 4;
    if (form == DecodeForm::kOneTokenPlainBf16) {
      if constexpr (kPlainInstance) {
        if (!p.stream_state)
          return p.first_inputs_early ? launch_tile<KV, K, S, true, PlainBf16Inputs, false, true>(p, early, stream)
                                      : launch_tile<KV, K, S, true, PlainBf16Inputs, false>(p, early, stream);
        if (p.first_inputs_early)
          return launch_tile<KV, K, S, true, PlainBf16Inputs, true, true>(p, early, stream);
      }
      return launch_tile<KV, K, S, true, PlainBf16Inputs>(p, early, stream);
    }
    if (form == DecodeForm::kOneTokenServingBf16) {
      if constexpr (kPlainInstance)
        if (!p.stream_state) return launch_tile<KV, K, S, true, ServingBf16Inputs, false>(p, early, stream);
      return launch_tile<KV, K, S, true, ServingBf16Inputs>(p, early, stream);
    }
    if (form == DecodeForm::kTokensPlainBf16)
      return launch_tile<KV, K, S, false, PlainBf16TokensInputs>(p, early, stream);
  }
  if constexpr (sizeof(S) == 2 || !KV)
    if (form != DecodeForm::kTokens && form != DecodeForm::kTokensPlainBf16)
      return launch_tile<KV, K, S, true>(p, early, stream);
  return launch_tile<KV, K, S, false>(p, early, stream);
}

template <bool KV, class S>
cudaError_t launch_decode(const DecodeParams& p, DecodeForm form, bool early_launch, cudaStream_t stream) {
  switch (p.K) {
    case 64: return launch_k<KV, 64, S>(p, form, early_launch, stream);
    case 128: return launch_k<KV, 128, S>(p, form, early_launch, stream);
    default: return cudaErrorInvalidConfiguration;
  }
}

}  // namespace gdn::cuda

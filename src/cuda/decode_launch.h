// The decode launchers, one explicit instantiation per (state layout, state storage dtype) in
// decode_{vk,kv}_{f32,bf16}.cu. Host code (cuda_backend.cpp) calls these; they return the
// launch's status and never synchronise.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/decode_params.h"

namespace gdn::cuda {

// Which decode kernel runs a call (the host decides, cuda_backend.cpp):
//   kTokens             the general kernel: any number of tokens per sequence, every option;
//   kOneToken           at most one token per sequence (dense, T <= 1): no token loop, a bf16
//                       state held as stored; every option;
//   kOneTokenPlainBf16  one token, vk, and the plain inputs fixed at compile time: bf16 q, k, v,
//                       o; f32 g (log decay) and beta (probability); no q/k norm, no snapshots;
//   kOneTokenServingBf16  one token, vk, the serving inputs fixed: bf16 q, k, v, o; raw gate,
//                       beta logit, q/k L2 norm, no snapshots (gate input dtypes run-time).
//   kTokensPlainBf16    vk, any number of tokens, the plain inputs fixed (snapshots allowed).
// The last three are AnyInputs' kernels with fewer choices left to run time (PlainBf16Inputs,
// ServingBf16Inputs, PlainBf16TokensInputs in decode_common.cuh): the same arithmetic, the
// same bits, fewer instructions. GDN_DECODE_FORM=generic keeps kOneToken / kTokens for them
// (to compare).
enum class DecodeForm { kTokens, kOneToken, kOneTokenPlainBf16, kOneTokenServingBf16, kTokensPlainBf16 };

// Launches the kernel for K = p.K (decode_tile_valid) on `stream`: p.N * p.Hv * p.slices CTAs
// of decode_threads(KV) threads. S: float or Bf16; form: as above (kv has no plain form: it
// takes kOneToken's kernel for every one-token form). early_launch: programmatic dependent
// launch (sm_90): the kernel may be scheduled while the previous kernel on the stream still
// runs, and waits for that kernel's completion and memory (griddepcontrol.wait) before it
// reads anything, so only the launch latency overlaps; ignored where the device lacks it.
template <bool KV, class S>
cudaError_t launch_decode(const DecodeParams& p, DecodeForm form, bool early_launch, cudaStream_t stream);

extern template cudaError_t launch_decode<false, float>(const DecodeParams&, DecodeForm, bool, cudaStream_t);
extern template cudaError_t launch_decode<false, Bf16>(const DecodeParams&, DecodeForm, bool, cudaStream_t);
extern template cudaError_t launch_decode<true, float>(const DecodeParams&, DecodeForm, bool, cudaStream_t);
extern template cudaError_t launch_decode<true, Bf16>(const DecodeParams&, DecodeForm, bool, cudaStream_t);

}  // namespace gdn::cuda

// Definition of launch_decode (decode_launch.h): K and rows per thread to template arguments.
#pragma once

#include "cuda/decode_kv.cuh"
#include "cuda/decode_launch.h"
#include "cuda/decode_vk.cuh"

namespace gdn::cuda {

template <bool KV, int K, class S, int RPT>
cudaError_t launch_tile(const DecodeParams& p, cudaStream_t stream) {
  if constexpr (decode_tile_compiles(KV, K, int(sizeof(S)), RPT)) {
    const dim3 grid(unsigned(p.N * p.Hv * p.slices));
    const size_t stage = size_t(decode_stage_bytes(RPT, p.wide != 0));  // dynamic shared memory
    if constexpr (KV)
      decode_kv_kernel<K, S, RPT><<<grid, kDecodeThreads, stage, stream>>>(p);
    else
      decode_vk_kernel<K, S, RPT><<<grid, kDecodeThreads, stage, stream>>>(p);
    return cudaGetLastError();
  } else {
    return cudaErrorInvalidConfiguration;
  }
}

template <bool KV, int K, class S>
cudaError_t launch_k(const DecodeParams& p, int rpt, cudaStream_t stream) {
  switch (rpt) {
    case 4: return launch_tile<KV, K, S, 4>(p, stream);  // decode_tile.h kRpt
    default: return cudaErrorInvalidConfiguration;
  }
}

template <bool KV, class S>
cudaError_t launch_decode(const DecodeParams& p, int rpt, cudaStream_t stream) {
  switch (p.K) {
    case 64: return launch_k<KV, 64, S>(p, rpt, stream);
    case 128: return launch_k<KV, 128, S>(p, rpt, stream);
    default: return cudaErrorInvalidConfiguration;
  }
}

}  // namespace gdn::cuda

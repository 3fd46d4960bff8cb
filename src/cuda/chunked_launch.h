// Launchers of the chunked prefill kernels, one table per half-precision input dtype
// (chunked_bf16.cu, chunked_f16.cu), and the f32 inputs' kernel. Each launches on `stream` and
// returns the launch's status; none allocates or synchronises. chunked_host.cpp decides which
// run (the plan) and in what order.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/chunked_params.h"

namespace gdn::cuda::chunked {

struct ChunkedLaunchers {
  // the fused kernel: one CTA per (sequence, value head)
  cudaError_t (*fused)(const ChunkParams& p, const TileMaps& maps, cudaStream_t stream);
  // the split form: prepare, then the chain (and the sequence split's passes when p.segments > 1);
  // the maps are the wgmma chain's (p.chain_wgmma)
  cudaError_t (*split)(const ChunkParams& p, const TileMaps& maps, cudaStream_t stream);
  // windows: the split kernels' shared-memory limits (once per call), then per window its
  // preparation and its chain (p.window_begin, p.window_chunks, p.seg_pass = kPassWindow)
  cudaError_t (*split_limits)();
  cudaError_t (*prepare)(const ChunkParams& p, const TileMaps& maps, cudaStream_t stream);
  cudaError_t (*window_chain)(const ChunkParams& p, const TileMaps& maps, cudaStream_t stream);
  // the split form with checkpoints into a pool: each sequence's snapshot indices checked into
  // p.ckpt_seq_ok, once per call before the chains
  cudaError_t (*checkpoint_indices)(const ChunkParams& p, cudaStream_t stream);
  // whether the wgmma chain's loaded code has wgmma (built for sm_90a, not JIT-compiled from the
  // portable PTX)
  bool (*wgmma_chain_runs)();
};

const ChunkedLaunchers& chunked_launchers_bf16();
const ChunkedLaunchers& chunked_launchers_f16();

// f32 q, k, v (chunked_f32.cu), 3xTF32 products: the fused form, or with p.prepared (the workspace:
// F32PreparedChunk [chunk slots, Hv]) the split form's prepare kernel, then its chain.
cudaError_t launch_chunked_f32(const ChunkParams& p, cudaStream_t stream);

}  // namespace gdn::cuda::chunked

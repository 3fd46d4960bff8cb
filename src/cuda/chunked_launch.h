// Launchers of the chunked prefill kernels, one per input dtype (chunked_bf16.cu,
// chunked_f16.cu). They set the kernels' shared-memory limits, launch the fused kernel (one CTA
// per (sequence, value head)) or, with `split`, the prepare and chain kernels (p.prepared: the
// workspace) on `stream`, and return the launch's status; they allocate and synchronise nothing.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/chunked_params.h"

namespace gdn::cuda::chunked {

cudaError_t launch_chunked_bf16(const ChunkParams& p, bool split, cudaStream_t stream);
cudaError_t launch_chunked_f16(const ChunkParams& p, bool split, cudaStream_t stream);

}  // namespace gdn::cuda::chunked

// The chunked prefill kernel for bf16 q, k, v (bf16 tensor-core products, f32 accumulation).
#include "cuda/chunked_kernel.cuh"
#include "cuda/chunked_launch.h"

namespace gdn::cuda::chunked {

cudaError_t launch_chunked_bf16(const ChunkParams& p, cudaStream_t stream) {
  return launch_chunked<MmaBf16>(p, stream);
}

}  // namespace gdn::cuda::chunked

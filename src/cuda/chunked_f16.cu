// The chunked prefill kernel for f16 q, k, v (f16 tensor-core products, f32 accumulation).
#include "cuda/chunked_kernel.cuh"
#include "cuda/chunked_launch.h"

namespace gdn::cuda::chunked {

cudaError_t launch_chunked_f16(const ChunkParams& p, cudaStream_t stream) {
  return launch_chunked<MmaF16>(p, stream);
}

}  // namespace gdn::cuda::chunked

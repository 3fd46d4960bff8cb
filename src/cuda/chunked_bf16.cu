// The chunked prefill kernels for bf16 q, k, v (bf16 tensor-core products, f32 accumulation): the
// fused kernel and the split pair.
#include "cuda/chunked_fused.cuh"
#include "cuda/chunked_launch.h"
#include "cuda/chunked_split.cuh"

namespace gdn::cuda::chunked {

cudaError_t launch_chunked_bf16(const ChunkParams& p, bool split, cudaStream_t stream) {
  return split ? launch_chunked_split<MmaBf16>(p, stream) : launch_chunked<MmaBf16>(p, stream);
}

}  // namespace gdn::cuda::chunked

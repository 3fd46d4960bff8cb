// Decode kernels for the vk state layout with bf16 state storage (K = 64, 128).
#include "cuda/decode_launch.cuh"

namespace gdn::cuda {
template cudaError_t launch_decode<false, Bf16>(const DecodeParams&, DecodeForm, bool, cudaStream_t);
}  // namespace gdn::cuda

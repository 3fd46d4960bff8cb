// Decode kernels for the kv state layout with f32 state storage (K = 64, 128).
#include "cuda/decode_launch.cuh"

namespace gdn::cuda {
template cudaError_t launch_decode<true, float>(const DecodeParams&, DecodeForm, bool, cudaStream_t);
}  // namespace gdn::cuda

// Turns a CUDA runtime error into an exception naming what failed. CUDA builds of the tool only.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace gdn::tool {

inline void cuda_check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) throw std::runtime_error("CUDA: " + what + ": " + cudaGetErrorString(status));
}

}  // namespace gdn::tool

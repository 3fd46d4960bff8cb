// Driver API functions reached through the runtime (cudaGetDriverEntryPointByVersion, the
// CUDA 12.0 ABI), so that the library does not link against the driver library.
#pragma once

#include <cuda_runtime_api.h>

namespace gdn::cuda {

// The driver's function `name`, or null where the driver lacks it (the runtime's sticky error
// cleared). Callers keep the result in a function-local static: one lookup a process.
inline void* driver_entry_point(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return f;
}

}  // namespace gdn::cuda

// Host-side pieces shared by the cuda backend's paths (cuda_backend.cpp: recurrent,
// chunked_host.cpp: chunked): views of a validated Problem for the kernels' parameter blocks,
// the problem's state dtype, device selection for one call, and CUDA errors as statuses.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "core/problem.h"
#include "cuda/views.h"

namespace gdn::cuda {

inline TokenView token_view(const TokenTensor& t) {
  TokenView v;
  v.p = t.data;
  v.seq = t.seq;
  v.tok = t.tok;
  v.head = t.head;
  v.dtype = t.dtype;
  return v;
}

inline StateView state_view(const StateTensor& s) {
  StateView v;
  v.p = s.data;
  v.slot = s.slot;
  v.head = s.head;
  v.row = s.row;
  return v;
}

// The dtype every state tensor of the problem shares (validation enforces one); f32 if none.
inline gdn_dtype state_dtype(const Problem& p) {
  if (p.initial_state.data) return p.initial_state.dtype;
  if (p.final_state.data) return p.final_state.dtype;
  if (p.snapshots_dense.data) return p.snapshots_dense.dtype;
  if (p.snapshots_pool.data) return p.snapshots_pool.dtype;
  return GDN_DTYPE_F32;
}

// Makes `device` current for the scope, restoring the caller's device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    status_ = cudaGetDevice(&previous_);
    if (status_ == cudaSuccess && previous_ != device) {
      status_ = cudaSetDevice(device);
      switched_ = status_ == cudaSuccess;
    }
  }
  ~DeviceScope() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  cudaError_t status() const { return status_; }

 private:
  int previous_ = 0;
  bool switched_ = false;
  cudaError_t status_ = cudaSuccess;
};

// GDN_STATUS_DEVICE_ERROR with the runtime's words for `e`; clears the sticky last error.
inline gdn_status device_error(cudaError_t e, const char* what) {
  cudaGetLastError();
  return fail(GDN_STATUS_DEVICE_ERROR, "cuda: %s failed: %s (%s)", what, cudaGetErrorString(e),
              cudaGetErrorName(e));
}

}  // namespace gdn::cuda

// Host-side pieces shared by the cuda backend's paths (cuda_backend.cpp: recurrent,
// chunked_host.cpp: chunked): views of a validated Problem for the kernels' parameter blocks,
// the problem's state dtype, device selection for one call, and CUDA errors as statuses.
#pragma once

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "core/problem.h"
#include "cuda/batch_params.h"
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

// The fields both paths' parameter blocks share, from a validated problem.
inline BatchParams batch_params(const Problem& p) {
  BatchParams b;
  b.N = p.N;
  b.T = p.T;
  b.T_total = p.T_total;
  b.Hk = int32_t(p.Hk);
  b.Hv = int32_t(p.Hv);
  b.ratio = int32_t(p.ratio);

  b.q = token_view(p.q);
  b.k = token_view(p.k);
  b.v = token_view(p.v);
  b.o = token_view(p.o);
  b.g = token_view(p.g);
  b.beta = token_view(p.beta);
  b.a = token_view(p.a);
  b.A_log = p.A_log.data;
  b.A_log_stride = p.A_log.stride;
  b.A_log_dtype = p.A_log.dtype;
  b.dt_bias = p.dt_bias.data;
  b.dt_bias_stride = p.dt_bias.stride;
  b.dt_bias_dtype = p.dt_bias.dtype;

  b.h0 = state_view(p.initial_state);
  b.ht = state_view(p.final_state);

  b.cu_seqlens = p.packed ? p.cu_seqlens : nullptr;
  b.cu_seqlens_i64 = p.cu_seqlens_dtype == GDN_DTYPE_I64;
  b.state_indices = p.state_indices;
  b.state_indices_stride = p.state_indices_stride;
  b.pool_slots = p.pool_slots;
  b.error_flags = p.error_flags;

  b.gate = p.gate;
  b.beta_logit = p.beta_mode == GDN_BETA_LOGIT;
  b.tiled = p.head_map == GDN_HEAD_MAP_TILED;
  b.l2norm = p.qk_l2norm;
  b.scale = p.scale;
  return b;
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

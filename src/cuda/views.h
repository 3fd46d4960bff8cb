// Tensor views in the kernels' parameter blocks (decode_params.h, chunked_params.h): PODs that
// the host fills from a validated Problem (host_common.h) and the kernels index.
#pragma once

#include <cstdint>

namespace gdn::cuda {

// A per-token tensor: element (n, t, h, i) at p + n * seq + (bos(n) + t) * tok + h * head + i.
struct TokenView {
  void* p = nullptr;
  int64_t seq = 0, tok = 0, head = 0;  // elements
  int32_t dtype = 0;                    // gdn_dtype: f32, bf16 or f16
};

// A state tensor, dense [N, Hv, R, C] or a pool [P, Hv, R, C]: element (slot, h, r, c) at
// p + slot * slot + h * head + r * row + c.
struct StateView {
  void* p = nullptr;
  int64_t slot = 0, head = 0, row = 0;  // elements
};

}  // namespace gdn::cuda

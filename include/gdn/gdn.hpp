// gdn: the C++ layer. Header-only over the C API (gdn.h); it adds RAII-free conveniences and
// turns status codes into exceptions. Nothing here holds state.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "gdn/gdn.h"

namespace gdn {

// Thrown for every non-success status; what() is the library's message.
class error : public std::runtime_error {
 public:
  error(gdn_status status, const std::string& message)
      : std::runtime_error(message.empty() ? std::string(gdn_status_string(status)) : message),
        status_(status) {}
  gdn_status status() const noexcept { return status_; }

 private:
  gdn_status status_;
};

inline void check(gdn_status status) {
  if (status != GDN_STATUS_SUCCESS) throw error(status, gdn_last_error());
}

inline std::string version() { return gdn_version_string(); }

// A contiguous row-major tensor descriptor (strides left 0 = contiguous).
inline gdn_tensor tensor(void* data, gdn_dtype dtype, std::initializer_list<int64_t> shape,
                         gdn_device_type device = GDN_DEVICE_CPU, int device_id = 0) {
  gdn_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  int i = 0;
  for (int64_t s : shape) {
    if (i < GDN_MAX_DIMS) t.shape[i] = s;
    ++i;
  }
  t.device_type = device;
  t.device_id = device_id;
  return t;
}

// A strided view: strides in elements, the last one must be 1.
inline gdn_tensor tensor(void* data, gdn_dtype dtype, std::initializer_list<int64_t> shape,
                         std::initializer_list<int64_t> strides,
                         gdn_device_type device = GDN_DEVICE_CPU, int device_id = 0) {
  gdn_tensor t = tensor(data, dtype, shape, device, device_id);
  int i = 0;
  for (int64_t s : strides) {
    if (i < GDN_MAX_DIMS) t.strides[i] = s;
    ++i;
  }
  return t;
}

// gdn_forward_args with its defaults set; fill the tensors and options you need.
struct ForwardArgs : gdn_forward_args {
  ForwardArgs() { gdn_forward_args_init(this); }
};

inline void can_implement(const gdn_forward_args& args) { check(gdn_forward_can_implement(&args)); }

inline size_t workspace_size(const gdn_forward_args& args) {
  size_t bytes = 0;
  check(gdn_forward_workspace_size(&args, &bytes));
  return bytes;
}

inline void forward(const gdn_forward_args& args) { check(gdn_forward(&args)); }

}  // namespace gdn

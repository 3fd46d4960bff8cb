// DeviceBuffers: a case's tensors copied to a GPU with the CUDA runtime (GDN_HARNESS_CUDA).
#include <stdexcept>
#include <string>
#include <utility>

#include "harness.h"
#include "tensor_roles.h"

#ifdef GDN_HARNESS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace gdn::harness {
namespace {

#ifdef GDN_HARNESS_CUDA
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("DeviceBuffers: ") + what + ": " + cudaGetErrorString(e));
}

// Makes `device` current for the scope, then restores the caller's device.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};
#else
[[noreturn]] void no_cuda() {
  throw std::runtime_error("DeviceBuffers: the harness was built without CUDA (GDN_HARNESS_CUDA)");
}
#endif

}  // namespace

bool DeviceBuffers::compiled() {
#ifdef GDN_HARNESS_CUDA
  return true;
#else
  return false;
#endif
}

DeviceBuffers::DeviceBuffers(const GeneratedInputs& in, int device_id) : device_id_(device_id) {
#ifdef GDN_HARNESS_CUDA
  copies_.assign(kRoleCount, nullptr);
  try {
    DeviceScope scope(device_id_);
    for (int r = 0; r < kRoleCount; ++r) {
      const HostTensor& t = tensor_of(in, Role(r));
      if (t.present())
        check(cudaMalloc(&copies_[size_t(r)], t.bytes() > 0 ? t.bytes() : 1), "cudaMalloc");
    }
    upload(in);
  } catch (...) {
    release();
    throw;
  }
#else
  (void)in;
  no_cuda();
#endif
}

DeviceBuffers::DeviceBuffers(DeviceBuffers&& other) noexcept { *this = std::move(other); }

DeviceBuffers& DeviceBuffers::operator=(DeviceBuffers&& other) noexcept {
  if (this != &other) {
    release();
    device_id_ = other.device_id_;
    copies_ = std::move(other.copies_);
    workspace_ = std::exchange(other.workspace_, nullptr);
    workspace_bytes_ = std::exchange(other.workspace_bytes_, 0);
    other.copies_.clear();
  }
  return *this;
}

DeviceBuffers::~DeviceBuffers() { release(); }

void DeviceBuffers::release() noexcept {
#ifdef GDN_HARNESS_CUDA
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device_id_);
  for (void* p : copies_) cudaFree(p);
  cudaFree(workspace_);
  cudaSetDevice(previous);
#endif
  copies_.clear();
  workspace_ = nullptr;
  workspace_bytes_ = 0;
}

gdn_forward_args DeviceBuffers::args(GeneratedInputs& in, gdn_backend backend, void* stream,
                                     size_t workspace_bytes) {
#ifdef GDN_HARNESS_CUDA
  if (workspace_bytes > workspace_bytes_) {
    DeviceScope scope(device_id_);
    check(cudaFree(workspace_), "cudaFree");
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    check(cudaMalloc(&workspace_, workspace_bytes), "cudaMalloc (workspace)");
    workspace_bytes_ = workspace_bytes;
  }
  gdn_forward_args a = build_args(in, backend, copies_.data(), GDN_DEVICE_CUDA, device_id_);
  a.stream = stream;
  a.workspace = workspace_bytes > 0 ? workspace_ : nullptr;
  a.workspace_bytes = workspace_bytes > 0 ? workspace_bytes_ : 0;
  return a;
#else
  (void)in, (void)backend, (void)stream, (void)workspace_bytes;
  no_cuda();
#endif
}

void DeviceBuffers::upload(const GeneratedInputs& in) {
#ifdef GDN_HARNESS_CUDA
  DeviceScope scope(device_id_);
  for (int r = 0; r < kRoleCount; ++r) {
    const HostTensor& t = tensor_of(in, Role(r));
    if (t.present() && t.bytes() > 0)
      check(cudaMemcpy(copies_[size_t(r)], t.data(), t.bytes(), cudaMemcpyHostToDevice),
            "cudaMemcpy (upload)");
  }
#else
  (void)in;
  no_cuda();
#endif
}

void DeviceBuffers::download(GeneratedInputs& in) const {
#ifdef GDN_HARNESS_CUDA
  DeviceScope scope(device_id_);
  for (int r = 0; r < kRoleCount; ++r) {
    HostTensor& t = tensor_of(in, Role(r));
    if (written_by_call(in, Role(r)) && t.present() && t.bytes() > 0)
      check(cudaMemcpy(t.data(), copies_[size_t(r)], t.bytes(), cudaMemcpyDeviceToHost),
            "cudaMemcpy (download)");
  }
#else
  (void)in;
  no_cuda();
#endif
}

void DeviceBuffers::synchronize(void* stream) const {
#ifdef GDN_HARNESS_CUDA
  DeviceScope scope(device_id_);
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
#else
  (void)stream;
  no_cuda();
#endif
}

}  // namespace gdn::harness

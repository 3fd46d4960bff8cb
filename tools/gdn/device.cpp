#include "device.h"

#include <cstring>
#include <stdexcept>

#ifdef GDN_TOOL_CUDA
#include "cuda_check.h"
#endif

namespace gdn::tool {
namespace {

#ifndef GDN_TOOL_CUDA
[[noreturn]] void no_cuda() {
  throw std::runtime_error("this gdn tool was built without CUDA (GDN_CUDA=OFF): no device memory");
}
#endif

}  // namespace

bool tool_has_cuda() {
#ifdef GDN_TOOL_CUDA
  return true;
#else
  return false;
#endif
}

gdn_backend resolve_backend(gdn_backend requested) {
  if (requested != GDN_BACKEND_AUTO) return requested;
  return tool_has_cuda() && gdn_backend_available(GDN_BACKEND_CUDA) ? GDN_BACKEND_CUDA : GDN_BACKEND_CPU;
}

std::string cuda_driver_version() {
#ifdef GDN_TOOL_CUDA
  int version = 0;
  if (cudaDriverGetVersion(&version) != cudaSuccess || version == 0) return "";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
#else
  return "";
#endif
}

Placement::Placement(gdn_backend backend, int device_id)
    : on_device_(backend == GDN_BACKEND_CUDA), device_id_(device_id) {
  if (!on_device_) return;
  if (!gdn_backend_available(GDN_BACKEND_CUDA))
    throw std::runtime_error("backend cuda: not available here (no GPU, or libgdn built without CUDA)");
#ifdef GDN_TOOL_CUDA
  cuda_check(cudaSetDevice(device_id_), "cudaSetDevice");
#else
  no_cuda();
#endif
}

Placement::~Placement() {
#ifdef GDN_TOOL_CUDA
  for (void* p : allocations_) cudaFree(p);
#endif
}

void* Placement::allocate(size_t bytes) {
#ifdef GDN_TOOL_CUDA
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  allocations_.push_back(p);
  return p;
#else
  (void)bytes;
  no_cuda();
#endif
}

gdn_tensor Placement::input(const harness::HostTensor& t) {
  gdn_tensor placed = output(t);
  if (on_device_ && t.present()) refill(placed, t);
  return placed;
}

gdn_tensor Placement::output(const harness::HostTensor& t) {
  if (!t.present()) return gdn_tensor{};
  if (!on_device_) return t.view();
  return t.view(allocate(t.bytes()), GDN_DEVICE_CUDA, device_id_);
}

void Placement::refill(const gdn_tensor& placed, const harness::HostTensor& t) {
  if (!t.present() || placed.data == t.data()) return;
  if (!on_device_) {
    std::memcpy(placed.data, t.data(), t.bytes());
    return;
  }
#ifdef GDN_TOOL_CUDA
  cuda_check(cudaMemcpy(placed.data, t.data(), t.bytes(), cudaMemcpyHostToDevice), "copy to the device");
#endif
}

void Placement::fetch(const gdn_tensor& placed, harness::HostTensor& t) {
  if (!t.present() || placed.data == t.data()) return;
  if (!on_device_) {
    std::memcpy(t.data(), placed.data, t.bytes());
    return;
  }
#ifdef GDN_TOOL_CUDA
  cuda_check(cudaMemcpy(t.data(), placed.data, t.bytes(), cudaMemcpyDeviceToHost), "copy from the device");
#endif
}

void* Placement::workspace(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (!on_device_) {
    if (host_workspace_.size() < bytes) host_workspace_.resize(bytes);
    return host_workspace_.data();
  }
  if (device_workspace_bytes_ < bytes) {
    device_workspace_ = allocate(bytes);
    device_workspace_bytes_ = bytes;
  }
  return device_workspace_;
}

void Placement::synchronize() {
  if (!on_device_) return;
#ifdef GDN_TOOL_CUDA
  cuda_check(cudaDeviceSynchronize(), "synchronize");
#endif
}

}  // namespace gdn::tool

// Where a call's tensors live. Host backends (cpu, reference) get the host tensors themselves;
// the cuda backend gets device copies made with the CUDA runtime. This file is the tool's only
// direct use of CUDA memory; in builds without CUDA (GDN_TOOL_CUDA undefined) asking for the
// device throws.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gdn/gdn.h"
#include "harness/harness.h"

namespace gdn::tool {

// Whether this build of the tool can place tensors on a GPU.
bool tool_has_cuda();
// auto -> cuda when the library has a usable GPU and the tool can place tensors there, else
// cpu; any other backend as given.
gdn_backend resolve_backend(gdn_backend requested);
// "13.0": the CUDA driver's version, or "" without CUDA.
std::string cuda_driver_version();

// The memory of one backend's calls. Device memory it allocates is freed with it.
class Placement {
 public:
  // `backend` is resolved (not AUTO); the cuda backend uses device `device_id`.
  explicit Placement(gdn_backend backend, int device_id = 0);
  ~Placement();
  Placement(const Placement&) = delete;
  Placement& operator=(const Placement&) = delete;

  bool on_device() const { return on_device_; }
  // The descriptor a call gets for `t` (absent t: an absent descriptor). Host: t's own
  // storage. Device: a copy of t's storage, with t's contents (input) or uninitialised (output).
  gdn_tensor input(const harness::HostTensor& t);
  gdn_tensor output(const harness::HostTensor& t);
  // Copies the contents of `placed` (from input() or output(), after the queued work) into
  // `t`, a tensor of the same size; nothing to do when `placed` is t's own storage.
  void fetch(const gdn_tensor& placed, harness::HostTensor& t);
  // Copies `t`'s contents into `placed` (e.g. to restore a state pool); the reverse of fetch.
  void refill(const gdn_tensor& placed, const harness::HostTensor& t);
  // Workspace of `bytes` in the backend's memory, valid until the next call or destruction.
  void* workspace(size_t bytes);
  // Waits for the device's queued work.
  void synchronize();

 private:
  void* allocate(size_t bytes);

  bool on_device_;
  int device_id_;
  std::vector<void*> allocations_;
  std::vector<unsigned char> host_workspace_;
  void* device_workspace_ = nullptr;
  size_t device_workspace_bytes_ = 0;
};

}  // namespace gdn::tool

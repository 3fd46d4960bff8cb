// The C API entry points: validate, resolve the backend, dispatch. No C++ exception crosses
// this boundary; every entry that returns a status clears the thread's message on success.
#include <cstring>
#include <exception>
#include <new>

#include "core/backend.h"
#include "core/error.h"
#include "core/validate.h"

namespace gdn {
namespace {

// Runs `body`; turns any exception into INTERNAL_ERROR and clears the message on success.
template <class Body>
gdn_status guarded(Body body) noexcept {
  gdn_status status;
  try {
    status = body();
  } catch (const std::bad_alloc&) {
    return fail(GDN_STATUS_INTERNAL_ERROR, "out of host memory");
  } catch (const std::exception& e) {
    return fail(GDN_STATUS_INTERNAL_ERROR, "unexpected exception: %s", e.what());
  } catch (...) {
    return fail(GDN_STATUS_INTERNAL_ERROR, "unexpected exception");
  }
  if (status == GDN_STATUS_SUCCESS) clear_error();
  return status;
}

// Validation, then the chosen backend's own checks.
gdn_status prepare(const gdn_forward_args* args, Problem* p) {
  if (!args) return fail(GDN_STATUS_INVALID_ARGUMENT, "args: null");
  const gdn_status status = validate(*args, p);
  if (status != GDN_STATUS_SUCCESS || p->backend != GDN_BACKEND_CUDA) return status;
  return cuda_can_implement(*p);
}

// Host backends need no workspace.
gdn_status workspace_size(const Problem& p, size_t* bytes) {
  *bytes = 0;
  return p.backend == GDN_BACKEND_CUDA ? cuda_workspace_size(p, bytes) : GDN_STATUS_SUCCESS;
}

gdn_status run(const Problem& p) {
  switch (p.backend) {
    case GDN_BACKEND_REFERENCE: return reference_forward(p);
    case GDN_BACKEND_CPU: return cpu_forward(p);
    case GDN_BACKEND_CUDA: return cuda_forward(p);
    case GDN_BACKEND_AUTO: break;
  }
  return fail(GDN_STATUS_INTERNAL_ERROR, "backend: %d was not resolved", int(p.backend));
}

}  // namespace
}  // namespace gdn

extern "C" {

void gdn_forward_args_init(gdn_forward_args* args) {
  if (!args) return;
  std::memset(args, 0, sizeof *args);
  args->gate = GDN_GATE_LOG_DECAY;
  args->beta_mode = GDN_BETA_PROB;
  args->head_map = GDN_HEAD_MAP_BLOCK;
  args->state_layout = GDN_STATE_VK;
  args->backend = GDN_BACKEND_AUTO;
  args->path = GDN_PATH_AUTO;
}

gdn_status gdn_forward_can_implement(const gdn_forward_args* args) {
  return gdn::guarded([&] {
    gdn::Problem p;
    return gdn::prepare(args, &p);
  });
}

gdn_status gdn_forward_workspace_size(const gdn_forward_args* args, size_t* bytes) {
  return gdn::guarded([&] {
    if (!bytes) return gdn::fail(GDN_STATUS_INVALID_ARGUMENT, "bytes: null");
    *bytes = 0;
    gdn::Problem p;
    const gdn_status status = gdn::prepare(args, &p);
    return status != GDN_STATUS_SUCCESS ? status : gdn::workspace_size(p, bytes);
  });
}

gdn_status gdn_forward(const gdn_forward_args* args) {
  return gdn::guarded([&] {
    gdn::Problem p;
    gdn_status status = gdn::prepare(args, &p);
    if (status != GDN_STATUS_SUCCESS) return status;
    size_t needed = 0;
    status = gdn::workspace_size(p, &needed);
    if (status != GDN_STATUS_SUCCESS) return status;
    if (p.workspace_bytes < needed)
      return gdn::fail(GDN_STATUS_WORKSPACE_TOO_SMALL,
                       "workspace_bytes: %zu, but this call needs %zu", p.workspace_bytes, needed);
    if (needed > 0 && !p.workspace)
      return gdn::fail(GDN_STATUS_INVALID_ARGUMENT,
                       "workspace: null, but this call needs %zu bytes", needed);
    return gdn::run(p);
  });
}

int gdn_backend_available(gdn_backend backend) {
  try {
    switch (backend) {
      case GDN_BACKEND_AUTO:
      case GDN_BACKEND_CPU:
      case GDN_BACKEND_REFERENCE: return 1;
      case GDN_BACKEND_CUDA: return gdn::cuda_compiled() && gdn::cuda_device_count() > 0;
    }
  } catch (...) {
  }
  return 0;
}

int gdn_cuda_device_count(void) {
  try {
    return gdn::cuda_compiled() ? gdn::cuda_device_count() : 0;
  } catch (...) {
    return 0;
  }
}

gdn_status gdn_cuda_device_info(int index, char* buf, size_t buf_bytes) {
  return gdn::guarded([&] {
    if (!buf || buf_bytes == 0)
      return gdn::fail(GDN_STATUS_INVALID_ARGUMENT,
                       "buf: %p with buf_bytes=%zu has no room for the line",
                       static_cast<void*>(buf), buf_bytes);
    buf[0] = '\0';
    if (gdn::cuda_compiled()) {
      const int count = gdn::cuda_device_count();
      if (count == 0)
        return gdn::fail(GDN_STATUS_BACKEND_UNAVAILABLE, "index: %d, but no CUDA device is present",
                         index);
      if (index < 0 || index >= count)
        return gdn::fail(GDN_STATUS_INVALID_ARGUMENT, "index: %d is outside [0, %d) (CUDA devices)",
                         index, count);
    }
    return gdn::cuda_device_info(index, buf, buf_bytes);
  });
}

const char* gdn_cpu_simd_target(void) {
  try {
    return gdn::cpu_simd_target();
  } catch (...) {
    return "unknown";
  }
}

}  // extern "C"

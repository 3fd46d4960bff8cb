// The cuda backend when libgdn is built without CUDA (GDN_CUDA=OFF): present, never available.
#include "core/backend.h"
#include "core/error.h"

namespace gdn {
namespace {

gdn_status unavailable() {
  return fail(GDN_STATUS_BACKEND_UNAVAILABLE,
              "backend: cuda is not compiled into this libgdn (built with GDN_CUDA=OFF)");
}

}  // namespace

bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
gdn_status cuda_device_info(int, char*, size_t) { return unavailable(); }
bool cuda_is_device_pointer(const void*) { return false; }
gdn_status cuda_can_implement(const Problem&) { return unavailable(); }
gdn_status cuda_workspace_size(const Problem&, size_t* bytes) {
  *bytes = 0;
  return unavailable();
}
gdn_status cuda_forward(const Problem&) { return unavailable(); }
gdn_status cuda_copy_to_host(void*, const void*, size_t, void*) { return unavailable(); }

}  // namespace gdn

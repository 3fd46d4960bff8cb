// The per-thread message behind gdn_last_error(), and the status names.
#include "core/error.h"

#include <cstdarg>
#include <cstdio>

namespace gdn {
namespace {

// A fixed buffer: reporting an error never allocates, so it cannot fail.
thread_local char t_message[1024] = "";

}  // namespace

gdn_status fail(gdn_status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(t_message, sizeof t_message, fmt, ap);
  va_end(ap);
  return status;
}

void clear_error() { t_message[0] = '\0'; }

}  // namespace gdn

extern "C" {

const char* gdn_last_error(void) { return gdn::t_message; }

const char* gdn_status_string(gdn_status status) {
  switch (status) {
    case GDN_STATUS_SUCCESS: return "success";
    case GDN_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case GDN_STATUS_UNSUPPORTED: return "unsupported";
    case GDN_STATUS_BACKEND_UNAVAILABLE: return "backend unavailable";
    case GDN_STATUS_WORKSPACE_TOO_SMALL: return "workspace too small";
    case GDN_STATUS_DEVICE_ERROR: return "device error";
    case GDN_STATUS_INTERNAL_ERROR: return "internal error";
  }
  return "unknown status";
}

}  // extern "C"

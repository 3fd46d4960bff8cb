// Per-thread error message of the C API. Library code reports failures only through here.
#pragma once

#include "gdn/gdn.h"

namespace gdn {

// Sets the calling thread's message (printf-style) and returns `status`, so that call sites
// read `return fail(GDN_STATUS_INVALID_ARGUMENT, "v: Hv=%lld is not ...", ...);`.
gdn_status fail(gdn_status status, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void clear_error();

}  // namespace gdn

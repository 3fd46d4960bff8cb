// Validation: gdn_forward_args -> Problem.
#pragma once

#include "core/problem.h"

namespace gdn {

// Checks every argument against SPEC.md ("Errors") and the configuration table, and resolves
// them into *p: explicit strides, backend (never AUTO), scale (never 0). Index contents are
// checked here when they live on the host, or on a device with args.host_check_indices.
// Reads only: nothing but *p is written. A rejected call returns GDN_STATUS_INVALID_ARGUMENT
// (or UNSUPPORTED: valid, but no kernel for it) with a message "<argument>: <problem> (<values>)".
gdn_status validate(const gdn_forward_args& args, Problem* p);

}  // namespace gdn

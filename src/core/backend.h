// The interface every backend implements. core/forward.cpp validates gdn_forward_args into a
// Problem, resolves the backend, then calls exactly one of these. Backends return a status and
// set the message through gdn::fail (core/error.h); they never print, throw or exit.
#pragma once

#include <cstddef>

#include "core/problem.h"

namespace gdn {

// ---- reference: the f64 oracle (src/reference)
gdn_status reference_forward(const Problem& p);

// ---- cpu: the multithreaded SIMD fast path, f32 math (src/cpu)
gdn_status cpu_forward(const Problem& p);
const char* cpu_simd_target();  // the target dispatched to at run time

// ---- cuda (src/cuda; src/cuda/cuda_stub.cpp when GDN_CUDA is off)
bool cuda_compiled();
int cuda_device_count();
gdn_status cuda_device_info(int index, char* buf, size_t buf_bytes);
// Where a pointer lives, as the CUDA runtime sees it (host memory when CUDA is absent).
bool cuda_is_device_pointer(const void* ptr);
// Checks that need the device (pointer kinds, alignment) and whether a kernel exists.
gdn_status cuda_can_implement(const Problem& p);
gdn_status cuda_workspace_size(const Problem& p, size_t* bytes);
gdn_status cuda_forward(const Problem& p);
// Synchronous device-to-host copy (for host_check_indices); stream-ordered on p.stream.
gdn_status cuda_copy_to_host(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace gdn

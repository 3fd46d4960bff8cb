// The cuda backend's chunked prefill path (chunked_host.cpp): which calls take it, the checks
// it adds, its workspace, and the launch. cuda_backend.cpp routes to these.
#pragma once

#include <cstddef>

#include "core/problem.h"

namespace gdn {

// Whether the cuda backend runs p on the chunked kernel: path chunked, or path auto with a
// configuration the chunked row of the configuration table takes, no per-token states, at
// least cuda::chunked::kAutoMinTokens tokens per sequence, and a device with the shared memory
// the kernel needs.
bool cuda_chunked_selected(const Problem& p);
// The chunked kernel's own checks (head dims, snapshots, shared memory, grid size).
gdn_status cuda_chunked_can_implement(const Problem& p);
// Bytes of workspace: 0 for the fused kernel (every intermediate stays on chip), the prepared
// chunks for the split form (about 65 KB per chunk and value head: all of them, or two windows'
// worth and the states carried between windows; chunked_tile.h).
gdn_status cuda_chunked_workspace_size(const Problem& p, size_t* bytes);
// The call's kernels on p.stream (windows may also run chains on the device's side stream,
// joined back to p.stream by events); allocates no memory and synchronises nothing.
gdn_status cuda_chunked_forward(const Problem& p);

}  // namespace gdn

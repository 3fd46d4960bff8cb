// A second stream per device, for work that runs beside the caller's stream (the chunked path's
// overlapped windows, chunked_host.cpp): created on first use at the device's greatest
// priority and non-blocking, with a pool of events for the fork, the cross-stream ordering and
// the join. A lease holds the device's lock, so one call at a time orders work through it.
// Never used while the caller's stream is being captured into a graph (a stream that joins a
// capture stays in it until the capture ends), so the caller checks first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>

namespace gdn::cuda {

struct SideStreamLease {
  std::unique_lock<std::mutex> lock;
  cudaStream_t stream = nullptr;     // null: no side stream (creation failed)
  const cudaEvent_t* events = nullptr;  // at least the count asked for, timing disabled
  bool ok() const { return stream != nullptr; }
};

// The side stream of `device` (the current device) with at least `events` events, locked for
// the caller; an empty lease if it cannot be had (the CUDA error is cleared).
SideStreamLease lease_side_stream(int device, size_t events);

// Whether work enqueued on `stream` now is being captured into a graph (errors: true, so the
// caller keeps to its own stream).
bool stream_is_capturing(cudaStream_t stream);

}  // namespace gdn::cuda

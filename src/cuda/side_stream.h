// Second streams for work that runs beside a caller's stream (the chunked path's overlapped
// windows, chunked_host.cpp). Per device and priority, a small pool of non-blocking streams, each
// with a fixed set of events. A lease takes one whose queued work, if any, came from the same
// caller stream (already ordered before the new work by the caller's own join) or one that is
// idle, so one caller's work never queues behind another caller's; it is given back when the
// caller has enqueued its work. None free and no room for a new one: an empty lease, and the
// caller keeps to its own stream. Never used while the caller's stream is being captured into a graph (a stream
// that joins a capture stays in it until the capture ends), so the caller checks first.
#pragma once

#include <cuda_runtime_api.h>

namespace gdn::cuda {

inline constexpr int kSideStreamEvents = 6;
inline constexpr int kMaxSideStreams = 8;  // per device and priority

class SideStreamLease {
 public:
  SideStreamLease() = default;
  SideStreamLease(SideStreamLease&& other) noexcept;
  SideStreamLease& operator=(SideStreamLease&& other) noexcept;
  SideStreamLease(const SideStreamLease&) = delete;
  SideStreamLease& operator=(const SideStreamLease&) = delete;
  ~SideStreamLease();

  bool ok() const { return slot_ != nullptr; }
  cudaStream_t stream() const;
  cudaEvent_t event(int i) const;  // i < kSideStreamEvents, timing disabled
  // The stream or its events failed (e.g. their context is gone): never lease it again.
  void discard();

 private:
  friend SideStreamLease lease_side_stream(int device, int priority, cudaStream_t caller);
  struct Slot* slot_ = nullptr;
};

// A side stream of `device` (the current device) at `priority` for work forked from `caller`, or
// an empty lease; CUDA errors on the way are cleared.
SideStreamLease lease_side_stream(int device, int priority, cudaStream_t caller);

// The priority one step above `stream`'s (numerically lower), clamped to the device's range.
int priority_above(cudaStream_t stream);

// Whether work enqueued on `stream` now is being captured into a graph (errors: true, so the
// caller keeps to its own stream).
bool stream_is_capturing(cudaStream_t stream);

}  // namespace gdn::cuda

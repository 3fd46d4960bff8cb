// Second streams for work that runs beside a caller's stream (the chunked path's overlapped
// windows, chunked_host.cpp). Per device and priority, a small pool of non-blocking streams, each
// with a fixed set of events. A lease takes one whose queued work, if any, came from the same
// caller stream (by cudaStreamGetId: already ordered before the new work by that stream's own
// join) or one that is idle, so one caller's work does not queue behind another caller's; it is
// given back when the caller has enqueued its work. None free and no room for a new one: an
// empty lease, and the caller keeps to its own stream.
// Never used while the caller's stream is being captured into a graph (a stream that joins a
// capture stays in it until the capture ends), so the caller checks first; stream queries and
// creation run in the relaxed capture mode, so another thread's capture is not disturbed.
// Known limitation: pools are keyed by device number, so a process that resets a device
// (cudaDeviceReset: the pooled handles then dangle) or runs calls in several contexts of one
// device (green contexts) should not take the overlapped windows (GDN_CHUNKED_WINDOWS=0).
#pragma once

#include <cuda_runtime_api.h>

namespace gdn::cuda {

inline constexpr int kSideStreamEvents = 6;
inline constexpr int kMaxSideStreams = 8;  // usable ones, per device and priority

struct Slot;

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
  // The side stream failed (e.g. its context is gone): give it back, never to be leased again.
  void discard();

 private:
  friend SideStreamLease lease_side_stream(int device, int priority, cudaStream_t caller);
  void release(bool broken);
  Slot* slot_ = nullptr;
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

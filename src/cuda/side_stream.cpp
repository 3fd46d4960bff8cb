// The per-device side stream and its events (side_stream.h). They live for the process: they are
// created once per device and never destroyed (destroying CUDA objects from static destructors at
// exit is unsafe).
#include "cuda/side_stream.h"

#include <map>
#include <vector>

namespace gdn::cuda {
namespace {

struct DeviceSide {
  std::mutex lock;
  cudaStream_t stream = nullptr;
  std::vector<cudaEvent_t> events;
};

std::mutex devices_lock;
std::map<int, DeviceSide*>& devices() {
  static auto* table = new std::map<int, DeviceSide*>;
  return *table;
}

}  // namespace

SideStreamLease lease_side_stream(int device, size_t events) {
  DeviceSide* side = nullptr;
  {
    const std::lock_guard<std::mutex> guard(devices_lock);
    DeviceSide*& slot = devices()[device];
    if (!slot) slot = new DeviceSide;
    side = slot;
  }
  SideStreamLease lease;
  lease.lock = std::unique_lock<std::mutex>(side->lock);
  if (!side->stream) {
    int least = 0, greatest = 0;
    if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
        cudaStreamCreateWithPriority(&side->stream, cudaStreamNonBlocking, greatest) != cudaSuccess) {
      side->stream = nullptr;
      cudaGetLastError();
      return lease;
    }
  }
  while (side->events.size() < events) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();
      return lease;
    }
    side->events.push_back(e);
  }
  lease.stream = side->stream;
  lease.events = side->events.data();
  return lease;
}

bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace gdn::cuda

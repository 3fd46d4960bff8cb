// The side-stream pools (side_stream.h). Streams and events live for the process: they are created
// on demand and never destroyed (destroying CUDA objects from static destructors at exit is
// unsafe); a pool holds at most kMaxSideStreams per device and priority.
#include "cuda/side_stream.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace gdn::cuda {

struct Slot {
  cudaStream_t stream = nullptr;
  cudaEvent_t events[kSideStreamEvents] = {};
  cudaStream_t last_caller = nullptr;  // the caller stream whose work was queued here last
  bool used = false;
  bool leased = false;
  bool broken = false;
};

namespace {

std::mutex pools_lock;  // guards the pools and every slot's leased / broken flags

std::map<std::pair<int, int>, std::vector<Slot*>>& pools() {  // (device, priority) -> slots
  static auto* table = new std::map<std::pair<int, int>, std::vector<Slot*>>;
  return *table;
}

bool idle(cudaStream_t s) {
  const cudaError_t e = cudaStreamQuery(s);
  if (e == cudaErrorNotReady) cudaGetLastError();
  return e == cudaSuccess;
}

Slot* create_slot(int priority) {
  auto* slot = new Slot;
  bool ok = cudaStreamCreateWithPriority(&slot->stream, cudaStreamNonBlocking, priority) == cudaSuccess;
  for (int i = 0; ok && i < kSideStreamEvents; ++i)
    ok = cudaEventCreateWithFlags(&slot->events[i], cudaEventDisableTiming) == cudaSuccess;
  if (!ok) {
    cudaGetLastError();
    slot->broken = true;  // kept (never destroyed), never leased
  }
  return slot;
}

}  // namespace

SideStreamLease::SideStreamLease(SideStreamLease&& other) noexcept : slot_(std::exchange(other.slot_, nullptr)) {}

SideStreamLease& SideStreamLease::operator=(SideStreamLease&& other) noexcept {
  if (this != &other) {
    this->~SideStreamLease();
    slot_ = std::exchange(other.slot_, nullptr);
  }
  return *this;
}

SideStreamLease::~SideStreamLease() {
  if (!slot_) return;
  const std::lock_guard<std::mutex> guard(pools_lock);
  slot_->leased = false;
  slot_ = nullptr;
}

cudaStream_t SideStreamLease::stream() const { return slot_->stream; }
cudaEvent_t SideStreamLease::event(int i) const { return slot_->events[i]; }

void SideStreamLease::discard() {
  if (!slot_) return;
  const std::lock_guard<std::mutex> guard(pools_lock);
  slot_->broken = true;
  slot_->leased = false;
  slot_ = nullptr;
}

int priority_above(cudaStream_t stream) {
  int least = 0, greatest = 0, priority = 0;
  if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess ||
      cudaStreamGetPriority(stream, &priority) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  priority -= 1;  // numerically lower: higher priority
  return priority < greatest ? greatest : priority > least ? least : priority;
}

SideStreamLease lease_side_stream(int device, int priority, cudaStream_t caller) {
  SideStreamLease lease;
  const std::lock_guard<std::mutex> guard(pools_lock);
  std::vector<Slot*>& pool = pools()[{device, priority}];
  const auto take = [&](Slot* slot) {
    slot->leased = true;
    slot->used = true;
    slot->last_caller = caller;
    lease.slot_ = slot;
  };
  for (Slot* slot : pool)  // the same caller's stream first: no new dependency, no query
    if (!slot->leased && !slot->broken && slot->used && slot->last_caller == caller) {
      take(slot);
      return lease;
    }
  for (Slot* slot : pool)
    if (!slot->leased && !slot->broken && idle(slot->stream)) {
      take(slot);
      return lease;
    }
  if (int(pool.size()) >= kMaxSideStreams) return lease;
  Slot* slot = create_slot(priority);
  pool.push_back(slot);
  if (!slot->broken) take(slot);
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

// The side-stream pools (side_stream.h). Streams and events live for the process: they are created
// on demand and never destroyed (destroying CUDA objects from static destructors at exit is
// unsafe); a pool holds at most kMaxSideStreams usable streams per device and priority.
#include "cuda/side_stream.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace gdn::cuda {

struct Slot {
  cudaStream_t stream = nullptr;
  cudaEvent_t events[kSideStreamEvents] = {};
  unsigned long long last_caller = 0;  // cudaStreamGetId of the caller whose work was queued here last
  bool used = false;
  bool leased = false;
  bool broken = false;
};

namespace {

std::mutex pools_lock;  // guards the pools and every slot's flags

std::map<std::pair<int, int>, std::vector<Slot*>>& pools() {  // (device, priority) -> slots
  static auto* table = new std::map<std::pair<int, int>, std::vector<Slot*>>;
  return *table;
}

// Clears `e` if it is the pending error (never someone else's).
void clear_if_pending(cudaError_t e) {
  if (e != cudaSuccess && cudaPeekAtLastError() == e) cudaGetLastError();
}

// Runs `f` in the relaxed capture mode: a stream query or stream creation while another thread
// captures a graph in the global mode would otherwise invalidate that capture.
template <class F>
auto relaxed(F f) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  auto result = f();
  cudaThreadExchangeStreamCaptureMode(&mode);
  return result;
}

// Idle: no work queued. Any error (a dead handle among them) counts as busy and is cleared.
bool idle(cudaStream_t s) {
  const cudaError_t e = relaxed([&] { return cudaStreamQuery(s); });
  clear_if_pending(e);
  return e == cudaSuccess;
}

Slot* create_slot(int priority) {
  auto* slot = new Slot;
  bool ok = relaxed([&] {
    bool made = cudaStreamCreateWithPriority(&slot->stream, cudaStreamNonBlocking, priority) == cudaSuccess;
    for (int i = 0; made && i < kSideStreamEvents; ++i)
      made = cudaEventCreateWithFlags(&slot->events[i], cudaEventDisableTiming) == cudaSuccess;
    return made;
  });
  if (!ok) {
    cudaGetLastError();
    slot->broken = true;  // never destroyed (see above), never leased
  }
  return slot;
}

}  // namespace

SideStreamLease::SideStreamLease(SideStreamLease&& other) noexcept : slot_(std::exchange(other.slot_, nullptr)) {}

SideStreamLease& SideStreamLease::operator=(SideStreamLease&& other) noexcept {
  if (this != &other) {
    release(false);
    slot_ = std::exchange(other.slot_, nullptr);
  }
  return *this;
}

SideStreamLease::~SideStreamLease() { release(false); }

void SideStreamLease::release(bool broken) {
  if (!slot_) return;
  const std::lock_guard<std::mutex> guard(pools_lock);
  slot_->leased = false;
  if (broken) slot_->broken = true;
  slot_ = nullptr;
}

cudaStream_t SideStreamLease::stream() const { return slot_->stream; }
cudaEvent_t SideStreamLease::event(int i) const { return slot_->events[i]; }
void SideStreamLease::discard() { release(true); }

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
  unsigned long long caller_id = 0;  // unique for the process, cudaStreamPerThread resolved
  if (cudaStreamGetId(caller, &caller_id) != cudaSuccess) {
    cudaGetLastError();
    return lease;
  }
  const std::lock_guard<std::mutex> guard(pools_lock);
  std::vector<Slot*>& pool = pools()[{device, priority}];
  pool.erase(std::remove_if(pool.begin(), pool.end(), [](const Slot* s) { return s->broken && !s->leased; }),
             pool.end());  // (their handles are left alone: see above)
  const auto take = [&](Slot* slot) {
    slot->leased = true;
    slot->used = true;
    slot->last_caller = caller_id;
    lease.slot_ = slot;
  };
  for (Slot* slot : pool)  // the same caller's: its queued work is ordered before ours already
    if (!slot->leased && slot->used && slot->last_caller == caller_id) {
      take(slot);
      return lease;
    }
  for (Slot* slot : pool)
    if (!slot->leased && idle(slot->stream)) {
      take(slot);
      return lease;
    }
  if (int(pool.size()) >= kMaxSideStreams) return lease;
  Slot* slot = create_slot(priority);
  if (slot->broken) return lease;
  pool.push_back(slot);
  take(slot);
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

// Timing repeated calls: a warm-up, then the median over timed calls. Host backends use the
// wall clock; the cuda backend CUDA events, around single calls or around replays of a CUDA
// graph that captured many calls (what serving engines do for decode). Builds without CUDA
// (GDN_TOOL_CUDA undefined) throw for the device timers.
#pragma once

#include <functional>

namespace gdn::tool {

struct Timing {
  double ms = 0;            // median time of one call
  const char* method = "";  // "wall", "events" or "graph" (the results file's `timing`)
  double host_us = 0;       // events: median host time of one call (its enqueueing), else 0
};

// call(i) runs call number i to completion.
Timing time_wall(const std::function<void(int)>& call, int warmup, int repeat);

// call(i, stream) enqueues call number i on `stream`; events around each call, and the host's
// clock around its enqueueing (each call finds the stream idle, as a plain decode step does).
Timing time_events(const std::function<void(int, void*)>& call, void* stream, int warmup, int repeat);

// One plain call, then calls 0 .. calls_per_graph - 1 captured once into a graph on `stream`
// (not the legacy default stream); one warm-up replay, then `repeat` timed replays; per call:
// replay time / calls_per_graph.
Timing time_graph(const std::function<void(int, void*)>& call, void* stream, int calls_per_graph, int repeat);

// A CUDA stream of its own, for graph capture.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  void* get() const { return stream_; }

 private:
  void* stream_ = nullptr;
};

}  // namespace gdn::tool

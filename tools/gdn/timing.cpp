#include "timing.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef GDN_TOOL_CUDA
#include "cuda_check.h"
#endif

namespace gdn::tool {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#ifdef GDN_TOOL_CUDA
// A start and a stop event; elapsed() waits for the stop.
class EventPair {
 public:
  EventPair() {
    cuda_check(cudaEventCreate(&start_), "cudaEventCreate");
    cuda_check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void start(cudaStream_t s) { cuda_check(cudaEventRecord(start_, s), "cudaEventRecord"); }
  void stop(cudaStream_t s) { cuda_check(cudaEventRecord(stop_, s), "cudaEventRecord"); }
  double elapsed_ms() {
    cuda_check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// An instantiated graph of the captured calls.
class CapturedGraph {
 public:
  CapturedGraph(const std::function<void(int, void*)>& call, cudaStream_t stream, int calls) {
    cuda_check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      for (int i = 0; i < calls; ++i) call(i, stream);
    } catch (...) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream, &partial);
      if (partial) cudaGraphDestroy(partial);
      throw;
    }
    cuda_check(cudaStreamEndCapture(stream, &graph_), "cudaStreamEndCapture");
    cuda_check(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
  }
  ~CapturedGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  void launch(cudaStream_t stream) { cuda_check(cudaGraphLaunch(exec_, stream), "cudaGraphLaunch"); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};
#else
[[noreturn]] void no_cuda() { throw std::runtime_error("this gdn tool was built without CUDA: no device timers"); }
#endif

}  // namespace

Timing time_wall(const std::function<void(int)>& call, int warmup, int repeat) {
  for (int i = 0; i < warmup; ++i) call(i);
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call(warmup + i);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return {median(ms), "wall"};
}

Timing time_events(const std::function<void(int, void*)>& call, void* stream, int warmup, int repeat) {
#ifdef GDN_TOOL_CUDA
  auto s = static_cast<cudaStream_t>(stream);
  for (int i = 0; i < warmup; ++i) call(i, stream);
  EventPair events;
  std::vector<double> ms, host_us;
  for (int i = 0; i < repeat; ++i) {
    events.start(s);
    const auto start = std::chrono::steady_clock::now();
    call(warmup + i, stream);
    host_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    events.stop(s);
    ms.push_back(events.elapsed_ms());
  }
  return {median(ms), "events", median(host_us)};
#else
  (void)call, (void)stream, (void)warmup, (void)repeat;
  no_cuda();
#endif
}

Timing time_graph(const std::function<void(int, void*)>& call, void* stream, int calls_per_graph, int repeat) {
#ifdef GDN_TOOL_CUDA
  auto s = static_cast<cudaStream_t>(stream);
  call(0, stream);  // first-launch work (module loading) outside the capture
  cuda_check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  CapturedGraph graph(call, s, calls_per_graph);
  graph.launch(s);
  EventPair events;
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    events.start(s);
    graph.launch(s);
    events.stop(s);
    ms.push_back(events.elapsed_ms() / calls_per_graph);
  }
  return {median(ms), "graph"};
#else
  (void)call, (void)stream, (void)calls_per_graph, (void)repeat;
  no_cuda();
#endif
}

CudaStream::CudaStream() {
#ifdef GDN_TOOL_CUDA
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
#else
  no_cuda();
#endif
}

CudaStream::~CudaStream() {
#ifdef GDN_TOOL_CUDA
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
#endif
}

}  // namespace gdn::tool

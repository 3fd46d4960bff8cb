// The chunked prefill kernels for bf16 q, k, v (bf16 tensor-core products, f32 accumulation): the
// fused kernel and the split form's kernels.
#include "cuda/chunked_fused.cuh"
#include "cuda/chunked_launch.h"
#include "cuda/chunked_split.cuh"

namespace gdn::cuda::chunked {

const ChunkedLaunchers& chunked_launchers_bf16() {
  static const ChunkedLaunchers launchers{
      [](const ChunkParams& p, const TileMaps& m, cudaStream_t s) { return launch_chunked<MmaBf16>(p, m, s); },
      [](const ChunkParams& p, const TileMaps& m, cudaStream_t s) { return launch_chunked_split<MmaBf16>(p, m, s); },
      [] { return set_split_smem_limits<MmaBf16>(); },
      [](const ChunkParams& p, const TileMaps& m, cudaStream_t s) { return launch_prepare<MmaBf16>(p, m, s); },
      [](const ChunkParams& p, const TileMaps& m, cudaStream_t s) { return launch_window_chain<MmaBf16>(p, m, s); },
      [](const ChunkParams& p, cudaStream_t s) { return launch_checkpoint_indices<MmaBf16>(p, s); },
      [] { return wgmma_chain_runs<MmaBf16>(); },
  };
  return launchers;
}

}  // namespace gdn::cuda::chunked

#if GDN_WS_TRACE
// A lab build's timeline of this file's fused warp-specialised kernel (chunked_fused_ws.cuh's
// ws_trace, the last launch's marks), for bench/ws_trace.py: the bytes copied to host memory at
// dst (at most `bytes`), or -1 when the copy failed.
extern "C" __attribute__((visibility("default"))) long long gdn_debug_ws_trace(void* dst, size_t bytes) {
  using gdn::cuda::chunked::ws_trace;
  const size_t n = bytes < sizeof(ws_trace) ? bytes : sizeof(ws_trace);
  return cudaMemcpyFromSymbol(dst, ws_trace, n) == cudaSuccess ? static_cast<long long>(n) : -1;
}
#endif

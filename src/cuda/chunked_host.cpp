// The chunked prefill path's host side: selection (path chunked, or auto above the crossover),
// its checks, and the launch. Everything here is host arithmetic on the validated Problem plus
// cudaDeviceGetAttribute; nothing allocates or synchronises, so a call can be captured in a
// CUDA graph.
#include "cuda/chunked.h"

#include <cuda_runtime_api.h>

#include <cinttypes>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/config_table.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cuda/chunked_launch.h"
#include "cuda/chunked_params.h"
#include "cuda/chunked_tile.h"
#include "cuda/host_common.h"

namespace gdn {
namespace {

namespace ck = cuda::chunked;
using cuda::DeviceScope;
using cuda::device_error;
using cuda::state_dtype;

// The configuration table's row of the cuda chunked path (the one place its dtypes and head
// dims are listed).
const ConfigRow* chunked_row() {
  for (const ConfigRow& row : config_rows())
    if (row.backend == GDN_BACKEND_CUDA && row.path == GDN_PATH_CHUNKED) return &row;
  return nullptr;
}

bool row_takes(const ConfigRow& row, const Problem& p) {
  return contains(row.inputs, p.input_dtype) && row.K.contains(p.K) && row.V.contains(p.V) &&
         contains(row.states, state_dtype(p));
}

// The dynamic shared memory a block of `device` may opt into (0 if the query fails).
int smem_optin(int device) {
  int bytes = 0;
  if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return bytes;
}

int64_t tokens_per_sequence(const Problem& p) {
  return p.packed ? p.T_total / (p.N > 0 ? p.N : 1) : p.T;
}

int sm_count(int device) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return sms;
}

int64_t chunk_slots(const Problem& p) { return ck::chunk_slots(p.packed, p.N, p.T, p.T_total); }

// Whether the split form's grids fit a launch: chunk slots in grid x, Hv in grid y, and the
// chain's N Hv kVSplit CTAs.
bool split_form_fits(const Problem& p) {
  return p.Hv <= 65535 && chunk_slots(p) <= INT_MAX && p.N * p.Hv * ck::kVSplit <= INT_MAX;
}

// How the chunked path runs p (chunked_tile.h): the form, the sequence split and the
// workspace they need, decided once for the workspace query and the call alike.
//  - form: split_form_pays() on the device's SM count and a workspace within
//    kMaxSplitWorkspaceBytes, unless the environment variable GDN_CHUNKED_FORM is `fused` or
//    `split` (the tests and benchmarks run every form through it);
//  - sequence split: dense batches only (a packed batch's lengths are in device memory),
//    plan_segments(), or GDN_CHUNKED_SEGMENTS=M segments.
struct ChunkedPlan {
  bool split = false;
  ck::SegmentPlan segments{1, 0};
  size_t prepared_bytes = 0;   // the prepared chunks, at the workspace's start
  size_t workspace_bytes = 0;  // and the segment states after them
};

ChunkedPlan plan_call(const Problem& p) {
  ChunkedPlan plan;
  if (!split_form_fits(p)) return plan;
  const int sms = sm_count(p.device_id);
  const int64_t chunks = (p.T + ck::kC - 1) / ck::kC;
  plan.segments = ck::SegmentPlan{1, chunks};
  if (!p.packed) {
    int forced = 0;
    if (const char* m = std::getenv("GDN_CHUNKED_SEGMENTS")) forced = std::atoi(m);
    const ck::SegmentPlan s = ck::plan_segments(chunks, p.N * p.Hv * ck::kVSplit, sms, forced);
    const int64_t pass1 = p.N * p.Hv * ck::kVSplit * ck::pass1_runs(s.segments);
    const int64_t combine = p.N * p.Hv * (ck::kV / ck::kCombineRows);
    if (pass1 <= INT_MAX && combine <= INT_MAX) plan.segments = s;
  }
  plan.prepared_bytes = size_t(chunk_slots(p)) * size_t(p.Hv) * sizeof(ck::PreparedChunk);
  const size_t states = plan.segments.segments > 1 ? size_t(p.N) * size_t(plan.segments.segments) * size_t(p.Hv) *
                                                         ck::kSegStates * size_t(p.V) * size_t(p.K) * sizeof(float)
                                                   : 0;
  plan.workspace_bytes = plan.prepared_bytes + states;

  plan.split = ck::split_form_pays(p.N * p.Hv, sms) && plan.workspace_bytes <= ck::kMaxSplitWorkspaceBytes;
  if (const char* form = std::getenv("GDN_CHUNKED_FORM")) {
    if (std::strcmp(form, "split") == 0) plan.split = true;
    if (std::strcmp(form, "fused") == 0) plan.split = false;
  }
  if (!plan.split) plan.workspace_bytes = 0;
  return plan;
}

ck::ChunkParams make_params(const Problem& p) {
  ck::ChunkParams c;
  static_cast<cuda::BatchParams&>(c) = cuda::batch_params(p);
  c.state_bf16 = state_dtype(p) == GDN_DTYPE_BF16;
  c.state_kv = p.state_layout == GDN_STATE_KV;
  return c;
}

}  // namespace

bool cuda_chunked_selected(const Problem& p) {
  if (p.path == GDN_PATH_CHUNKED) return true;
  if (p.path != GDN_PATH_AUTO) return false;
  const ConfigRow* row = chunked_row();
  return row && row_takes(*row, p) && !p.has_snapshots &&
         ck::auto_prefers_chunked(tokens_per_sequence(p)) &&
         smem_optin(p.device_id) >= int(ck::kSmemBytes);
}

gdn_status cuda_chunked_can_implement(const Problem& p) {
  if (ck::chunk_tile(int(p.K), int(p.V)).C == 0)
    return fail(GDN_STATUS_UNSUPPORTED,
                "K, V: %" PRId64 ", %" PRId64 " have no cuda chunked kernel (supported: 128, 128)", p.K, p.V);
  if (p.input_dtype != GDN_DTYPE_BF16 && p.input_dtype != GDN_DTYPE_F16)
    return fail(GDN_STATUS_UNSUPPORTED,
                "q: dtype %s has no cuda chunked kernel (supported: bf16, f16; f32 inputs take path "
                "recurrent or auto)", dtype_name(p.input_dtype));
  if (p.has_snapshots)
    return fail(GDN_STATUS_UNSUPPORTED,
                "state_snapshots: the cuda chunked path writes no per-token states (use path "
                "recurrent or auto)");
  if (p.N * p.Hv > INT_MAX)
    return fail(GDN_STATUS_UNSUPPORTED, "N: %" PRId64 " x Hv %" PRId64 " needs more CTAs than one launch has",
                p.N, p.Hv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    cudaGetLastError();
    devices = 0;
  }
  if (p.device_id >= 0 && p.device_id < devices) {  // otherwise the backend's own checks report it
    const int optin = smem_optin(p.device_id);
    if (optin < int(ck::kSmemBytes))
      return fail(GDN_STATUS_UNSUPPORTED,
                  "q: the cuda chunked kernel needs %zu bytes of shared memory per block, but CUDA "
                  "device %d allows %d (use path recurrent)", ck::kSmemBytes, p.device_id, optin);
  }
  return GDN_STATUS_SUCCESS;
}

gdn_status cuda_chunked_workspace_size(const Problem& p, size_t* bytes) {
  *bytes = plan_call(p).workspace_bytes;
  return GDN_STATUS_SUCCESS;
}

gdn_status cuda_chunked_forward(const Problem& p) {
  ck::ChunkParams c = make_params(p);
  const ChunkedPlan plan = plan_call(p);
  const bool split = plan.split;
  if (split) {
    if (reinterpret_cast<uintptr_t>(p.workspace) % 256 != 0)
      return fail(GDN_STATUS_INVALID_ARGUMENT,
                  "workspace: %p is not 256-byte aligned (the cuda chunked path's workspace must be)", p.workspace);
    c.prepared = p.workspace;
    c.chunk_slots = chunk_slots(p);
    c.chunks_per_seq = (p.T + ck::kC - 1) / ck::kC;
    c.segments = plan.segments.segments;
    c.seg_chunks = plan.segments.seg_chunks;
    if (c.segments > 1)
      c.seg_states = reinterpret_cast<float*>(static_cast<unsigned char*>(p.workspace) + plan.prepared_bytes);
  }
  const DeviceScope scope(p.device_id);
  if (scope.status() != cudaSuccess) return device_error(scope.status(), "cudaSetDevice");
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  const cudaError_t e = p.input_dtype == GDN_DTYPE_F16 ? ck::launch_chunked_f16(c, split, stream)
                                                       : ck::launch_chunked_bf16(c, split, stream);
  if (e != cudaSuccess) return device_error(e, split ? "launching the chunked prepare and chain kernels"
                                                     : "launching the chunked kernel");
  return GDN_STATUS_SUCCESS;
}

}  // namespace gdn

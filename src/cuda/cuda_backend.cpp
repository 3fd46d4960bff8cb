// The cuda backend's host side (core/backend.h): device queries, the checks that need the
// device (pointer kinds, alignment of the vector accesses), and the launch of the recurrent
// kernel. The launch path allocates nothing, synchronises nothing and reads no device memory,
// so a call can be captured in a CUDA graph; it costs one pointer query per distinct pointer (in
// cuda_can_implement), cudaGetDevice, and the launch.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cinttypes>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cuda/chunked.h"
#include "cuda/decode_launch.h"
#include "cuda/decode_params.h"
#include "cuda/decode_tile.h"
#include "cuda/driver_entry.h"
#include "cuda/host_common.h"

namespace gdn {
namespace {

using cuda::DecodeParams;
using cuda::DeviceScope;
using cuda::device_error;
using cuda::state_dtype;
using cuda::state_view;
using cuda::token_view;

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
bool stride16(int64_t stride, gdn_dtype dtype) { return (stride * dtype_size(dtype)) % 16 == 0; }

// q, k, v, o and the states are accessed in 16-byte vectors (8-byte for 4 half-width
// elements): their data and every stride but the innermost must be 16-byte aligned. Views the
// harness and the serving engines make (fused qkv projections, interleaved pools) are.
gdn_status check_vector_alignment(const char* name, const void* data, gdn_dtype dtype,
                                  std::initializer_list<int64_t> strides) {
  if (!data) return GDN_STATUS_SUCCESS;
  if (!aligned16(data))
    return fail(GDN_STATUS_INVALID_ARGUMENT,
                "%s: data %p is not 16-byte aligned (the cuda kernels access it in 16-byte vectors)",
                name, data);
  for (int64_t s : strides)
    if (!stride16(s, dtype))
      return fail(GDN_STATUS_INVALID_ARGUMENT,
                  "%s: stride %" PRId64 " (%s elements) is not a multiple of 16 bytes (the cuda "
                  "kernels access it in 16-byte vectors)",
                  name, s, dtype_name(dtype));
  return GDN_STATUS_SUCCESS;
}

gdn_status check_alignment(const Problem& p) {
  struct Check {
    const char* name;
    const void* data;
    gdn_dtype dtype;
    std::initializer_list<int64_t> strides;
  };
  const TokenTensor& snap = p.snapshots_dense;
  const Check checks[] = {
      {"q", p.q.data, p.q.dtype, {p.q.seq, p.q.tok, p.q.head}},
      {"k", p.k.data, p.k.dtype, {p.k.seq, p.k.tok, p.k.head}},
      {"v", p.v.data, p.v.dtype, {p.v.seq, p.v.tok, p.v.head}},
      {"o", p.o.data, p.o.dtype, {p.o.seq, p.o.tok, p.o.head}},
      {"initial_state", p.initial_state.data, p.initial_state.dtype,
       {p.initial_state.slot, p.initial_state.head, p.initial_state.row}},
      {"final_state", p.final_state.data, p.final_state.dtype,
       {p.final_state.slot, p.final_state.head, p.final_state.row}},
      {"state_snapshots", p.snapshots_pool.data, p.snapshots_pool.dtype,
       {p.snapshots_pool.slot, p.snapshots_pool.head, p.snapshots_pool.row}},
      {"state_snapshots", snap.data, snap.dtype, {snap.seq, snap.tok, snap.head, snap.row}}};
  for (const Check& c : checks) {
    const gdn_status s = check_vector_alignment(c.name, c.data, c.dtype, c.strides);
    if (s != GDN_STATUS_SUCCESS) return s;
  }
  return GDN_STATUS_SUCCESS;
}

// Whether every sequence has at most one token (dense, T <= 1: decode) and a one-token kernel
// covers (K, V): no token loop, and a bf16 state held as stored (half the registers).
bool one_token(const Problem& p) {
  return !p.packed && p.T <= 1 &&
         cuda::decode_tile_valid(p.state_layout == GDN_STATE_KV, int(p.K), int(p.V),
                                 int(dtype_size(state_dtype(p))), true);
}

// The decode kernel for p (decode_launch.h): for one token a sequence in the vk layout with
// bf16 q, k, v, o, the form with the plain (log-decay g, beta probability, both f32, no norm) or
// the serving (raw gate, beta logit, q/k L2 norm) inputs fixed at compile time, when the call is
// one of those; otherwise the generic one-token kernel. Several tokens (verify, packed batches):
// the plain inputs' form where they are the call's, else the generic kernel. GDN_DECODE_FORM=
// generic keeps the generic kernels for every call (to compare the forms: bench_decode.py, the
// DecodeForms tests).
cuda::DecodeForm decode_form(const Problem& p) {
  const bool one = one_token(p);
  const char* chosen = std::getenv("GDN_DECODE_FORM");
  if (chosen && std::strcmp(chosen, "generic") == 0) return one ? cuda::DecodeForm::kOneToken : cuda::DecodeForm::kTokens;
  const auto bf16 = [](const TokenTensor& t) { return t.dtype == GDN_DTYPE_BF16; };
  const bool vk_bf16_io = p.state_layout == GDN_STATE_VK && bf16(p.q) && bf16(p.k) && bf16(p.v) && bf16(p.o);
  const bool plain_gates = p.gate == GDN_GATE_LOG_DECAY && p.g.dtype == GDN_DTYPE_F32 &&
                           p.beta.dtype == GDN_DTYPE_F32 && p.beta_mode == GDN_BETA_PROB && !p.qk_l2norm;
  if (!one)  // checkpoints (every 64 n tokens) only in the generic kernel: the plain form's SASS stays as measured
    return vk_bf16_io && plain_gates && p.checkpoint_tokens == 0 ? cuda::DecodeForm::kTokensPlainBf16
                                                                 : cuda::DecodeForm::kTokens;
  const bool vk_bf16 = vk_bf16_io && !p.has_snapshots;
  if (vk_bf16 && plain_gates) return cuda::DecodeForm::kOneTokenPlainBf16;
  if (vk_bf16 && p.gate == GDN_GATE_RAW && p.beta_mode == GDN_BETA_LOGIT && p.qk_l2norm)
    return cuda::DecodeForm::kOneTokenServingBf16;
  return cuda::DecodeForm::kOneToken;
}

// Whether the recurrent kernel is launched early (programmatic dependent launch, decode_launch.h):
// on devices of compute capability 9 or more, unless GDN_DECODE_EARLY_LAUNCH=0 (to compare).
// The kernel waits for the previous kernel on the stream before it reads anything, so the
// result is the same either way; what overlaps is the launch latency of back-to-back kernels.
bool early_launch(int device) {
  const char* chosen = std::getenv("GDN_DECODE_EARLY_LAUNCH");
  if (chosen && std::strcmp(chosen, "0") == 0) return false;
  int major = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess && major >= 9;
}

// The state's cache hints (decode_streams_state, decode_tile.h), unless GDN_DECODE_STATE_HINTS
// is "stream" or "plain" (to compare: bench_decode.py).
int32_t stream_state(const Problem& p) {
  const char* chosen = std::getenv("GDN_DECODE_STATE_HINTS");
  if (chosen && std::strcmp(chosen, "stream") == 0) return 1;
  if (chosen && std::strcmp(chosen, "plain") == 0) return 0;
  const int64_t bytes = p.N * p.Hv * p.V * p.K * int64_t(dtype_size(state_dtype(p)));
  return cuda::decode_streams_state(bytes) ? 1 : 0;
}

// Whether the plain one-token form takes its instance with the first token's input addresses
// formed before the wait (decode_first_inputs_early, decode_tile.h: dense grids of 4096 CTAs
// and more), unless GDN_DECODE_FIRST_INPUTS is "early" or "late" (to compare: bench_decode.py).
int32_t first_inputs_early(const Problem& p, int64_t ctas) {
  const char* chosen = std::getenv("GDN_DECODE_FIRST_INPUTS");
  if (chosen && std::strcmp(chosen, "early") == 0) return 1;
  if (chosen && std::strcmp(chosen, "late") == 0) return 0;
  return cuda::decode_first_inputs_early(ctas, p.packed) ? 1 : 0;
}

// State rows (vk) or columns (kv) of V per CTA of the recurrent kernel; 0: K not built.
int decode_per_cta(const Problem& p) {
  return cuda::decode_per_cta(p.state_layout == GDN_STATE_KV, int(p.K), int(dtype_size(state_dtype(p))), one_token(p));
}

DecodeParams make_params(const Problem& p) {
  DecodeParams d;
  static_cast<cuda::BatchParams&>(d) = cuda::batch_params(p);
  d.K = int32_t(p.K);
  d.V = int32_t(p.V);
  d.slices = d.V / decode_per_cta(p);
  d.stream_state = stream_state(p);
  d.first_inputs_early = first_inputs_early(p, p.N * p.Hv * d.slices);
  if (p.snapshots_pool.data) {
    d.snap_mode = cuda::kSnapPool;
    d.snap_pool = state_view(p.snapshots_pool);
  } else if (p.snapshots_dense.data) {
    d.snap_mode = cuda::kSnapDense;
    d.snap_dense = token_view(p.snapshots_dense);
    d.snap_row = p.snapshots_dense.row;
  }
  d.snapshot_indices = p.snapshot_indices;
  d.snap_idx_seq = p.snapshot_index_strides.seq;
  d.snap_idx_tok = p.snapshot_index_strides.tok;
  d.snap_pool_slots = p.snapshot_pool_slots;
  d.snap_every = p.checkpoint_tokens;
  cuda::set_grid_divisors(d);
  return d;
}

// The kind of memory at a pointer: the driver's cuPointerGetAttributes, three attributes in one
// call (measured on an H200 host: about 0.11 us a pointer against 0.18 for
// cudaPointerGetAttributes, which asks for more; a plain decode call checks seven pointers),
// reached through the runtime (driver_entry.h); the runtime's query where the driver lacks it.
struct PointerKind {
  bool known = false;     // CUDA knows the address (device, managed or registered host memory)
  bool device = false;    // device memory (managed memory counts as device memory here)
  bool managed = false;
  int ordinal = -1;       // the device it lives on (device memory)
  cudaError_t error = cudaSuccess;
};

using PointerGetAttributes = CUresult (*)(unsigned, CUpointer_attribute*, void**, CUdeviceptr);

PointerGetAttributes pointer_query() {
  static const PointerGetAttributes fn =
      reinterpret_cast<PointerGetAttributes>(cuda::driver_entry_point("cuPointerGetAttributes"));
  return fn;
}

PointerKind pointer_kind(const void* ptr) {
  PointerKind kind;
  if (const PointerGetAttributes query = pointer_query()) {
    // an address CUDA does not know gets zeros and success (the driver's documented behaviour)
    CUpointer_attribute which[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED};
    unsigned type = 0, managed = 0;
    int ordinal = -1;
    void* out[3] = {&type, &ordinal, &managed};
    if (query(3, which, out, CUdeviceptr(reinterpret_cast<uintptr_t>(ptr))) == CUDA_SUCCESS) {
      kind.known = type != 0;
      kind.managed = managed != 0;
      kind.device = type == CU_MEMORYTYPE_DEVICE || kind.managed;
      kind.ordinal = ordinal;
      return kind;
    }
  }
  cudaPointerAttributes attr{};
  kind.error = cudaPointerGetAttributes(&attr, ptr);
  if (kind.error != cudaSuccess) {
    cudaGetLastError();
    return kind;
  }
  kind.known = attr.type != cudaMemoryTypeUnregistered;
  kind.managed = attr.type == cudaMemoryTypeManaged;
  kind.device = attr.type == cudaMemoryTypeDevice || kind.managed;
  kind.ordinal = attr.device;
  return kind;
}

// Every pointer the kernel touches must be device (or managed) memory of p.device_id.
gdn_status check_pointers(const Problem& p) {
  struct Named {
    const char* name;
    const void* ptr;
  };
  const Named all[] = {
      {"q", p.q.data}, {"k", p.k.data}, {"v", p.v.data}, {"o", p.o.data}, {"g", p.g.data},
      {"beta", p.beta.data}, {"a", p.a.data}, {"A_log", p.A_log.data}, {"dt_bias", p.dt_bias.data},
      {"initial_state", p.initial_state.data}, {"final_state", p.final_state.data},
      {"state_snapshots", p.snapshots_dense.data ? p.snapshots_dense.data : p.snapshots_pool.data},
      {"cu_seqlens", p.packed ? p.cu_seqlens : nullptr}, {"state_indices", p.state_indices},
      {"snapshot_indices", p.snapshot_indices}, {"error_flags", p.error_flags}};
  constexpr int kCount = sizeof all / sizeof all[0];
  for (int i = 0; i < kCount; ++i) {
    const void* ptr = all[i].ptr;
    if (!ptr) continue;
    bool seen = false;  // in-place states and shared buffers are asked about once
    for (int m = 0; m < i && !seen; ++m) seen = all[m].ptr == ptr;
    if (seen) continue;
    const PointerKind kind = pointer_kind(ptr);
    if (kind.error != cudaSuccess)
      return fail(GDN_STATUS_INVALID_ARGUMENT, "%s: data %p is not CUDA memory (%s)", all[i].name, ptr,
                  cudaGetErrorString(kind.error));
    if (!kind.device)
      return fail(GDN_STATUS_INVALID_ARGUMENT,
                  "%s: data %p is host memory%s, but the cuda backend needs device memory", all[i].name, ptr,
                  kind.known ? "" : " (or memory CUDA does not know)");
    if (!kind.managed && kind.ordinal != p.device_id)
      return fail(GDN_STATUS_INVALID_ARGUMENT, "%s: data %p lives on CUDA device %d, but device_id is %d",
                  all[i].name, ptr, kind.ordinal, p.device_id);
  }
  return GDN_STATUS_SUCCESS;
}

}  // namespace

bool cuda_compiled() { return true; }

int cuda_device_count() {  // asked once: the launch path checks device_id against it
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      n = 0;
    }
    return n;
  }();
  return count;
}

gdn_status cuda_device_info(int index, char* buf, size_t buf_bytes) {
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, index);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return device_error(e, "cudaGetDeviceProperties");
  }
  std::snprintf(buf, buf_bytes, "%d: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB", index, prop.name,
                prop.major, prop.minor, prop.multiProcessorCount,
                double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                double(prop.l2CacheSize) / (1024.0 * 1024.0));
  return GDN_STATUS_SUCCESS;
}

bool cuda_is_device_pointer(const void* ptr) { return ptr && pointer_kind(ptr).device; }

gdn_status cuda_can_implement(const Problem& p) {
  if (cuda_chunked_selected(p)) {  // the chunked path's own checks, then the shared ones below
    const gdn_status s = cuda_chunked_can_implement(p);
    if (s != GDN_STATUS_SUCCESS) return s;
  }
  const int devices = cuda_device_count();
  if (devices == 0)
    return fail(GDN_STATUS_BACKEND_UNAVAILABLE, "backend: cuda, but no CUDA device is present");
  if (p.device_id < 0 || p.device_id >= devices)
    return fail(GDN_STATUS_INVALID_ARGUMENT, "q: device_id %d is outside [0, %d) (CUDA devices)",
                p.device_id, devices);

  if (!cuda::decode_tile_valid(p.state_layout == GDN_STATE_KV, int(p.K), int(p.V), int(dtype_size(state_dtype(p)))))
    return fail(GDN_STATUS_UNSUPPORTED, "K, V: %" PRId64 ", %" PRId64
                " have no cuda recurrent kernel (supported: 64, 128)", p.K, p.V);
  if (p.N * p.Hv * (p.V / decode_per_cta(p)) > INT_MAX)
    return fail(GDN_STATUS_UNSUPPORTED, "N: %" PRId64 " x Hv %" PRId64 " needs more CTAs than one launch has",
                p.N, p.Hv);

  const gdn_status s = check_alignment(p);
  if (s != GDN_STATUS_SUCCESS) return s;
  return check_pointers(p);
}

gdn_status cuda_workspace_size(const Problem& p, size_t* bytes) {
  if (cuda_chunked_selected(p)) return cuda_chunked_workspace_size(p, bytes);
  *bytes = 0;  // the recurrent kernel needs none
  return GDN_STATUS_SUCCESS;
}

gdn_status cuda_forward(const Problem& p) {
  if (cuda_chunked_selected(p)) return cuda_chunked_forward(p);
  if (decode_per_cta(p) == 0)
    return fail(GDN_STATUS_INTERNAL_ERROR, "cuda_forward: no tile for K=%" PRId64 ", V=%" PRId64, p.K, p.V);
  const DecodeParams d = make_params(p);
  const DeviceScope scope(p.device_id);
  if (scope.status() != cudaSuccess) return device_error(scope.status(), "cudaSetDevice");
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  const bool kv = p.state_layout == GDN_STATE_KV;
  const bool bf16 = state_dtype(p) == GDN_DTYPE_BF16;
  const cuda::DecodeForm form = decode_form(p);
  const bool early = early_launch(int(p.device_id));
  cudaError_t e;
  if (kv)
    e = bf16 ? cuda::launch_decode<true, cuda::Bf16>(d, form, early, stream)
             : cuda::launch_decode<true, float>(d, form, early, stream);
  else
    e = bf16 ? cuda::launch_decode<false, cuda::Bf16>(d, form, early, stream)
             : cuda::launch_decode<false, float>(d, form, early, stream);
  if (e != cudaSuccess) return device_error(e, "launching the recurrent kernel");
  return GDN_STATUS_SUCCESS;
}

gdn_status cuda_copy_to_host(void* dst, const void* src, size_t bytes, void* stream) {
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return device_error(e, "copying indices to the host");
  }
  return GDN_STATUS_SUCCESS;
}

}  // namespace gdn

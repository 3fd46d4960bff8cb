// The chunked prefill path's host side: selection (path chunked, or auto above the crossover),
// its checks, the plan, and the launches. Host arithmetic on the validated Problem plus
// cudaDeviceGetAttribute, kernel launches and, for overlapped windows, events between the
// caller's stream and a side stream (side_stream.h, whose streams and events are created once);
// no device memory is allocated and nothing synchronises the host, so a call can be captured in
// a CUDA graph (it then keeps to the caller's stream).
#include "cuda/chunked.h"

#include <cuda_runtime_api.h>

#include <cinttypes>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/config_table.h"
#include "core/error.h"
#include "cuda/chunked_launch.h"
#include "cuda/chunked_params.h"
#include "cuda/chunked_tile.h"
#include "cuda/host_common.h"
#include "cuda/side_stream.h"
#include "cuda/tensor_map.h"

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

// An attribute of `device`, or 0 if the query fails (the error cleared).
int device_attribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return value;
}

// The dynamic shared memory a block of `device` may opt into, and its SM count (0: unknown).
int smem_optin(int device) { return device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device); }
int sm_count(int device) { return device_attribute(cudaDevAttrMultiProcessorCount, device); }

int64_t tokens_per_sequence(const Problem& p) {
  return p.packed ? p.T_total / (p.N > 0 ? p.N : 1) : p.T;
}

int64_t chunk_slots(const Problem& p) { return ck::chunk_slots(p.packed, p.N, p.T, p.T_total); }

// Whether the split form's grids fit a launch: chunk slots in grid x, Hv in grid y, and the
// chain's N Hv kVSplit CTAs.
bool split_form_fits(const Problem& p) {
  return p.Hv <= 65535 && chunk_slots(p) <= INT_MAX && p.N * p.Hv * ck::kVSplit <= INT_MAX;
}

// How the chunked path runs p (chunked_tile.h): the form, the sequence split or the windows,
// and the workspace they need, decided once for the workspace query and the call alike.
//  - form: choose_form() on the device's SM count (fused, or split with the two-CTA chain or the
//    full chain), unless the environment variable GDN_CHUNKED_FORM is `fused`, `split` (the
//    model's chain), `split1` (the full chain) or `split2` (the two-CTA chain: wgmma where
//    wgmma_chain(), else key halves): the tests and benchmarks run every form through it;
//  - sequence split: dense batches only (a packed batch's lengths are in device memory),
//    plan_segments(), or GDN_CHUNKED_SEGMENTS=M segments; dropped if its workspace would pass
//    kMaxOnePassWorkspaceBytes;
//  - windows: dense batches without a sequence split, plan_windows(), or GDN_CHUNKED_WINDOWS=W
//    chunks a window (0: none; at most the chunk count);
//  - a split form whose workspace would still pass its bound (kMaxSplitWorkspaceBytes with
//    windows, else kMaxOnePassWorkspaceBytes) runs fused instead, unless GDN_CHUNKED_FORM=split.
struct ChunkedPlan {
  bool split = false;
  bool wgmma_chain = false;              // the two-CTA chain is the wgmma one (wgmma_chain())
  int chain_split = ck::kVSplit;         // chain CTAs per (sequence, value head), windows overlapped
  int serial_chain_split = ck::kVSplit;  // the same when the windows or the pass run in turn
  ck::SegmentPlan segments{1, 0};
  ck::WindowPlan windows;
  size_t prepared_bytes = 0;   // the prepared chunks (with windows: one window buffer), first
  size_t workspace_bytes = 0;  // and the segment or window states after them
  size_t ckpt_ok_offset = 0;   // with checkpoints into a pool: ChunkParams::ckpt_seq_ok, at the end
  int forget_mode = 0;         // the sequence split's forgotten start (ChunkParams::seg_live, forget_mode)
  int64_t seg_chunks_forget = 0;  // its layout's segment length (ChunkParams::seg_chunks_forget)
  size_t seg_live_offset = 0;  // with the sequence split: where its live words start, after the segment states
  int f32_value_split = 1;     // f32 inputs: CTAs per (sequence, value head) (f32_value_split)
  int f32_pass1_split = 1;     // f32 inputs with the sequence split: pass 1's (plan_f32_segments)
};

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

// The q, k, v, o tensor maps (tensor_map.h) of the fused kernel, the wgmma chain and its
// prepare kernel, on GPUs
// whose code takes them (compute capability 9.x: the sm_90a build); false (cp.async copies)
// where a view does not fit TMA. GDN_CHUNKED_TMA=0 keeps the cp.async copies (the tests run both).
bool token_tile_maps(const Problem& p, const ck::ChunkParams& c, ck::TileMaps& maps) {
  if (env_int("GDN_CHUNKED_TMA", 1) == 0) return false;
  if (device_attribute(cudaDevAttrComputeCapabilityMajor, p.device_id) != 9) return false;
  const int64_t sequences = p.packed ? 1 : p.N, tokens = p.packed ? p.T_total : p.T;
  if (tokens > INT_MAX || sequences > INT_MAX) return false;
  return cuda::encode_token_map(maps.q, c.q, sequences, tokens, p.Hk) &&
         cuda::encode_token_map(maps.k, c.k, sequences, tokens, p.Hk) &&
         cuda::encode_token_map(maps.v, c.v, sequences, tokens, p.Hv) &&
         cuda::encode_token_map(maps.o, c.o, sequences, tokens, p.Hv);
}

// ChunkParams::seg_live's words: 8 a (sequence, segment, value head), in 256-byte units.
size_t seg_live_bytes(int64_t N, int64_t segments, int64_t Hv) {
  return (size_t(N) * size_t(segments) * size_t(Hv) * 8 * sizeof(int32_t) + 255) / 256 * 256;
}

// GDN_CHUNKED_FORGET: "auto", each head's layout by its gates (kForgetByGates); "1" every head
// the forgotten start's (kForgetAlways); unset or "0" none, the default: the forget instance
// costs heads that keep their start 2 to 4% even in the default layout, and a trained
// model's layer has such heads (docs/NOTES.md, sixty-first and sixty-second sessions).
int forget_mode_from_env() {
  const char* v = std::getenv("GDN_CHUNKED_FORGET");
  if (!v || *v == '\0' || std::strcmp(v, "0") == 0) return 0;
  return std::strcmp(v, "auto") == 0 ? ck::kForgetByGates : ck::kForgetAlways;
}

const ck::ChunkedLaunchers& launchers(const Problem& p) {
  return p.input_dtype == GDN_DTYPE_F16 ? ck::chunked_launchers_f16() : ck::chunked_launchers_bf16();
}

// Whether the split form's two-CTA chain is the wgmma one: where its code has wgmma (compute
// capability 9.x, the sm_90a build), unless GDN_CHUNKED_CHAIN=mma (the tests run both).
bool wgmma_chain(const Problem& p) {
  const char* chain = std::getenv("GDN_CHUNKED_CHAIN");
  if (chain && std::strcmp(chain, "mma") == 0) return false;
  return device_attribute(cudaDevAttrComputeCapabilityMajor, p.device_id) == 9 && launchers(p).wgmma_chain_runs();
}

// f32 inputs (chunked_f32.cu): the value split by the SM count, and the split form where
// f32_split_form() takes it and its workspace (F32PreparedChunk per chunk slot and value head)
// stays within kMaxOnePassWorkspaceBytes, else fused; GDN_CHUNKED_FORM=fused|split* forces either.
// On the split form, dense batches without checkpoints take the sequence split where
// plan_f32_segments() does (its segment states after the prepared chunks, within the same bound).
ChunkedPlan plan_call_f32(const Problem& p) {
  ChunkedPlan plan;
  const int sms = sm_count(p.device_id);
  const int64_t forced_split = env_int("GDN_CHUNKED_F32_SPLIT", 0);
  plan.f32_value_split = ck::f32_value_split(p.N * p.Hv, sms, forced_split);
  const int64_t chunks = (tokens_per_sequence(p) + ck::kC - 1) / ck::kC;
  const bool grid_fits = chunk_slots(p) <= INT_MAX && p.Hk <= 65535;
  plan.prepared_bytes = size_t(chunk_slots(p)) * size_t(p.Hv) * sizeof(ck::F32PreparedChunk);
  plan.split = grid_fits && ck::f32_split_form(plan.f32_value_split, chunks) &&
               plan.prepared_bytes <= ck::kMaxOnePassWorkspaceBytes;
  const char* form = std::getenv("GDN_CHUNKED_FORM");
  if (form && std::strncmp(form, "split", 5) == 0) plan.split = grid_fits;
  if (form && std::strcmp(form, "fused") == 0) plan.split = false;
  plan.workspace_bytes = plan.split ? plan.prepared_bytes : 0;
  if (plan.split && !p.packed && p.checkpoint_tokens == 0) {
    const ck::F32SegmentPlan f = ck::plan_f32_segments(
        chunks, p.N * p.Hv, sms, plan.f32_value_split, int(env_int("GDN_CHUNKED_SEGMENTS", 0)),
        int(env_int("GDN_CHUNKED_F32_PASS1_SPLIT", 0)), int(forced_split));
    const int segments = f.seg.segments;
    const size_t states = size_t(p.N) * size_t(segments) * size_t(p.Hv) * ck::kSegStates * size_t(p.V) *
                          size_t(p.K) * sizeof(float);
    const int64_t runs = ck::pass1_runs(segments) > segments ? ck::pass1_runs(segments) : segments;
    const int64_t ctas = p.N * p.Hv * ck::kF32MaxValueSplit * runs;  // the larger pass's grid at most
    if (segments > 1 && ctas <= INT_MAX && plan.prepared_bytes + states <= ck::kMaxOnePassWorkspaceBytes) {
      plan.segments = f.seg;
      plan.f32_pass1_split = f.pass1_split;
      plan.f32_value_split = f.value_split;
      plan.workspace_bytes = plan.prepared_bytes + states;
    }
  }
  return plan;
}

ChunkedPlan plan_call(const Problem& p) {
  ChunkedPlan plan;
  if (p.input_dtype == GDN_DTYPE_F32) return plan_call_f32(p);
  plan.wgmma_chain = wgmma_chain(p);
  // State checkpoints: stored by the wgmma chain (two CTAs a pair) and the fused kernel only.
  const bool checkpoints = p.checkpoint_tokens > 0;
  const char* form = std::getenv("GDN_CHUNKED_FORM");
  if (!split_form_fits(p) || (checkpoints && (!plan.wgmma_chain || (form && std::strcmp(form, "split1") == 0))))
    return plan;
  const int sms = sm_count(p.device_id);
  const int64_t chunks = (p.T + ck::kC - 1) / ck::kC;
  const size_t chunk_bytes = sizeof(ck::PreparedChunk);
  const size_t state_bytes = size_t(p.V) * size_t(p.K) * sizeof(float);
  const size_t all_heads = size_t(p.N) * size_t(p.Hv) * chunk_bytes;  // one chunk of every (sequence, head)
  // the state between windows, and each wgmma chain warp's exponent for it (ChunkParams::window_sigma)
  const size_t carry_bytes = size_t(p.N) * size_t(p.Hv) * (state_bytes + size_t(p.V / 16) * sizeof(int32_t));
  const auto overlaps = [&](int split) {  // whether plan_windows would overlap that chain (dense only)
    return !p.packed && ck::plan_windows(chunks, p.N * p.Hv * split, sms, all_heads, carry_bytes).overlap;
  };
  const ck::FormChoice choice = ck::choose_form(p.N * p.Hv, sms, plan.wgmma_chain, overlaps, !checkpoints);
  plan.chain_split = choice.chain_split;
  plan.serial_chain_split = choice.serial_chain_split;
  const int forced_chain = form && std::strcmp(form, "split1") == 0   ? 1
                           : form && std::strcmp(form, "split2") == 0 ? ck::kVSplit
                                                                      : 0;
  if (forced_chain) plan.chain_split = plan.serial_chain_split = forced_chain;
  plan.segments = ck::SegmentPlan{1, chunks};
  plan.prepared_bytes = size_t(chunk_slots(p)) * size_t(p.Hv) * chunk_bytes;
  if (!p.packed) {
    // the sequence split runs on the key-half chain
    const int64_t half_ctas = p.N * p.Hv * ck::kVSplit;
    ck::SegmentPlan s = ck::plan_segments(chunks, half_ctas, sms, int(env_int("GDN_CHUNKED_SEGMENTS", 0)));
    // The forgotten start (ChunkParams::seg_live, chunked_runs.cuh): pass 2 redoes each
    // segment's chunks only up to the last whose start the measured transition has not
    // forgotten, but the last segment has no pass-1 runs and runs whole, so that layout makes it
    // the short remainder: the others floor((chunks - 1) / (segments - 1)) chunks. With
    // GDN_CHUNKED_FORGET=auto each head takes it or the default layout on the device, by its
    // gates (forgotten_layout); =1 gives every head that layout; unset or 0 none (the default
    // kernels).
    const int forget_mode = forget_mode_from_env();
    if (plan.wgmma_chain && !checkpoints && forget_mode != 0 && s.segments > 2 && (chunks - 1) / (s.segments - 1) >= 1) {
      plan.forget_mode = forget_mode;
      plan.seg_chunks_forget = (chunks - 1) / (s.segments - 1);
    }
    const int64_t pass1 = half_ctas * ck::pass1_runs(s.segments);
    const int64_t combine = p.N * p.Hv * (ck::kV / ck::kCombineRows);
    // the segment states, then the transition runs' live words (ChunkParams::seg_live)
    const size_t seg_states = size_t(p.N) * size_t(s.segments) * size_t(p.Hv) * ck::kSegStates * state_bytes;
    const size_t states = seg_states + seg_live_bytes(p.N, s.segments, p.Hv);
    if (s.segments > 1 && pass1 <= INT_MAX && combine <= INT_MAX &&
        plan.prepared_bytes + states <= ck::kMaxOnePassWorkspaceBytes) {
      plan.segments = s;
      plan.seg_live_offset = plan.prepared_bytes + seg_states;
      plan.chain_split = plan.serial_chain_split = ck::kVSplit;
      plan.workspace_bytes = plan.prepared_bytes + states;
    } else {
      const int64_t chain_ctas = p.N * p.Hv * plan.chain_split;
      const int64_t forced = env_int("GDN_CHUNKED_WINDOWS", -1);
      if (forced < 0) {
        plan.windows = ck::plan_windows(chunks, chain_ctas, sms, all_heads, carry_bytes);
      } else if (forced > 0 && chunks > 0) {
        plan.windows.window_chunks = forced < chunks ? forced : chunks;
        plan.windows.windows = (chunks + plan.windows.window_chunks - 1) / plan.windows.window_chunks;
        plan.windows.overlap = sms > 0 && 2 * chain_ctas <= sms;
      }
      if (plan.windows.window_chunks > 0) {
        plan.prepared_bytes = size_t(plan.windows.window_chunks) * all_heads;
        plan.workspace_bytes = ck::kWindowBuffers * plan.prepared_bytes + carry_bytes;
      }
    }
  }
  if (plan.workspace_bytes == 0) plan.workspace_bytes = plan.prepared_bytes;
  if (checkpoints && p.snapshot_indices) {  // the sequences' snapshot-index verdicts, after the rest
    plan.ckpt_ok_offset = plan.workspace_bytes;
    plan.workspace_bytes += (size_t(p.N) * sizeof(int32_t) + 255) / 256 * 256;
  }

  const size_t cap = plan.windows.window_chunks > 0 ? ck::kMaxSplitWorkspaceBytes : ck::kMaxOnePassWorkspaceBytes;
  plan.split = choice.split && plan.workspace_bytes <= cap;
  if (form && std::strncmp(form, "split", 5) == 0) plan.split = true;
  if (form && std::strcmp(form, "fused") == 0) plan.split = false;
  if (!plan.split) plan.workspace_bytes = 0;
  return plan;
}

// The windows of a split call (chunked_tile.h), each its preparation then its chain. With two
// windows or more, a side stream leased and the caller's stream not being captured (whether
// the plan overlaps them or not: windows in turn then gain the SMs and tail each chain leaves),
// the chains run on the side stream, one priority above the caller's stream, beside the next
// window's preparation on the caller's stream, ordered by events: the side stream first waits
// for everything already queued on the caller's stream (fork); chain(w) after prepare(w);
// prepare(w + 1) after the side stream has reached chain(w) (an event recorded just before it:
// prepare(w) and chain(w - 1) done), so that chain(w)'s CTAs, which need whole SMs, are
// dispatched with prepare(w + 1)'s and not after them (prepare(w + 1) reuses chain(w - 1)'s
// buffer, so it waited for chain(w - 1) already); the caller's stream waits for the last
// chain (join), on the error paths too, so nothing of the call outlives what the caller's
// stream orders. Otherwise the windows run one after the other on the caller's stream, or,
// when the whole call's chunks fit the workspace (one_pass_fits), as one pass.
cudaError_t run_windows(const ck::ChunkedLaunchers& launch, const ck::ChunkParams& base_in, const ck::TileMaps& maps,
                        const ChunkedPlan& plan, unsigned char* workspace, cudaStream_t stream, int device,
                        bool one_pass_fits) {
  static_assert(ck::kWindowBuffers == 2, "the event ring holds two records of each kind, one buffer a window");
  ck::ChunkParams base = base_in;
  const int64_t wc = plan.windows.window_chunks, windows = plan.windows.windows;
  base.window_chunks = wc;
  base.chunk_slots = base.N * wc;
  base.seg_pass = ck::kPassWindow;
  base.window_state = reinterpret_cast<float*>(workspace + ck::kWindowBuffers * plan.prepared_bytes);
  base.window_sigma = reinterpret_cast<int32_t*>(base.window_state + base.N * base.Hv * int64_t(ck::kV * ck::kK));
  const auto window = [&](int64_t w) {
    ck::ChunkParams p = base;
    p.window_begin = w * wc;
    p.prepared = workspace + (w % ck::kWindowBuffers) * plan.prepared_bytes;
    return p;
  };
  cudaError_t e = launch.split_limits();
  if (e != cudaSuccess) return e;

  cuda::SideStreamLease side;
  // windows in turn take the side stream too: prepare(w + 1) then fills the SMs chain(w) leaves
  // idle and its tail (Hv 64: 1.702 -> 1.685 ms; docs/NOTES.md, fifty-fourth session)
  if (windows > 1 && !cuda::stream_is_capturing(stream))
    side = cuda::lease_side_stream(device, cuda::priority_above(stream), stream);
  if (side.ok()) {  // the fork: a failure on the caller's stream is the call's; on the side stream, it is given up
    if ((e = cudaEventRecord(side.event(0), stream)) != cudaSuccess) return e;
    if (cudaStreamWaitEvent(side.stream(), side.event(0), 0) != cudaSuccess) {
      cudaGetLastError();
      side.discard();
    }
  }
  if (!side.ok()) {  // in turn, on the caller's stream, with the chain that pays without overlap
    base.chain_split = plan.serial_chain_split;
    if (one_pass_fits) {
      ck::ChunkParams whole = base_in;
      whole.chain_split = plan.serial_chain_split;
      return launch.split(whole, maps, stream);
    }
    for (int64_t w = 0; w < windows && e == cudaSuccess; ++w) {
      e = launch.prepare(window(w), maps, stream);
      if (e == cudaSuccess) e = launch.window_chain(window(w), maps, stream);
    }
    return e;
  }
  // events: 0 fork, 1 join, 2 + w % 2 prepare(w) done, 4 + w % 2 the side stream at chain(w).
  // An event is recorded again only after every wait on its previous record was enqueued.
  const cudaStream_t chain_stream = side.stream();
  const auto prepared = [&](int64_t w) { return side.event(2 + int(w % 2)); };
  const auto chain_next = [&](int64_t w) { return side.event(4 + int(w % 2)); };
  const auto ok = [&](cudaError_t r) { return (e = r) == cudaSuccess; };
  const auto join_on_error = [&] {
    if (cudaEventRecord(side.event(1), chain_stream) != cudaSuccess ||
        cudaStreamWaitEvent(stream, side.event(1), 0) != cudaSuccess) {
      cudaGetLastError();
      side.discard();  // not joined: never lease it again
    }
    return e;
  };
  if (!ok(launch.prepare(window(0), maps, stream)) || !ok(cudaEventRecord(prepared(0), stream))) return join_on_error();
  for (int64_t w = 0; w < windows; ++w) {
    if (!ok(cudaStreamWaitEvent(chain_stream, prepared(w), 0)) || !ok(cudaEventRecord(chain_next(w), chain_stream)) ||
        !ok(launch.window_chain(window(w), maps, chain_stream)))
      return join_on_error();
    if (w + 1 < windows) {  // (chain_next(w) follows chain(w - 1): the buffer prepare(w + 1) reuses is free)
      if (!ok(cudaStreamWaitEvent(stream, chain_next(w), 0)) || !ok(launch.prepare(window(w + 1), maps, stream)) ||
          !ok(cudaEventRecord(prepared(w + 1), stream)))
        return join_on_error();
    }
  }
  if (!ok(cudaEventRecord(side.event(1), chain_stream)) || !ok(cudaStreamWaitEvent(stream, side.event(1), 0)))
    return join_on_error();  // (the join, once more; else the side stream is given up)
  return cudaSuccess;
}

ck::ChunkParams make_params(const Problem& p) {
  ck::ChunkParams c;
  static_cast<cuda::BatchParams&>(c) = cuda::batch_params(p);
  c.state_bf16 = state_dtype(p) == GDN_DTYPE_BF16;
  c.state_kv = p.state_layout == GDN_STATE_KV;
  if (p.checkpoint_tokens > 0) {  // (validation: only with state_snapshots)
    static_assert(GDN_CHECKPOINT_TOKENS % ck::kC == 0, "checkpoints fall on chunk ends");
    c.ckpt_tokens = p.checkpoint_tokens;
    if (p.snapshots_dense.data) {
      c.ckpt_dense = cuda::token_view(p.snapshots_dense);
      c.ckpt_row = p.snapshots_dense.row;
    } else {
      c.ckpt_pool = cuda::state_view(p.snapshots_pool);
    }
    c.snapshot_indices = p.snapshot_indices;
    c.snap_idx_seq = p.snapshot_index_strides.seq;
    c.snap_idx_tok = p.snapshot_index_strides.tok;
    c.snap_pool_slots = p.snapshot_pool_slots;
  }
  return c;
}

}  // namespace

bool cuda_chunked_selected(const Problem& p) {
  if (p.path == GDN_PATH_CHUNKED) return true;
  if (p.path != GDN_PATH_AUTO) return false;
  const ConfigRow* row = chunked_row();
  return row && row_takes(*row, p) && (!p.has_snapshots || p.checkpoint_tokens > 0) &&
         ck::auto_prefers_chunked(tokens_per_sequence(p), p.input_dtype == GDN_DTYPE_F32) &&
         smem_optin(p.device_id) >= int(ck::kChunkedSmemBytes);
}

gdn_status cuda_chunked_can_implement(const Problem& p) {
  if (ck::chunk_tile(int(p.K), int(p.V)).C == 0)
    return fail(GDN_STATUS_UNSUPPORTED,
                "K, V: %" PRId64 ", %" PRId64 " have no cuda chunked kernel (supported: 128, 128)", p.K, p.V);
  if (p.has_snapshots && p.checkpoint_tokens == 0)
    return fail(GDN_STATUS_UNSUPPORTED,
                "state_snapshots: the cuda chunked path writes no per-token states, only "
                "checkpoints (chunk_checkpoint_every > 0; else use path recurrent or auto)");
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
    if (optin < int(ck::kChunkedSmemBytes))
      return fail(GDN_STATUS_UNSUPPORTED,
                  "q: the cuda chunked kernel needs %zu bytes of shared memory per block, but CUDA "
                  "device %d allows %d (use path recurrent)", ck::kChunkedSmemBytes, p.device_id, optin);
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
    c.chain_split = plan.chain_split;
    c.segments = plan.segments.segments;
    c.seg_chunks = plan.segments.seg_chunks;
    if (c.segments > 1)
      c.seg_states = reinterpret_cast<float*>(static_cast<unsigned char*>(p.workspace) + plan.prepared_bytes);
    if (plan.ckpt_ok_offset > 0)
      c.ckpt_seq_ok = reinterpret_cast<int32_t*>(static_cast<unsigned char*>(p.workspace) + plan.ckpt_ok_offset);
  }
  const DeviceScope scope(p.device_id);
  if (scope.status() != cudaSuccess) return device_error(scope.status(), "cudaSetDevice");
  const cudaStream_t stream = static_cast<cudaStream_t>(p.stream);
  if (p.input_dtype == GDN_DTYPE_F32) {
    c.f32_value_split = plan.f32_value_split;
    c.f32_pass1_split = plan.f32_pass1_split;
    const cudaError_t e = ck::launch_chunked_f32(c, stream);
    return e == cudaSuccess ? GDN_STATUS_SUCCESS
                            : device_error(e, split ? "launching the chunked f32 prepare and chain kernels"
                                                    : "launching the chunked f32 kernel");
  }
  const ck::ChunkedLaunchers& launch = launchers(p);
  // Windows that would run one after the other anyway (a graph capture; run_windows also checks
  // for a side stream) while the whole call's chunks fit the same workspace: one pass instead,
  // without the windows' gaps.
  // (not into the checkpoint-index words after the rest: the check kernel writes them first)
  const size_t before_flags = plan.ckpt_ok_offset > 0 ? plan.ckpt_ok_offset : plan.workspace_bytes;
  const bool one_pass_fits = size_t(c.chunk_slots) * size_t(p.Hv) * sizeof(ck::PreparedChunk) <= before_flags;
  const bool windows = plan.windows.window_chunks > 0 &&
                       !(one_pass_fits && (!plan.windows.overlap || cuda::stream_is_capturing(stream)));
  if (!windows || !plan.windows.overlap) c.chain_split = plan.serial_chain_split;  // nothing overlaps
  c.chain_wgmma = split && plan.wgmma_chain;
  // The wgmma chain's U warpgroup forms U^T from T and Vc (the prepare kernel then writes T and
  // loads no v: 17% faster, 263 -> 218 us on 1 x 16384 in one pass, against the chain's 349 ->
  // 384) wherever the chain runs without the sequence split (pass 1 has no registers for it):
  // in turn with the preparation (1 x 32768 at Hv 64: 1.89 -> 1.77 ms) and, since the chain's
  // indices are known uniform, beside overlapped windows too (1 x 16384 0.572 -> 0.564 ms, 1 x
  // 65536 2.088 -> 2.057; docs/NOTES.md, fifty-third session). GDN_CHUNKED_CHAIN_U=0|1 forces
  // either (the tests run both).
  // The forgotten start (ChunkParams::seg_live, chunked_runs.cuh): with the sequence split on the
  // wgmma chain, the heads that take its layout (by their gates, or all) run it: pass 1's local
  // runs write o, and pass 2 redoes only the chunks whose start the transitions have not yet
  // brought below 2^kForgetExponent; the others run the default layout. Not with checkpoints
  // (pass 1's local runs would store them before the true ones); the mode from
  // GDN_CHUNKED_FORGET (plan_call; opt-in; the tests run each).
  if (c.chain_wgmma && c.segments > 2 && plan.forget_mode != 0) {
    c.seg_live = reinterpret_cast<int32_t*>(static_cast<unsigned char*>(p.workspace) + plan.seg_live_offset);
    c.seg_chunks_forget = plan.seg_chunks_forget;
    c.forget_mode = plan.forget_mode;
  }
  const int64_t forced_chain_u = env_int("GDN_CHUNKED_CHAIN_U", -1);
  c.chain_forms_u = c.chain_wgmma && c.segments < 2 && forced_chain_u != 0;
  // The wgmma prepare kernel's head groups, except beside an overlapped window's chain: that
  // chain's CTAs start only where the preparation's CTAs have left whole SMs, and a group's
  // CTA lasts a head's time per head (measured with groups of two there: 1 x 4096 and
  // 1 x 16384 5% slower, 1 x 65536 7%).
  const int64_t forced_heads = env_int("GDN_CHUNKED_PREP_HEADS", 0);
  c.prep_heads = forced_heads <= 0 && windows && plan.windows.overlap
                     ? 1
                     : ck::prep_group_heads(c.ratio, int(forced_heads));
  ck::TileMaps maps;
  if (!split || c.chain_wgmma) maps.on = token_tile_maps(p, c, maps);
  // The fused form's warp-specialised kernel where its code has wgmma and the copies go by TMA;
  // GDN_CHUNKED_WS=0 keeps chunked_fused.cuh's kernel (the tests run both).
  c.fused_ws = !split && maps.on && launch.wgmma_chain_runs() && env_int("GDN_CHUNKED_WS", 1) != 0;
  // With checkpoints into a pool, the split form's snapshot indices are checked first, once.
  cudaError_t e = split && c.ckpt_seq_ok ? launch.checkpoint_indices(c, stream) : cudaSuccess;
  if (e == cudaSuccess) {
    if (!split)
      e = launch.fused(c, maps, stream);
    else if (windows)
      e = run_windows(launch, c, maps, plan, static_cast<unsigned char*>(p.workspace), stream, p.device_id,
                      one_pass_fits);
    else
      e = launch.split(c, maps, stream);
  }
  if (e != cudaSuccess) return device_error(e, split ? "launching the chunked prepare and chain kernels"
                                                     : "launching the chunked kernel");
  return GDN_STATUS_SUCCESS;
}

}  // namespace gdn

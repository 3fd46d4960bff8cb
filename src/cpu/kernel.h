// The interface between the cpu backend's driver (forward.cpp, compiled once) and its kernel
// (kernel_impl.h, compiled once per SIMD target into namespace gdn::cpu::<target>).
//
// Plain data and declarations only: a target's translation unit must define no function that
// another one also defines (an inline function used in both), or the linker could keep the copy
// compiled for AVX-512 and run it on a machine without AVX-512. kernel_impl.h keeps its helpers
// in an unnamed namespace for the same reason.
#pragma once

#include <cstdint>

#include "gdn/gdn.h"

namespace gdn::cpu {

constexpr int64_t kMaxHeadDim = 256;  // the largest K and V the kernel's buffers hold
constexpr int64_t kLanes = 16;   // vk: rows of the state block padded to this many f32 (K)
constexpr int64_t kStrip = 32;   // kv: columns of the state block, a multiple of this (V)
constexpr int64_t kBlockCapacity = 16384;  // f32 of the kernel's state block (64 KiB)
constexpr int64_t kChunk = 8;    // tokens whose q, k, v and gates are prepared together

// A thread's working memory, allocated by the driver (too large for every thread's stack).
struct Scratch {
  alignas(64) float S[kBlockCapacity];     // the state block, f32
  alignas(64) float q[kChunk][kMaxHeadDim];  // [n, K] a chunk's queries, zero beyond K
  alignas(64) float k[kChunk][kMaxHeadDim];  // [n, K] keys, zero beyond K
  alignas(64) float v[kChunk][kMaxHeadDim];  // [n, vb] values of the block, zero beyond vb
  alignas(64) float o[kChunk][kMaxHeadDim];  // [n, vb] outputs of the block
  float alpha[kChunk], beta[kChunk], kq[kChunk];  // [n] decay, beta, k . q
};

// Per call: sizes, options, dtypes.
struct Params {
  int64_t K = 0, V = 0;
  gdn_dtype x_dtype = GDN_DTYPE_NONE;  // q, k, v, o
  gdn_dtype g_dtype = GDN_DTYPE_NONE, beta_dtype = GDN_DTYPE_NONE, a_dtype = GDN_DTYPE_NONE;
  gdn_dtype state_in_dtype = GDN_DTYPE_NONE, state_out_dtype = GDN_DTYPE_NONE;
  gdn_dtype snapshot_dtype = GDN_DTYPE_NONE;
  gdn_gate_mode gate = GDN_GATE_LOG_DECAY;
  gdn_beta_mode beta_mode = GDN_BETA_PROB;
  gdn_state_layout layout = GDN_STATE_VK;
  bool l2norm = false;
  float scale = 0;
};

// One (sequence n, value head h). Token t of a per-token tensor X starts at X + t * X_tok
// (in elements of its dtype); row r of a state at state + r * state_row. The state is [R, C]:
// (V, K) for the vk layout, (K, V) for kv.
struct Task {
  int64_t len = 0;      // tokens of sequence n
  bool padded = false;  // state slot -1: outputs zero; no state read or written (nor snapshots)
  const void* q = nullptr;     int64_t q_tok = 0;     // [len, K] at key head j
  const void* k = nullptr;     int64_t k_tok = 0;     // [len, K] at key head j
  const void* v = nullptr;     int64_t v_tok = 0;     // [len, V]
  void* o = nullptr;           int64_t o_tok = 0;     // [len, V]
  const void* g = nullptr;     int64_t g_tok = 0;     // [len] (gates log_decay, decay_rate)
  const void* beta = nullptr;  int64_t beta_tok = 0;  // [len]
  const void* a = nullptr;     int64_t a_tok = 0;     // [len] (gate raw)
  float A_log = 0, dt_bias = 0;                        // gate raw, this head's
  const void* state_in = nullptr;  int64_t state_in_row = 0;   // [R, C]; null: zeros
  void* state_out = nullptr;       int64_t state_out_row = 0;  // [R, C]; null: not written
  // State after token t: dense: snap + t * snap_tok; pooled (snap_index not null): slot
  // s = snap_index[t * snap_index_tok] at snap + s * snap_tok, nothing when s = -1.
  void* snap = nullptr;  int64_t snap_tok = 0, snap_row = 0;
  const int32_t* snap_index = nullptr;  int64_t snap_index_tok = 0;
  int64_t snap_every = 0;  // > 0: only after tokens t with (t + 1) % snap_every == 0 (checkpoints)
};

// Runs task's tokens for the value indices [v0, v1): state rows v0..v1 (vk) or columns (kv),
// which evolve independently of the others. The block must fit kBlockCapacity:
// (v1 - v0) * pad(K, kLanes) for vk, K * pad(v1 - v0, kStrip) for kv.
using KernelFn = void (*)(const Params& p, const Task& task, int64_t v0, int64_t v1,
                          Scratch& scratch);

// One kernel per target, each compiled from kernel_impl.h (see kernel_<target>.cpp).
namespace baseline {
void run(const Params& p, const Task& task, int64_t v0, int64_t v1, Scratch& scratch);
}
#if defined(__x86_64__) || defined(_M_X64)
namespace avx2 {
void run(const Params& p, const Task& task, int64_t v0, int64_t v1, Scratch& scratch);
}
namespace avx512 {
void run(const Params& p, const Task& task, int64_t v0, int64_t v1, Scratch& scratch);
}
namespace avx512bf16 {
void run(const Params& p, const Task& task, int64_t v0, int64_t v1, Scratch& scratch);
}
#endif

}  // namespace gdn::cpu

// The kernel-side parameter block of the CUDA recurrent (decode / verify) kernels: a POD passed
// by value as a __grid_constant__ argument. cuda_backend.cpp fills it from a validated Problem;
// the kernels read nothing else. Letters as in SPEC.md: N sequences, T tokens, Hk / Hv heads,
// K / V head dims, P (P2) state (snapshot) pool slots; R x C is the state's stored shape,
// V x K for the vk layout and K x V for kv.
#pragma once

#include <cstdint>

#include "cuda/views.h"

namespace gdn::cuda {

// Tag type of bf16 state storage (the kernels' state element type is float or Bf16).
struct Bf16 {
  uint16_t bits;
};

enum SnapshotMode : int32_t { kSnapNone = 0, kSnapDense = 1, kSnapPool = 2 };

struct DecodeParams {
  // ---- sizes (SPEC letters)
  int64_t N = 0;
  int64_t T = 0;        // dense: tokens per sequence (packed: per-sequence from cu_seqlens)
  int64_t T_total = 0;  // tokens over the batch
  int32_t Hk = 0, Hv = 0, K = 0, V = 0, ratio = 0;
  int32_t slices = 1;   // CTAs per (sequence, value head): V / (state rows or columns per CTA)

  // ---- per-token tensors
  TokenView q, k;          // [N, T, Hk, K]
  TokenView v, o;          // [N, T, Hv, V]
  TokenView g, beta, a;    // [N, T, Hv]; g absent for gate raw, a present only for it
  const void* A_log = nullptr;    // [Hv] (gate raw)
  const void* dt_bias = nullptr;  // [Hv] (gate raw)
  int64_t A_log_stride = 0, dt_bias_stride = 0;
  int32_t A_log_dtype = 0, dt_bias_dtype = 0;

  // ---- states: f32 or bf16 storage (one dtype for all), f32 math
  StateView h0;            // initial [N | P, Hv, R, C]; p null: zeros
  StateView ht;            // final, same slots; p null: not written; may equal h0.p (in place)
  int32_t snap_mode = kSnapNone;
  TokenView snap_dense;    // [N, T, Hv, R, C]: (n, t, h, r * snap_row + c)
  int64_t snap_row = 0;
  StateView snap_pool;     // [P2, Hv, R, C] at slot snapshot_indices[n, t]

  // ---- index tensors in device memory, checked by the kernel
  const void* cu_seqlens = nullptr;  // [N + 1], int32 or int64
  int32_t cu_seqlens_i64 = 0;
  const int32_t* state_indices = nullptr;  // [N] in [-1, P)
  int64_t state_indices_stride = 1;
  int64_t pool_slots = 0;                  // P
  const int32_t* snapshot_indices = nullptr;  // [N, T] | [T_total] in [-1, P2)
  int64_t snap_idx_seq = 0, snap_idx_tok = 0;
  int64_t snap_pool_slots = 0;                // P2
  uint32_t* error_flags = nullptr;            // GDN_ERROR_FLAG_* are ORed in

  // ---- options
  int32_t gate = 0;        // gdn_gate_mode
  int32_t beta_logit = 0;  // beta = sigmoid(b)
  int32_t tiled = 0;       // head map: j = h % Hk (else h / ratio)
  int32_t l2norm = 0;      // q, k <- x rsqrt(sum x^2 + 1e-6)
  float scale = 0.f;
};

}  // namespace gdn::cuda

// The chunked prefill kernel's parameter block: a POD passed by value as a __grid_constant__
// argument. chunked_host.cpp fills it from a validated Problem; the kernel reads nothing else.
// Letters as in SPEC.md: N sequences, T tokens, Hk / Hv heads, K / V head dims, P pool slots;
// R x C is the state's stored shape (V x K for the vk layout, K x V for kv).
#pragma once

#include <cstdint>

#include "cuda/views.h"

namespace gdn::cuda::chunked {

struct ChunkParams {
  // ---- sizes (SPEC letters)
  int64_t N = 0;
  int64_t T = 0;        // dense: tokens per sequence (packed: per sequence from cu_seqlens)
  int64_t T_total = 0;  // tokens over the batch
  int32_t Hk = 0, Hv = 0, ratio = 0;

  // ---- per-token tensors
  TokenView q, k;        // [N, T, Hk, K]; the kernel's input dtype (bf16 or f16)
  TokenView v, o;        // [N, T, Hv, V]; same dtype
  TokenView g, beta, a;  // [N, T, Hv]; f32 or the input dtype; g absent for gate raw
  const void* A_log = nullptr;    // [Hv] (gate raw)
  const void* dt_bias = nullptr;  // [Hv] (gate raw)
  int64_t A_log_stride = 0, dt_bias_stride = 0;
  int32_t A_log_dtype = 0, dt_bias_dtype = 0;

  // ---- states: f32 or bf16 storage, f32 math
  StateView h0;              // initial; p null: zeros
  StateView ht;              // final, same slots; p null: not written; may equal h0.p (in place)
  int32_t state_bf16 = 0;   // storage dtype bf16 (else f32)
  int32_t state_kv = 0;     // layout kv (else vk)

  // ---- index tensors in device memory, checked by the kernel
  const void* cu_seqlens = nullptr;  // [N + 1], int32 or int64; null: dense
  int32_t cu_seqlens_i64 = 0;
  const int32_t* state_indices = nullptr;  // [N] in [-1, P); null: slot n
  int64_t state_indices_stride = 1;
  int64_t pool_slots = 0;
  uint32_t* error_flags = nullptr;         // GDN_ERROR_FLAG_* are ORed in

  // ---- options
  int32_t gate = 0;        // gdn_gate_mode
  int32_t beta_logit = 0;  // beta = sigmoid(b)
  int32_t tiled = 0;       // head map j = h % Hk (else h / ratio)
  int32_t l2norm = 0;      // q, k <- x rsqrt(sum x^2 + 1e-6)
  float scale = 0.f;
};

}  // namespace gdn::cuda::chunked

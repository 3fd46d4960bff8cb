// The part of the kernels' parameter blocks (decode_params.h, chunked_params.h) that both
// paths share: sizes, per-token tensors, gate vectors, states, device-resident indices and the
// options. host_common.h fills it from a validated Problem. A POD passed by value; letters as
// in SPEC.md.
#pragma once

#include <cstdint>

#include "cuda/views.h"

namespace gdn::cuda {

struct BatchParams {
  // ---- sizes (SPEC letters)
  int64_t N = 0;
  int64_t T = 0;        // dense: tokens per sequence (packed: per sequence from cu_seqlens)
  int64_t T_total = 0;  // tokens over the batch
  int32_t Hk = 0, Hv = 0, ratio = 0;

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

  // ---- index tensors in device memory, checked by the kernels
  const void* cu_seqlens = nullptr;  // [N + 1], int32 or int64; null: dense
  int32_t cu_seqlens_i64 = 0;
  const int32_t* state_indices = nullptr;  // [N] in [-1, P); null: slot n
  int64_t state_indices_stride = 1;
  int64_t pool_slots = 0;                  // P
  uint32_t* error_flags = nullptr;         // GDN_ERROR_FLAG_* are ORed in

  // ---- options
  int32_t gate = 0;        // gdn_gate_mode
  int32_t beta_logit = 0;  // beta = sigmoid(b)
  int32_t tiled = 0;       // head map: j = h % Hk (else h / ratio)
  int32_t l2norm = 0;      // q, k <- x rsqrt(sum x^2 + 1e-6)
  float scale = 0.f;
};

}  // namespace gdn::cuda

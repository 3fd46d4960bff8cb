// The validated, resolved form of gdn_forward_args that every backend consumes.
// core/validate.cpp builds it; backends never see gdn_forward_args and never re-validate.
#pragma once

#include <cstdint>

#include "gdn/gdn.h"

namespace gdn {

// A per-token tensor (q, k, v, o, g, beta, a, dense snapshots): element (n, t, h, i) of
// sequence n, its token t, head h, inner index i is at
//   data + n * seq + (bos(n) + t) * tok + h * head + i * row  (elements of dtype)
// where bos(n) = cu_seqlens[n] for packed batches and 0 for dense ones (packed: seq = 0).
// For [.., Hv] tensors (g, beta, a) i is unused; for snapshots i is the row of the state and
// the column index is contiguous. Every innermost index has stride 1 except `row` above.
struct TokenTensor {
  void* data = nullptr;
  gdn_dtype dtype = GDN_DTYPE_NONE;
  int64_t seq = 0;   // stride between sequences (0 when packed)
  int64_t tok = 0;   // stride between tokens
  int64_t head = 0;  // stride between heads
  int64_t row = 0;   // snapshots only: stride between state rows
};

// A state tensor, dense [N, Hv, R, C] or a pool [P, Hv, R, C], where (R, C) = (V, K) for the
// vk layout and (K, V) for kv. Element (slot, h, r, c) is at
//   data + slot * slot_stride + h * head + r * row + c.
struct StateTensor {
  void* data = nullptr;
  gdn_dtype dtype = GDN_DTYPE_NONE;
  int64_t slot = 0;
  int64_t head = 0;
  int64_t row = 0;
};

// A per-value-head vector [Hv] (A_log, dt_bias).
struct HeadVector {
  const void* data = nullptr;
  gdn_dtype dtype = GDN_DTYPE_NONE;
  int64_t stride = 0;
};

struct Problem {
  // ---- sizes (SPEC letters)
  int64_t N = 0;        // sequences
  int64_t T = 0;        // dense: tokens per sequence; packed: T_total (per-sequence T from cu_seqlens)
  int64_t T_total = 0;  // tokens over the batch (dense: N * T)
  int64_t Hk = 0, Hv = 0, K = 0, V = 0;
  int64_t ratio = 0;    // Hv / Hk

  // ---- batch structure
  bool packed = false;               // cu_seqlens given
  const void* cu_seqlens = nullptr;  // [N + 1], cu_seqlens_dtype; lives on `device`
  gdn_dtype cu_seqlens_dtype = GDN_DTYPE_NONE;
  const int32_t* state_indices = nullptr;  // [N] or null (then states are dense [N, ...])
  int64_t state_indices_stride = 1;
  int64_t pool_slots = 0;                  // P when pooled, else N
  const int32_t* snapshot_indices = nullptr;  // [N, T] | [T_total] or null
  TokenTensor snapshot_index_strides;         // .seq / .tok strides of snapshot_indices (data unused)
  int64_t snapshot_pool_slots = 0;            // P2 when snapshots are pooled

  // ---- tensors
  TokenTensor q, k;        // [N, T, Hk, K]
  TokenTensor v, o;        // [N, T, Hv, V]
  TokenTensor g, beta, a;  // [N, T, Hv]  (g absent for gate raw; a present only for raw)
  HeadVector A_log, dt_bias;  // [Hv] (raw only)
  StateTensor initial_state;  // data null: zeros
  StateTensor final_state;    // data null: not written
  bool in_place = false;      // final_state.data == initial_state.data
  TokenTensor snapshots_dense;  // [N, T, Hv, R, C] when snapshots are dense
  StateTensor snapshots_pool;   // [P2, Hv, R, C] when snapshot_indices given
  bool has_snapshots = false;
  int64_t checkpoint_tokens = 0;  // > 0: snapshots only after tokens t with (t + 1) % it == 0
                                  // (t from the sequence's start; chunk_checkpoint_every x 64)

  // Whether the state after token t (from the sequence's start) goes to the snapshots.
  bool snapshot_after(int64_t t) const {
    return checkpoint_tokens == 0 || (t + 1) % checkpoint_tokens == 0;
  }

  // ---- options, resolved
  gdn_gate_mode gate = GDN_GATE_LOG_DECAY;
  gdn_beta_mode beta_mode = GDN_BETA_PROB;
  gdn_head_map head_map = GDN_HEAD_MAP_BLOCK;
  gdn_state_layout state_layout = GDN_STATE_VK;
  bool qk_l2norm = false;
  float scale = 0.f;            // resolved: never 0
  gdn_backend backend = GDN_BACKEND_CPU;  // resolved: never AUTO
  gdn_path path = GDN_PATH_AUTO;          // backends resolve AUTO themselves
  gdn_dtype input_dtype = GDN_DTYPE_NONE; // q, k, v

  // ---- execution
  gdn_device_type device_type = GDN_DEVICE_CPU;
  int32_t device_id = 0;
  void* stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  uint32_t* error_flags = nullptr;
  int32_t num_threads = 0;

  // key/query head feeding value head h
  int64_t key_head(int64_t h) const {
    return head_map == GDN_HEAD_MAP_BLOCK ? h / ratio : h % Hk;
  }
};

}  // namespace gdn

// The recurrent kernel for the vk state layout ([.., Hv, V, K], K contiguous).
//
// Grid: one CTA per (sequence n, value head h, slice of vk_rows_per_cta state rows v). A row
// is spread over L = K / W lanes, lane l holding its W columns [l W, l W + W) (one 16-byte
// chunk; W = 4 f32 / 8 bf16), so one warp access covers 32 / L whole rows. A thread owns RPT
// rows v0 + r G. Their chunks go to shared memory by cp.async at the start (in flight without
// holding registers: up to RPT x 2 KiB per CTA), stay there across the sequence's tokens (in
// f32 when a bf16 state is "wide", p.wide), and go back to the final state (and snapshots) by
// streaming stores. Per token and row, one pass:
//   a = S_v . k,  b = S_v . q                   (a shuffle sum over the row's L lanes)
//   delta_v = beta (v_v - alpha a)              (SPEC: decay first, delta from the decayed S)
//   o_v     = scale (alpha b + delta_v (k . q)) (= scale (S' q))
//   S_v'    = alpha S_v + delta_v k
// q and k are used raw in the sums; their L2 norms (when asked) scale the results.
#pragma once

#include "cuda/decode_common.cuh"
#include "cuda/decode_tile.h"

namespace gdn::cuda {

template <int K, class S, int RPT>
__global__ void __launch_bounds__(kDecodeThreads, decode_min_ctas_per_sm())
decode_vk_kernel(const __grid_constant__ DecodeParams p) {
  using Chunk = StateChunk<S>;
  constexpr int W = Chunk::W;                 // columns per lane (one 16-byte chunk per row)
  constexpr int L = K / W;                    // lanes per row
  constexpr int G = kDecodeThreads / L;       // row groups per CTA
  constexpr int RB = RPT < 16 / W ? RPT : 16 / W;  // rows per reduction batch (16 state registers)
  static_assert(K % W == 0 && L <= 32 && 32 % L == 0, "a row must tile whole lanes of one warp");
  static_assert(RPT % RB == 0, "whole batches");
  static_assert(RPT <= L, "lane r loads v at row r: one value per lane");
  static_assert(G * RPT == vk_rows_per_cta(K, int(sizeof(S)), RPT), "tile geometry");

  // S chunks of this thread's rows in 16-byte rows [row][thread] (decode_stage_bytes): as stored
  // at rows [land, land + RPT); wide (bf16, several tokens: land = RPT), in f32 between tokens at
  // rows 2r, 2r + 1 for chunk r. Chunks are read in increasing r and 2r + 1 < RPT + r + 1, so a
  // chunk's f32 rows only ever cover landed rows already read.
  extern __shared__ uint4 stage_rows[];
  constexpr int F = W / 4;                    // 16-byte rows of one chunk in f32
  const int land = p.wide ? RPT : 0;
  auto stage = [&](int row) -> uint4& { return stage_rows[row * kDecodeThreads + threadIdx.x]; };
  // chunk r in f32: as stored (landed, or written back unwidened), or from the f32 copy
  auto read_chunk = [&](int r, bool stored, float* x) {
    if (stored) {
      Chunk::to_f32(stage(land + r), x);
      return;
    }
#pragma unroll
    for (int i = 0; i < F; ++i) StateChunk<float>::to_f32(stage(F * r + i), x + 4 * i);
  };
  auto write_chunk = [&](int r, const float* x, const uint4& stored) {
    if (!p.wide) {
      stage(r) = stored;
      return;
    }
#pragma unroll
    for (int i = 0; i < F; ++i) stage(F * r + i) = StateChunk<float>::from_f32(x + 4 * i);
  };

  const int lane = threadIdx.x % L;
  const int grp = threadIdx.x / L;
  const int slice = int(blockIdx.x % unsigned(p.slices));  // grid: (n, h, slice), slice fastest
  const unsigned nh = blockIdx.x / unsigned(p.slices);
  const int h = int(nh % unsigned(p.Hv));
  const int64_t n = nh / unsigned(p.Hv);
  const int j = p.tiled ? h % p.Hk : h / p.ratio;  // key/query head feeding value head h

  Sequence seq;
  if (!resolve_sequence(p, n, seq)) return;  // invalid index contents: flag raised, nothing written

  // this thread's rows row(r) = v0 + r G, columns c0 + e
  const int v0 = slice * (G * RPT) + grp;
  const int c0 = lane * W;
  auto row = [&](int r) { return v0 + r * G; };

  if (seq.slot < 0) {  // padding: o zero; the state (snapshots too) neither read nor written
    if (lane == 0)
      for (int64_t t = 0; t < seq.len; ++t) {
        const int64_t o_tok = token_offset(p.o, n, seq.bos + t, h);
#pragma unroll 1
        for (int r = 0; r < RPT; ++r)
          if (row(r) < p.V) store_scalar(p.o, o_tok + row(r), 0.f);
      }
    return;
  }

  // S(n, h) rows -> shared memory, in flight while q, k, v and the gates load
  if (p.h0.p) {
    const S* h0 = state_at<S>(p.h0, seq.slot, h);
#pragma unroll 4
    for (int r = 0; r < RPT; ++r)
      if (row(r) < p.V) copy16_async(&stage(land + r), h0 + row(r) * p.h0.row + c0);
  } else {
#pragma unroll
    for (int r = 0; r < RPT; ++r) stage(land + r) = make_uint4(0, 0, 0, 0);  // zeros
  }
  S* ht = p.ht.p ? state_at<S>(p.ht, seq.slot, h) : nullptr;

  // token t's q, k (this lane's columns, raw), v at row(lane) and gates; the next token's
  // are loaded while this one's rows are computed
  float q[W], k[W], v;
  Gates gate;
  auto load_token = [&](int64_t tok, float* q_, float* k_, float& v_, Gates& g_) {
    load_run<W>(p.q, token_offset(p.q, n, tok, j) + c0, q_);
    load_run<W>(p.k, token_offset(p.k, n, tok, j) + c0, k_);
    v_ = lane < RPT && row(lane) < p.V ? load_scalar(p.v.p, p.v.dtype, token_offset(p.v, n, tok, h) + row(lane)) : 0.f;
    g_ = load_gates(p, n, tok, h);
  };
  if (seq.len > 0) load_token(seq.bos, q, k, v, gate);

#pragma unroll 1
  for (int64_t t = 0; t < seq.len; ++t) {
    const int64_t tok = seq.bos + t;
    const bool last = t + 1 == seq.len;
    float q_next[W], k_next[W], v_next;
    Gates gate_next{};
    if (!last) load_token(tok + 1, q_next, k_next, v_next, gate_next);

    // q.q, k.k, k.q over the row's lanes; q, k <- x rsqrt(x . x + 1e-6) scale the sums below
    float qk[3] = {};
#pragma unroll
    for (int c = 0; c < W; ++c) {
      qk[0] += q[c] * q[c];
      qk[1] += k[c] * k[c];
      qk[2] += k[c] * q[c];
    }
    sum_within_group<L>(qk);
    const float rq = p.l2norm ? rsqrtf(qk[0] + 1e-6f) : 1.f;
    const float rk = p.l2norm ? rsqrtf(qk[1] + 1e-6f) : 1.f;
    const float kq = rk * rq * qk[2];  // k . q
    if (t == 0) copy_async_wait_all();

    const int64_t o_tok = token_offset(p.o, n, tok, h);
    S* snap = nullptr;  // the state after this token, if kept
    int64_t snap_row = 0;
    if (p.snap_mode == kSnapDense) {
      snap = static_cast<S*>(p.snap_dense.p) + token_offset(p.snap_dense, n, tok, h);
      snap_row = p.snap_row;
    } else if (p.snap_mode == kSnapPool) {
      const int32_t slot = snapshot_slot(p, n, tok);
      if (slot >= 0) snap = state_at<S>(p.snap_pool, slot, h);
      snap_row = p.snap_pool.row;
    }

#pragma unroll 1  // one batch's registers at a time
    for (int b = 0; b < RPT; b += RB) {
      float s[RB][W];       // S rows row(b + r), this lane's columns
      float sum[2 * RB] = {};
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        read_chunk(b + r, t == 0 || !p.wide, s[r]);
#pragma unroll
        for (int c = 0; c < W; ++c) {
          sum[r] += s[r][c] * k[c];       // a = S_v . k
          sum[RB + r] += s[r][c] * q[c];  // b = S_v . q
        }
      }
      sum_within_group<L>(sum);
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        const int rr = b + r;
        const float vv = __shfl_sync(0xffffffffu, v, rr, L);  // v[t, h] at row(rr), from lane rr
        const float a = rk * sum[r];                          // S_v . k
        const float bq = rq * sum[RB + r];                    // S_v . q
        const float delta = gate.beta * (vv - gate.alpha * a);       // beta (v - (alpha S k)_v)
        const float out = p.scale * (gate.alpha * bq + delta * kq);  // scale (S' q)_v
        const float dk = delta * rk;
#pragma unroll
        for (int c = 0; c < W; ++c) s[r][c] = gate.alpha * s[r][c] + dk * k[c];  // S' = alpha S + delta k^T
        if (row(rr) >= p.V) continue;
        if (lane == 0) store_scalar(p.o, o_tok + row(rr), out);
        const uint4 chunk = Chunk::from_f32(s[r]);
        if (snap) store_chunk(snap + row(rr) * snap_row + c0, chunk);
        if (!last)
          write_chunk(rr, s[r], chunk);
        else if (ht)  // the final state (may be the initial state's memory: each chunk is ours alone)
          store_chunk(ht + row(rr) * p.ht.row + c0, chunk);
      }
    }

    if (!last) {
#pragma unroll
      for (int c = 0; c < W; ++c) q[c] = q_next[c], k[c] = k_next[c];
      v = v_next;
      gate = gate_next;
    }
  }

  if (seq.len == 0) {  // no tokens: the final state is the initial one
    copy_async_wait_all();  // (no copy may be left in flight at exit)
    if (!ht) return;
#pragma unroll 1
    for (int r = 0; r < RPT; ++r)
      if (row(r) < p.V) store_chunk(ht + row(r) * p.ht.row + c0, stage(land + r));
  }
}

}  // namespace gdn::cuda

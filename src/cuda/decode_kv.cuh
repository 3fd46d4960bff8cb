// The recurrent kernel for the kv state layout ([.., Hv, K, V], V contiguous).
//
// Grid: one CTA per (sequence n, value head h, slice of BV = kv_cols_per_cta columns v).
// A thread owns CW = 16 / sizeof(state) adjacent columns (one 16-byte chunk per row) of RPT
// adjacent rows k; the CTA's RG = K / RPT row groups are spread over LC = 128 / RG column
// lanes, so a warp access reads LC x 16 contiguous bytes of each of 32 / LC rows. The chunks go
// to shared memory by cp.async at the start and stay there across the sequence's tokens (in f32
// when a bf16 state is "wide", p.wide). The
// sums over k are per-thread sums over its rows, then shuffles over the warp's row groups, then
// shared memory over the warps. Per token and column:
//   a = (S^T k)_v,  b = (S^T q)_v               (S is K x V here)
//   delta_v = beta (v_v - alpha a)
//   o_v     = scale (alpha b + delta_v (k . q))
//   S[:, v] = alpha S[:, v] + delta_v k
// q and k are used raw in the sums; their L2 norms (when asked) scale the results.
// Two barriers per token: q, k staged in shared memory; the warps' partial sums exchanged.
#pragma once

#include "cuda/decode_common.cuh"
#include "cuda/decode_tile.h"

namespace gdn::cuda {

template <int K, class S, int RPT>
__global__ void __launch_bounds__(kDecodeThreads, decode_min_ctas_per_sm())
decode_kv_kernel(const __grid_constant__ DecodeParams p) {
  using Chunk = StateChunk<S>;
  constexpr int CW = Chunk::W;                // columns per thread (one 16-byte chunk per row)
  constexpr int RG = K / RPT;                 // row groups
  constexpr int LC = kDecodeThreads / RG;     // lanes across columns
  constexpr int BV = LC * CW;                 // columns per CTA
  constexpr int NW = kDecodeThreads / 32;     // warps
  constexpr int NR = 3 + 2 * CW;              // values summed per token: q.q, k.k, k.q, a[CW], b[CW]
  constexpr int NR4 = (NR + 3) / 4;           // ... in float4s
  static_assert(RG * RPT == K && RG * LC == kDecodeThreads && LC <= 32 && 32 % LC == 0,
                "K / RPT row groups must tile the CTA, each warp holding whole row groups");
  static_assert(RPT % 4 == 0 && K <= kDecodeThreads, "q, k staged one element per thread, read as float4");
  static_assert(BV == kv_cols_per_cta(K, int(sizeof(S)), RPT), "tile geometry");

  __shared__ float4 qk_raw[2][2][K / 4];        // [token parity][q, k][K]
  __shared__ float4 partial[2][NW][LC][NR4];    // [token parity][warp][column lane]: warp sums
  // S chunks of this thread's rows in 16-byte rows [row][thread] (decode_stage_bytes), as in
  // decode_vk.cuh: as stored at rows [land, land + RPT); wide, in f32 at rows 2r, 2r + 1.
  extern __shared__ uint4 stage_rows[];
  constexpr int F = CW / 4;                   // 16-byte rows of one chunk in f32
  const int land = p.wide ? RPT : 0;
  auto stage = [&](int row) -> uint4& { return stage_rows[row * kDecodeThreads + threadIdx.x]; };
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

  const int lc = threadIdx.x % LC;
  const int rg = threadIdx.x / LC;
  const int warp = threadIdx.x / 32;
  const int slice = int(blockIdx.x % unsigned(p.slices));  // grid: (n, h, slice), slice fastest
  const unsigned nh = blockIdx.x / unsigned(p.slices);
  const int h = int(nh % unsigned(p.Hv));
  const int64_t n = nh / unsigned(p.Hv);
  const int j = p.tiled ? h % p.Hk : h / p.ratio;  // key/query head feeding value head h

  Sequence seq;
  if (!resolve_sequence(p, n, seq)) return;  // invalid index contents: flag raised, nothing written

  // this thread's rows k0 + r, columns c0 + e
  const int k0 = rg * RPT;
  const int c0 = slice * BV + lc * CW;
  const bool cols_ok = c0 < p.V;

  if (seq.slot < 0) {  // padding: o zero; the state (snapshots too) neither read nor written
    const float zero[CW] = {};
    if (rg == 0 && cols_ok)
      for (int64_t t = 0; t < seq.len; ++t) store_run<CW>(p.o, token_offset(p.o, n, seq.bos + t, h) + c0, zero);
    return;
  }

  // S(n, h) rows -> shared memory, in flight while the first token's inputs load
  if (p.h0.p && cols_ok) {
    const S* h0 = state_at<S>(p.h0, seq.slot, h);
#pragma unroll 4
    for (int r = 0; r < RPT; ++r) copy16_async(&stage(land + r), h0 + (k0 + r) * p.h0.row + c0);
  } else {
#pragma unroll
    for (int r = 0; r < RPT; ++r) stage(land + r) = make_uint4(0, 0, 0, 0);  // zeros
  }
  S* ht = p.ht.p && cols_ok ? state_at<S>(p.ht, seq.slot, h) : nullptr;

#pragma unroll 1
  for (int64_t t = 0; t < seq.len; ++t) {
    const int64_t tok = seq.bos + t;
    const bool last = t + 1 == seq.len;
    const int buf = int(t & 1);  // rewritten at t + 2, after every thread passed t + 1's barriers

    // q, k of the token -> shared memory (element threadIdx.x), v at this thread's columns
    float* qk_flat = reinterpret_cast<float*>(qk_raw[buf]);
    if (threadIdx.x < K) {
      qk_flat[threadIdx.x] = load_scalar(p.q.p, p.q.dtype, token_offset(p.q, n, tok, j) + threadIdx.x);
      qk_flat[K + threadIdx.x] = load_scalar(p.k.p, p.k.dtype, token_offset(p.k, n, tok, j) + threadIdx.x);
    }
    float v[CW];  // v[t, h] at this thread's columns
    if (cols_ok)
      load_run<CW>(p.v, token_offset(p.v, n, tok, h) + c0, v);
    else
#pragma unroll
      for (int e = 0; e < CW; ++e) v[e] = 0.f;
    const Gates gate = load_gates(p, n, tok, h);
    if (t == 0) copy_async_wait_all();
    __syncthreads();

    // partial sums over this thread's rows, then over the warp's row groups
    const float* q = reinterpret_cast<const float*>(qk_raw[buf][0]) + k0;  // q, k at this thread's rows, raw
    const float* k = reinterpret_cast<const float*>(qk_raw[buf][1]) + k0;
    float sum[4 * NR4] = {};
#pragma unroll 4
    for (int r = 0; r < RPT; ++r) {
      float s[CW];
      read_chunk(r, t == 0 || !p.wide, s);
      const float qr = q[r], kr = k[r];
      sum[0] += qr * qr;  // q . q
      sum[1] += kr * kr;  // k . k
      sum[2] += kr * qr;  // k . q
#pragma unroll
      for (int e = 0; e < CW; ++e) {
        sum[3 + e] += s[e] * kr;       // a = (S^T k)_v
        sum[3 + CW + e] += s[e] * qr;  // b = (S^T q)_v
      }
    }
    sum_across_lanes<LC>(sum);
    // ... then over the warps
    if (threadIdx.x % 32 < LC)
#pragma unroll
      for (int i = 0; i < NR4; ++i)
        partial[buf][warp][lc][i] = make_float4(sum[4 * i], sum[4 * i + 1], sum[4 * i + 2], sum[4 * i + 3]);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 4 * NR4; ++i) sum[i] = 0.f;
#pragma unroll
    for (int w = 0; w < NW; ++w)
#pragma unroll
      for (int i = 0; i < NR4; ++i) {
        const float4 f = partial[buf][w][lc][i];
        sum[4 * i] += f.x; sum[4 * i + 1] += f.y; sum[4 * i + 2] += f.z; sum[4 * i + 3] += f.w;
      }

    // q, k <- x rsqrt(x . x + 1e-6): applied to the sums, and to k in the update below
    const float rq = p.l2norm ? rsqrtf(sum[0] + 1e-6f) : 1.f;
    const float rk = p.l2norm ? rsqrtf(sum[1] + 1e-6f) : 1.f;
    const float kq = rk * rq * sum[2];
    float delta[CW], out[CW];
#pragma unroll
    for (int e = 0; e < CW; ++e) {
      const float a = rk * sum[3 + e];                      // (S^T k)_v
      const float b = rq * sum[3 + CW + e];                 // (S^T q)_v
      delta[e] = gate.beta * (v[e] - gate.alpha * a);       // beta (v - (alpha S^T k)_v)
      out[e] = p.scale * (gate.alpha * b + delta[e] * kq);  // scale (S'^T q)_v
    }
    if (rg == 0 && cols_ok) store_run<CW>(p.o, token_offset(p.o, n, tok, h) + c0, out);

    S* snap = nullptr;  // the state after this token, if kept
    int64_t snap_row = 0;
    if (cols_ok && p.snap_mode == kSnapDense) {
      snap = static_cast<S*>(p.snap_dense.p) + token_offset(p.snap_dense, n, tok, h);
      snap_row = p.snap_row;
    } else if (cols_ok && p.snap_mode == kSnapPool) {
      const int32_t slot = snapshot_slot(p, n, tok);
      if (slot >= 0) snap = state_at<S>(p.snap_pool, slot, h);
      snap_row = p.snap_pool.row;
    }
#pragma unroll 4
    for (int r = 0; r < RPT; ++r) {
      float s[CW];
      read_chunk(r, t == 0 || !p.wide, s);
      const float kr = rk * k[r];
#pragma unroll
      for (int e = 0; e < CW; ++e) s[e] = gate.alpha * s[e] + kr * delta[e];  // S' = alpha S + k delta^T
      const uint4 chunk = Chunk::from_f32(s);
      if (snap) store_chunk(snap + (k0 + r) * snap_row + c0, chunk);
      if (!last)
        write_chunk(r, s, chunk);
      else if (ht)  // the final state (may be the initial state's memory: each chunk is ours alone)
        store_chunk(ht + (k0 + r) * p.ht.row + c0, chunk);
    }
  }

  if (seq.len == 0) {  // no tokens: the final state is the initial one
    copy_async_wait_all();  // (no copy may be left in flight at exit)
    if (!ht) return;
#pragma unroll 1
    for (int r = 0; r < RPT; ++r) store_chunk(ht + (k0 + r) * p.ht.row + c0, stage(land + r));
  }
}

}  // namespace gdn::cuda

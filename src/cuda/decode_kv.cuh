// The recurrent kernel for the kv state layout ([.., Hv, K, V], V contiguous).
//
// Grid: one CTA per (sequence n, value head h, slice of BV = kKvCols columns v) (decode_tile.h).
// A thread holds W adjacent columns (one 16-byte chunk) of R rows k; a warp is LC column lanes
// x RG row groups and the 4 warps split K: row(i) = warp RG R + rg + i RG, so each of a warp's
// R loads reads RG rows of LC x 16 contiguous bytes. The chunks are loaded once into registers
// (all in flight before any is used), carried through the sequence's tokens (HeldState: in
// f32, or, One (dense, T <= 1), a bf16 state as stored) and stored once. The sums over k are per-thread sums over its rows, then shuffles over the warp's row
// groups, then shared memory over the warps. Per token and column:
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

template <int K, class S, bool One>
__global__ void __launch_bounds__(decode_threads(true), decode_min_ctas_per_sm(true, One, int(sizeof(S))))
decode_kv_kernel(const __grid_constant__ DecodeParams p) {
  using Chunk = StateChunk<S>;
  using Tile = DecodeTile<true, K, int(sizeof(S)), One>;
  constexpr int W = Tile::W, R = Tile::R, RG = Tile::RG, LC = Tile::LC, BV = Tile::kKvCols;
  constexpr int NW = Tile::kWarps;
  constexpr int NR = 3 + 2 * W;               // values summed per token: q.q, k.k, k.q, a[W], b[W]
  constexpr int NR4 = (NR + 3) / 4;           // ... in float4s
  static_assert(Tile::compiles && W == Chunk::W, "kv tile");
  static_assert(K <= Tile::kThreads, "q, k staged one element per thread");

  __shared__ float qk_raw[2][2][K];             // [token parity][q, k][K]
  __shared__ float4 partial[2][NW][LC][NR4];    // [token parity][warp][column lane]: warp sums

  const int lc = threadIdx.x % LC;
  const int rg = (threadIdx.x % 32) / LC;
  const int warp = threadIdx.x / 32;
  const CtaWork cta = cta_work(p);
  const int64_t n = cta.n;
  const int h = cta.h, j = cta.j, slice = cta.slice;

  // this thread's rows row(i), columns c0 + e
  const int first = warp * (RG * R) + rg;
  auto row = [&](int i) { return first + i * RG; };
  const int c0 = slice * BV + lc * W;
  // formed before the wait, as everything above (decode_vk.cuh): without state_indices, slot n
  const S* h0 = p.h0.p && !p.state_indices ? state_at<S>(p.h0, n, h) + c0 : nullptr;
  wait_for_previous_kernel();  // before any read (launch_tile's early_launch)

  Sequence seq;
  if (!resolve_sequence(p, n, seq)) return;  // invalid index contents: flag raised, nothing written

  if (seq.slot < 0) {  // padding: o zero; the state (snapshots too) neither read nor written
    const float zero[W] = {};
    if (warp == 0 && rg == 0)
      for (int64_t t = 0; t < seq.len; ++t) store_run<W>(p.o, token_offset(p.o, n, seq.bos + t, h) + c0, zero);
    return;
  }

  // S(n, h) rows -> registers: all R loads issued before any is used
  HeldState<S, R, Tile::kRaw> s;
  constexpr bool stream = true;  // the state's cache hints (load_chunk): kv always streams
  if (p.h0.p && p.state_indices) h0 = state_at<S>(p.h0, seq.slot, h) + c0;
  load_initial_state(s, h0, p.h0.row, row, stream);

#pragma unroll 1
  for (int64_t t = 0; t < seq.len; ++t) {
    const int64_t tok = seq.bos + t;
    const int buf = int(t & 1);  // rewritten at t + 2, after every thread passed t + 1's barriers

    // q, k of the token -> shared memory (element threadIdx.x)
    if (threadIdx.x < K) {
      const uint32_t q_bits = load_bits(p.q.p, p.q.dtype, token_offset(p.q, n, tok, j) + threadIdx.x);
      const uint32_t k_bits = load_bits(p.k.p, p.k.dtype, token_offset(p.k, n, tok, j) + threadIdx.x);
      qk_raw[buf][0][threadIdx.x] = bits_to_f32(q_bits, p.q.dtype);
      qk_raw[buf][1][threadIdx.x] = bits_to_f32(k_bits, p.k.dtype);
    }
    __syncthreads();

    // partial sums over this thread's rows, then over the warp's row groups
    const float* q = qk_raw[buf][0];  // q, k, raw (read at this thread's rows where used)
    const float* k = qk_raw[buf][1];
    float sum[4 * NR4] = {};
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float qi = q[row(i)], ki = k[row(i)];
      sum[0] += qi * qi;  // q . q
      sum[1] += ki * ki;  // k . k
      sum[2] += ki * qi;  // k . q
      float x[W];
      s.get(i, x);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        sum[3 + e] += x[e] * ki;      // a = (S^T k)_v
        sum[3 + W + e] += x[e] * qi;  // b = (S^T q)_v
      }
    }
    sum_across_lanes<LC>(sum);
    // ... then over the warps
    if (rg == 0)
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
    RunBits<W> v_bits;  // v[t, h] at this thread's columns
    GateBits gate_bits;
    v_bits.load(p.v, token_offset(p.v, n, tok, h) + c0);
    gate_bits.load(p, n, tok, h);
    float v[W];
    v_bits.to_f32(p.v.dtype, v);
    const Gates gate = gate_bits.gates(p);
    float delta[W], out[W];
#pragma unroll
    for (int e = 0; e < W; ++e) {
      const float a = rk * sum[3 + e];                      // (S^T k)_v
      const float b = rq * sum[3 + W + e];                  // (S^T q)_v
      delta[e] = gate.beta * (v[e] - gate.alpha * a);       // beta (v - (alpha S^T k)_v)
      out[e] = p.scale * (gate.alpha * b + delta[e] * kq);  // scale (S'^T q)_v
    }
    if (warp == 0 && rg == 0) store_run<W>(p.o, token_offset(p.o, n, tok, h) + c0, out);

#pragma unroll
    for (int i = 0; i < R; ++i) {
      const float kr = rk * k[row(i)];
      float x[W];
      s.get(i, x);
#pragma unroll
      for (int e = 0; e < W; ++e) x[e] = gate.alpha * x[e] + kr * delta[e];  // S' = alpha S + k delta^T
      s.set(i, x);
    }

    int64_t snap_row;
    if (S* snap = snapshot_at<S>(p, n, tok, t, h, snap_row)) store_held(s, snap + c0, snap_row, row, stream);
  }

  // the final state (may be the initial state's memory: each chunk is this thread's alone);
  // no tokens: the initial one
  if (p.ht.p) store_held(s, state_at<S>(p.ht, seq.slot, h) + c0, p.ht.row, row, stream);
}

}  // namespace gdn::cuda

// The recurrent kernel for the vk state layout ([.., Hv, V, K], K contiguous).
//
// Grid: one CTA per (sequence n, value head h, slice of kVkRows state rows v) (decode_tile.h).
// A row is spread over L = K / W lanes, lane c of the row group holding columns [c W, c W + W)
// (one 16-byte chunk); a warp holds G row groups; a thread holds R rows of its group,
// row(r) = first + grp + r G, so each of a warp's R loads reads G whole consecutive rows.
// The rows are loaded once into registers (all in flight before any is used), carried through
// the sequence's tokens (HeldState: in f32, or a bf16 state of one token as stored) and stored
// once. One: every sequence has at most one token (a dense batch, T <= 1: decode), so there is
// no token loop and no loop-carried bookkeeping. Per token:
//   a_v = S_v . k,  b_v = S_v . q               (2R sums over the L lanes: transposed shuffles;
//                                                afterwards lane slot i < R holds a of row i,
//                                                R + i holds b of row i)
//   delta_v = beta (v_v - alpha a_v)            (SPEC: decay first, delta from the decayed S)
//   o_v     = scale (alpha b_v + delta_v (k . q))  (= scale (S' q))
//   S_v'    = alpha S_v + delta_v k
// q and k are used raw in the sums; their L2 norms (when asked) scale the results.
#pragma once

#include <type_traits>

#include "cuda/decode_common.cuh"
#include "cuda/decode_tile.h"

namespace gdn::cuda {

// Stream: the state's loads and stores with streaming cache hints (else plain: decode_tile.h's
// decode_streams_state says which calls take the plain instance).
// FirstEarly: a dense batch's first-token input addresses are formed before the wait as well
// (the instance for large grids: decode_tile.h's decode_first_inputs_early).
template <int K, class S, bool One, class In = AnyInputs, bool Stream = true, bool FirstEarly = false>
__global__ void __launch_bounds__(decode_threads(false), decode_min_ctas_per_sm(false, One, int(sizeof(S)),
                                                                             !std::is_same_v<In, AnyInputs>))
decode_vk_kernel(const __grid_constant__ DecodeParams p) {
  using Chunk = StateChunk<S>;
  using Tile = DecodeTile<false, K, int(sizeof(S)), One>;
  constexpr int W = Tile::W, R = Tile::R, L = Tile::L, G = Tile::G;
  constexpr int C = 2 * R;                      // sums per token: a and b of each row
  constexpr int SH = ilog2(L) - ilog2(C);       // lane position c holds sum c >> SH
  static_assert(Tile::compiles, "vk tile");
  static_assert(W == Chunk::W, "one chunk per lane and row");

  const int lane = threadIdx.x % 32;
  const int c = lane % L;                       // position in the row group
  const int grp = lane / L;
  const int base = lane - c;                    // first lane of the row group
  const CtaWork cta = cta_work(p);
  const int64_t n = cta.n;
  const int h = cta.h, j = cta.j, slice = cta.slice;

  const int first = slice * Tile::kVkRows + (threadIdx.x / 32) * (G * R) + grp;
  auto row = [&](int r) { return first + r * G; };
  const int c0 = c * W;                         // this lane's first column
  const int mine = c >> SH;                     // the sum this lane holds after the reduction
  const int my_row = row(mine % R);

  // a token's inputs as raw bits: every load in flight before the first is used
  struct TokenIn {
    RunBits<W> q, k;  // this lane's columns
    uint32_t v;       // at my_row
    GateBits gate;
  } in;
  auto issue = [&](int64_t tok) {
    in.q.load(p.q, In::q(p), token_offset(p.q, n, tok, j) + c0);
    in.k.load(p.k, In::k(p), token_offset(p.k, n, tok, j) + c0);
    in.v = load_bits(p.v.p, In::v(p), token_offset(p.v, n, tok, h) + my_row);
    in.gate.template load<In>(p, n, tok, h);
  };
  // dense: the first token's inputs do not depend on index contents
  const bool early = !p.cu_seqlens && p.T > 0;

  // Before the wait (an early launch: wait_for_previous_kernel) everything that does not read
  // memory: the CTA's work, its rows and, without state_indices (slot n), its state's address,
  // so that the loads go out as soon as the wait returns.
  const S* h0 = p.h0.p && !p.state_indices ? state_at<S>(p.h0, n, h) + c0 : nullptr;
  struct FirstAt {  // FirstEarly: token 0's inputs' byte addresses (used when early)
    const char *q, *k, *v, *g, *beta;
  } at0{};
  if constexpr (FirstEarly) {
    const TokenView& gv = In::gate_input(p);
    at0 = FirstAt{element_at(p.q.p, In::q(p), token_offset(p.q, n, 0, j) + c0),
                  element_at(p.k.p, In::k(p), token_offset(p.k, n, 0, j) + c0),
                  element_at(p.v.p, In::v(p), token_offset(p.v, n, 0, h) + my_row),
                  element_at(gv.p, In::gate_input_dtype(p), token_offset(gv, n, 0, h)),
                  element_at(p.beta.p, In::beta(p), token_offset(p.beta, n, 0, h))};
  }
  wait_for_previous_kernel();  // before any read (launch_tile's early_launch)

  // S(n, h) rows -> registers, all R loads issued before any is used. The slot depends on
  // state_indices[n] alone, so these loads (the bulk of the bytes) go out first, before the
  // inputs' and before the cu_seqlens and snapshot checks; nothing is written unless they pass.
  HeldState<S, R, Tile::kRaw> s;
  constexpr bool stream = Stream;  // the state's cache hints (load_chunk)
  if (p.h0.p && p.state_indices) {
    int64_t slot;
    if (state_slot(p, n, slot) && slot >= 0) h0 = state_at<S>(p.h0, slot, h) + c0;
  }
  load_initial_state(s, h0, p.h0.row, row, stream);
  // dense: the first token's inputs' loads go out next
  if (early) {
    if constexpr (FirstEarly) {
      in.q.load_at(at0.q, In::q(p));
      in.k.load_at(at0.k, In::k(p));
      in.v = load_bits_at(at0.v, In::v(p));
      in.gate.template load_at<In>(p, h, at0.g, at0.beta);
    } else {
      issue(0);
    }
  }

  Sequence seq;
  // invalid index contents: flag raised, nothing written (One: launched for dense batches only)
  if (!resolve_sequence<!One, In::kSnapshots>(p, n, seq)) return;

  if (seq.slot < 0) {  // padding: o zero; the state (snapshots too) neither read nor written
    if (mine >= R && (c & ((1 << SH) - 1)) == 0)
      for (int64_t t = 0; t < seq.len; ++t)
        store_scalar(p.o, In::o(p), token_offset(p.o, n, seq.bos + t, h) + my_row, 0.f);
    return;
  }

  auto step = [&](int64_t t) {
    const int64_t tok = seq.bos + t;
    if (t > 0 || !early) issue(tok);
    float q[W], k[W];
    in.q.to_f32(In::q(p), q);
    in.k.to_f32(In::k(p), k);
    const float v = bits_to_f32(in.v, In::v(p));
    const Gates gate = in.gate.template gates<In>(p);

    // q.q, k.k, k.q over the row's lanes; q, k <- x rsqrt(x . x + 1e-6) scale the sums below
    float qk[3] = {};
#pragma unroll
    for (int e = 0; e < W; ++e) {
      qk[0] += q[e] * q[e];
      qk[1] += k[e] * k[e];
      qk[2] += k[e] * q[e];
    }
    sum_within_group<L>(qk);
    const float rq = In::l2norm(p) ? rsqrtf(qk[0] + 1e-6f) : 1.f;
    const float rk = In::l2norm(p) ? rsqrtf(qk[1] + 1e-6f) : 1.f;
    const float kq = rk * rq * qk[2];  // k . q

    float sum[C];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float x[W], a = 0.f, b = 0.f;
      s.get(r, x);
#pragma unroll
      for (int e = 0; e < W; ++e) {
        a += x[e] * k[e];
        b += x[e] * q[e];
      }
      sum[r] = a;      // S_v . k (raw k)
      sum[R + r] = b;  // S_v . q (raw q)
    }
    const float total = sum_within_group_transposed<C, L>(sum);
    // a-lanes (mine < R): delta of row mine; b-lanes take it from the a-lane of their row.
    // The roundings are spelled out (__fmaf_rn, __fmul_rn) so that every form of the kernel,
    // whatever the compiler folds of its compile-time inputs, contracts the same way: the
    // forms give the same bits (DecodeForms tests).
    const float delta_a = gate.beta * __fmaf_rn(-(gate.alpha * rk), total, v);
    const float delta = __shfl_sync(0xffffffffu, delta_a, base + ((mine % R) << SH));
    if (mine >= R && (c & ((1 << SH) - 1)) == 0)  // scale (S' q)_v
      store_scalar(p.o, In::o(p), token_offset(p.o, n, tok, h) + my_row,
                   p.scale * __fmaf_rn(gate.alpha * rq, total, __fmul_rn(delta, kq)));

    // S' = alpha S + delta k^T (k normalised)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float dk = rk * __shfl_sync(0xffffffffu, delta, base + (r << SH));
      float x[W];
      s.get(r, x);
#pragma unroll
      for (int e = 0; e < W; ++e) x[e] = __fmaf_rn(dk, k[e], __fmul_rn(gate.alpha, x[e]));
      s.set(r, x);
    }

    if constexpr (In::kSnapshots) {
      int64_t snap_row;
      if (S* snap = snapshot_at<S, In::kCheckpoints>(p, n, tok, t, h, snap_row)) store_held(s, snap + c0, snap_row, row, stream);
    }
  };
  if constexpr (One) {
    if (seq.len > 0) step(0);
  } else {
#pragma unroll 1
    for (int64_t t = 0; t < seq.len; ++t) step(t);
  }

  // the final state (may be the initial state's memory: each chunk is this thread's alone);
  // no tokens: the initial one
  if (p.ht.p) store_held(s, state_at<S>(p.ht, seq.slot, h) + c0, p.ht.row, row, stream);
}

}  // namespace gdn::cuda

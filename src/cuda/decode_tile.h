// Tile geometry of the decode kernels (decode_vk.cuh, decode_kv.cuh). Host and device.
//
// Register-resident design (v3): each thread holds kStateFloats f32 values of the state of one
// (sequence, value head), R 16-byte chunks of W = 16 / sizeof(state) elements (f32: R = 8,
// W = 4; bf16: R = 4, W = 8), loaded once with streaming loads (all R in flight before any is
// used), carried through the sequence's tokens in f32 and stored once (rounded once, for a
// bf16 state). A bf16 state through at most one token (dense T = 1) is held raw instead: R = 8,
// 4 registers a chunk. A CTA is decode_warps() warps of one (sequence, value head) and covers a
// slice of V; the grid is N x Hv x slices. Nothing is staged in shared memory: the bytes a
// multiprocessor keeps in flight are its resident threads x R x 16 bytes.
//   vk  ([V, K], K contiguous): a row (value index v) is spread over L = K / W lanes, a warp
//       holds G = 32 / L row groups, a thread R rows of its group; sums over k are sums over
//       the L lanes of a row group (a transposed shuffle reduction). CTA: one warp, G R rows.
//   kv  ([K, V], V contiguous): a thread holds W adjacent columns of R rows k; the warp's
//       LC = V-columns lanes x RG row groups, the 4 warps split K, so sums over k are per-thread
//       sums, shuffles over the warp's row groups, then shared memory over the 4 warps.
//       CTA: BV = LC W columns of V, all K rows.
// Measured before it was written (bench/decode_lab.cu, H200, f32 vk, B = 64..1024): this
// design at 4 to 16 rows per warp moved 3.86 to 3.90 TB/s against 2.6 to 2.8 for the
// shared-memory staged v2 at its built tile.
#pragma once

#include <cstdint>

namespace gdn::cuda {

// Warps per CTA: kv, 4 (they split K and exchange partial sums); vk, 1 (its warps never
// cooperate, and a one-warp CTA frees its slot as soon as it is done).
constexpr int decode_warps(bool kv) { return kv ? 4 : 1; }
constexpr int decode_threads(bool kv) { return 32 * decode_warps(kv); }
constexpr int kStateFloats = 32;  // state values a thread holds, in f32

constexpr int ilog2(int x) { return x <= 1 ? 0 : 1 + ilog2(x / 2); }

// One: every sequence has at most one token (dense, T <= 1); a bf16 state is then held as
// stored (HeldState, decode_common.cuh): 4 registers a chunk, not 8.
template <bool KV, int K, int StateBytes, bool One = false>
struct DecodeTile {
  static constexpr int W = 16 / StateBytes;      // elements per 16-byte chunk
  static constexpr bool kRaw = One && StateBytes == 2;    // held as stored
  static constexpr int R = kStateFloats / (kRaw ? 4 : W);  // chunks (rows) per thread
  // vk
  static constexpr int L = K / W;                // lanes per row
  static constexpr int G = 32 / L;               // row groups per warp
  static constexpr int kWarps = decode_warps(KV);
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kVkRows = kWarps * G * R;        // rows of V per CTA
  // kv
  static constexpr int RG = K / (kWarps * R);          // row groups per warp
  static constexpr int LC = 32 / (RG > 0 ? RG : 1);     // column lanes
  static constexpr int kKvCols = LC * W;                // columns of V per CTA

  static constexpr int per_cta = KV ? kKvCols : kVkRows;  // slice of V per CTA
  static constexpr bool compiles =
      (K == 64 || K == 128) &&
      (KV ? (RG >= 1 && RG * kWarps * R == K && RG <= 32 && 32 % RG == 0)
          : (L <= 32 && 32 % L == 0 && 2 * R <= L));  // vk: the 2R row sums fit one row's lanes
};

template <bool KV, int K, int StateBytes, bool One>
constexpr int per_cta_if_built() {
  using T = DecodeTile<KV, K, StateBytes, One>;
  return T::compiles ? T::per_cta : 0;
}

template <int K, int StateBytes, bool One>
constexpr int per_cta_of(bool kv) {
  return kv ? per_cta_if_built<true, K, StateBytes, One>() : per_cta_if_built<false, K, StateBytes, One>();
}

template <int K>
constexpr int per_cta_of_k(bool kv, int state_bytes, bool one) {
  if (state_bytes == 4) return one ? per_cta_of<K, 4, true>(kv) : per_cta_of<K, 4, false>(kv);
  return one ? per_cta_of<K, 2, true>(kv) : per_cta_of<K, 2, false>(kv);
}

// Columns (kv) or rows (vk) of V one CTA covers; 0 when no kernel is built for K.
constexpr int decode_per_cta(bool kv, int K, int state_bytes, bool one = false) {
  if (K == 64) return per_cta_of_k<64>(kv, state_bytes, one);
  if (K == 128) return per_cta_of_k<128>(kv, state_bytes, one);
  return 0;
}

// Whether a kernel covers (K, V): built for K, V a whole number of CTA slices.
constexpr bool decode_tile_valid(bool kv, int K, int V, int state_bytes, bool one = false) {
  const int per_cta = decode_per_cta(kv, K, state_bytes, one);
  return per_cta > 0 && V >= per_cta && V % per_cta == 0;
}

// CTAs per multiprocessor the register budget must allow (__launch_bounds__' second argument):
// kv 6 CTAs of 128 threads, vk 24 of 32: at most 80 registers a thread, so a multiprocessor
// holds 96 KiB of f32 state in flight, what the lab's fastest variants kept (96 to 144 KiB all
// measured alike); 16 or 20 CTAs were no faster than 24 (NOTES.md, v4). The one-token f32 vk
// kernels of the plain and serving forms (fixed_inputs) fit 64 registers without spills and run
// 32 CTAs (128 KiB in flight): measured (H200, the same run, two repeats, against 24) B = 16
// 18.75 -> 18.25 us, B = 64 -0.3%, B = 256 -0.3%, B = 1024 -0.1%, serving -0.6%, B = 1 2.9 ->
// 3.0 us. The generic one-token kernel keeps 24: at 64 registers it spilled and measured 2%
// slower at B = 256 and 12% at B = 1. (An earlier trial, before the plain cache hints of large
// calls, had 32 CTAs 1.5 to 2% slower at B >= 256.) A raw bf16 state (one token), 4 x 128 or
// 16 x 32 threads: 128 registers (at 80 or 96 its wider unconverted chunks spilled 60 to 316
// bytes), 64 KiB in flight. ptxas -v, nvcc 13.0.
constexpr int decode_min_ctas_per_sm(bool kv, bool one, int state_bytes, bool fixed_inputs = false) {
  const bool raw = one && state_bytes == 2;
  if (kv) return raw ? 4 : 6;
  if (raw) return 16;
  return one && state_bytes == 4 && fixed_inputs ? 32 : 24;
}

// Cache hints of the state's loads and stores, by the bytes of state the call reads (N Hv V K x
// the state element's size): streaming (ld/st.global.cs) below kPlainHintStateBytes, plain
// 16-byte loads and stores from there. For the plain and serving one-token forms at K = 128 with
// an f32 state (their second instance, decode_launch.cuh); every other kernel streams.
// Measured (H200, f32 vk, bf16 inputs, in graphs, 32 heads: 2 MiB of state a sequence; the
// same run, two repeats): streaming only / plain only, B = 1 2.9 / 3.1 us, B = 16 18.8 / 18.8,
// B = 64 66.8 / 67.1, B = 256 261.0 / 259.9, B = 1024 1050.8 / 1030.7, serving (B = 256) 269.2 /
// 266.6. (Earlier plain trials were slower at every size but 1024: their stores, written
// `*at = chunk`, compiled to four 4-byte stores a chunk.) The switch sits between 128 and 512 MiB.
inline constexpr int64_t kPlainHintStateBytes = int64_t(256) << 20;
constexpr bool decode_streams_state(int64_t state_bytes) { return state_bytes < kPlainHintStateBytes; }

// The plain one-token form (K = 128, f32 state; both cache-hint instances) comes in instances
// with a dense batch's first-token input addresses formed before the early launch's wait as
// well, taken for grids of kFirstInputsEarlyMinCtas CTAs and more. In one kernel the two orders
// trade against each other (NOTES.md, tenth session: a run-time switch inside the kernel was
// slower than either), so the host picks the instance. Measured (H200, same run, three repeats,
// early against late): B = 1 2.58 against 2.50 us, B = 4 5.85 against 5.80, B = 8 9.34 against
// 9.82, B = 16 17.6 against 18.2, B = 64 -1.5%, B = 256 -0.2%, B = 1024 -0.1%.
inline constexpr int64_t kFirstInputsEarlyMinCtas = 4096;
constexpr bool decode_first_inputs_early(int64_t ctas, bool packed) {
  return !packed && ctas >= kFirstInputsEarlyMinCtas;
}

}  // namespace gdn::cuda

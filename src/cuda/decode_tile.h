// Tile geometry of the decode kernels and the one heuristic that picks it. Host and device.
//
// Both kernels run CTAs of kDecodeThreads threads; each thread owns `rpt` state rows, one
// 16-byte chunk (W = 4 f32 or 8 bf16 columns) of each, staged in shared memory (rpt x 2 KiB per
// CTA) by cp.async, so the bytes in flight are bounded by shared memory, not registers. A bf16
// state that lives through several tokens is kept in f32 between them ("wide" staging, twice
// the shared memory), so that it is rounded to bf16 once, when stored:
//   vk  ([V, K], K contiguous): a row is a value index v, spread over L = K / W lanes, so S k
//       and S q are sums over L lanes (shuffles). CTA = 128 / L row groups x rpt rows.
//   kv  ([K, V], V contiguous): a row is a key index; a thread holds W adjacent columns v of
//       rpt adjacent rows k, so S k and S q are per-thread sums over its rows, then over the
//       K / rpt row groups (shuffles, then shared memory across warps). CTA = the
//       128 / (K / rpt) column lanes x W columns.
#pragma once

#include <cstdint>

namespace gdn::cuda {

constexpr int kDecodeThreads = 128;

constexpr int vk_rows_per_cta(int K, int state_bytes, int rpt) {
  return kDecodeThreads / (K / (16 / state_bytes)) * rpt;
}

constexpr int kv_cols_per_cta(int K, int state_bytes, int rpt) {
  return kDecodeThreads / (K / rpt) * (16 / state_bytes);
}

// State rows (vk) or columns (kv) of V per CTA.
constexpr int decode_per_cta(bool kv, int K, int state_bytes, int rpt) {
  return kv ? kv_cols_per_cta(K, state_bytes, rpt) : vk_rows_per_cta(K, state_bytes, rpt);
}

// The instantiated rows-per-thread values (decode_launch.cuh), largest first. Only 4 for now:
// on the H200 (device pass of 2026-11-30) every process that launched a tile of 2, 8 or 16
// rows per thread died with SIGILL while rpt = 4 passed every oracle case, the graph and stream
// tests and racecheck; until the cause is found the other tiles are not built.
constexpr int kRpt[] = {4};
constexpr int kRptCount = sizeof kRpt / sizeof kRpt[0];

// Shared memory of a CTA: the staged state (dynamic: rpt chunks a thread, twice as many
// 16-byte rows when wide) and, for kv, q and k of two tokens and the warps' partial sums of two
// tokens (static).
constexpr int decode_stage_bytes(int rpt, bool wide) { return rpt * kDecodeThreads * 16 * (wide ? 2 : 1); }

constexpr int decode_smem_bytes(bool kv, int K, int state_bytes, int rpt, bool wide) {
  if (!kv) return decode_stage_bytes(rpt, wide);
  const int lanes = kDecodeThreads / (K / rpt), sums = 3 + 2 * (16 / state_bytes);
  return decode_stage_bytes(rpt, wide) + 2 * 2 * K * 4 +
         2 * (kDecodeThreads / 32) * lanes * ((sums + 3) / 4) * 16;
}

constexpr int kDecodeMaxSmem = 48 * 1024;  // without the opt-in attribute

// Whether the kernel of this layout, K, state width and rows per thread is instantiated.
constexpr bool decode_tile_compiles(bool kv, int K, int state_bytes, int rpt) {
  if (K != 64 && K != 128) return false;
  if (decode_smem_bytes(kv, K, state_bytes, rpt, false) > kDecodeMaxSmem) return false;
  if (kv) {
    if (rpt != 16 && rpt != 8 && rpt != 4) return false;
    const int groups = K / rpt;  // row groups: whole row groups per warp
    return kDecodeThreads % groups == 0 && kDecodeThreads / groups <= 32;
  }
  const int lanes = K / (16 / state_bytes);  // one row within one warp; lane r loads v at row r
  return (rpt == 16 || rpt == 8 || rpt == 4 || rpt == 2) && lanes <= 32 && rpt <= lanes;
}

// ... and whether its CTAs tile V exactly and its shared memory fits (wide: the bf16 state of
// several tokens kept in f32).
constexpr bool decode_tile_valid(bool kv, int K, int V, int state_bytes, int rpt, bool wide) {
  if (!decode_tile_compiles(kv, K, state_bytes, rpt)) return false;
  if (decode_smem_bytes(kv, K, state_bytes, rpt, wide) > kDecodeMaxSmem) return false;
  const int per_cta = decode_per_cta(kv, K, state_bytes, rpt);
  return per_cta <= V && V % per_cta == 0;
}

// CTAs per multiprocessor the register budget must allow (__launch_bounds__' second argument):
// 5, i.e. at most 96 registers a thread, which every tile fits without spilling (ptxas -v,
// nvcc 13.0, sm_90a; at 6 CTAs, 80 registers, vk spills 16-32 bytes). Unbounded, ptxas takes
// 107-128. With rpt = 16 the 5 CTAs stage 160 KiB of state in flight per multiprocessor.
constexpr int decode_min_ctas_per_sm() { return 5; }

// Rows per thread for a launch over `heads` = N * Hv (sequence, value head) pairs on a GPU of
// `sms` multiprocessors, or `forced` when it names a valid tile (GDN_CUDA_DECODE_RPT, for
// tuning). Returns 0 when no tile fits (K or V unsupported).
//
// Rule: the most rows per thread (the most state in flight per multiprocessor: 5 CTAs x
// rpt x 2 KiB, and the fewest redundant q/k loads and norm sums per state byte) whose grid
// still gives kMinWaves full waves of decode_min_ctas_per_sm() CTAs on every multiprocessor,
// so that the last, partial wave is a small part of the time; below that (small batches, e.g.
// B = 1 at Hv = 32: 32 heads), the fewest rows per thread, which spreads the state over the
// most CTAs so that all of it is in flight after one memory latency.
// Measured (run 1, an earlier register-resident kernel): state bandwidth grew with the bytes
// a multiprocessor keeps in flight, 48 KiB -> 2.5 TB/s, 96 KiB -> 3.45 TB/s; hence staging in
// shared memory and preferring the largest tile. The staged kernel's tiles are not timed yet
// (run 2 faulted at rpt >= 8, see decode_common.cuh copy16_async): kMinWaves = 2 is reasoned,
// and bench/bench_decode.py --sweep times every tile.
constexpr int kMinWaves = 2;

constexpr int decode_rows_per_thread(bool kv, int K, int V, int state_bytes, bool wide,
                                     int64_t heads, int sms, int forced) {
  if (forced > 0 && decode_tile_valid(kv, K, V, state_bytes, forced, wide)) return forced;
  int smallest = 0;
  for (int i = 0; i < kRptCount; ++i) {
    const int rpt = kRpt[i];
    if (!decode_tile_valid(kv, K, V, state_bytes, rpt, wide)) continue;
    const int per_cta = decode_per_cta(kv, K, state_bytes, rpt);
    if (heads * (V / per_cta) >= int64_t(kMinWaves) * decode_min_ctas_per_sm() * sms) return rpt;
    smallest = rpt;
  }
  return smallest;
}

}  // namespace gdn::cuda

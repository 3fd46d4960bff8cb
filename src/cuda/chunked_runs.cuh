// A chain run: what one chain CTA of the split forms walks (a whole sequence, one segment of the
// exact sequence split, or one window: chunked_tile.h), where its state starts and where it ends,
// and the segment states in the workspace. Shared by the bf16 / f16 split form (chunked_split.cuh)
// and the f32 one (chunked_f32.cu).
#pragma once

#include "cuda/chunked_range.cuh"
#include "cuda/chunked_steps.cuh"

namespace gdn::cuda::chunked {

// What one chain CTA runs: a whole sequence (seg_pass 0), one segment run (chunked_tile.h), or
// one window (kPassWindow).
enum RunStart { kStartInitial, kStartZero, kStartIdentity, kStartSegment };
struct ChainRun {
  int64_t c_begin = 0, c_end = 0;  // chunks [c_begin, c_end) of the sequence
  int start = kStartInitial;       // the initial state (or zeros without one), zeros, I, or a segment start
  bool use_u = true;               // false: U = 0 (the transition run)
  bool write_o = true;
  bool end_final = true;           // store the end state as the final state (p.ht, if asked for)
  const float* start_state = nullptr;  // [V, K] f32 (kStartSegment)
  float* end_state = nullptr;          // [V, K] f32 workspace, or null
  // a transition run with p.seg_live: its warps' words there (the last chunk still live, or -1
  // in the default layout)
  int32_t* live_words = nullptr;
};

__device__ __forceinline__ float* seg_state(const ChunkParams& p, int64_t n, int m, int h, int kind) {
  return p.seg_states + (((n * p.segments + m) * p.Hv + h) * kSegStates + kind) * int64_t(kV * kK);
}

// The forgotten start (ChunkParams::seg_live). Everything a segment computes is linear in its
// start state, so pass 1's run from zeros (R) differs from the true run only by the start state
// carried through the segment's transitions: at the start of the segment's chunk c, by
// S_start A_{<c} (A_{<c}: the transition run's state there, exactly as pass 1 forms it). Where
// ||A_{<c}||_2 is below 2^kForgetExponent (about 1e-12: far below f32's own rounding of the state),
// chunk c onwards from R's run equals the true run within that fraction of the start state, and
// pass 2 needs to redo only the chunks before the last c where it is not. The bound is measured,
// not assumed: ||A||_2 <= ||A||_F <= K max|a_ij| < 2^(e + 8) for K = 128 and max|a_ij| < 2^(e + 1).
// (Nothing about the gates or the keys is assumed; fast decays forget a chunk's start within a
// chunk or two, no decay keeps every chunk live and pass 2 whole, as without it.)
inline constexpr int kForgetExponent = -40;
__device__ __forceinline__ int32_t* seg_live_words(const ChunkParams& p, int64_t n, int m, int h) {
  return p.seg_live + ((n * p.segments + m) * p.Hv + h) * 8;
}
// Which heads take the forgotten start's layout (ChunkParams::forget_mode, chunked_tile.h): every head
// (kForgetAlways), or those whose gates bound every middle segment's transition below
// 2^kForgetExponent within its first kForgetLookChunks chunks (kForgetByGates). Both layouts
// have the same segments and grids, only their lengths differ (p.seg_chunks, and
// p.seg_chunks_forget with the last segment the remainder, which pass 2 runs whole), so each
// head is free to take either; a head that keeps its start takes the default one, where the
// local runs write no o and pass 2 runs whole (the transition runs write -1 as their live words).
// The bound: for keys of norm at most 1 and beta in [0, 2], ||I - beta_t k_t k_t^T||_2 <= 1, so
// ||A_{<c}||_2 <= exp(the sum of the log-decays before c), the sum of the prepared chunks' G[C - 1]
// (each chunk's total). It only picks the layout: the measured transition decides where pass 2
// cuts, so keys the bound does not hold for cost at most the layout, never accuracy.
inline constexpr int kForgetLookChunks = 8;
inline constexpr float kForgetLogBound = -27.7258872f;  // ln 2^kForgetExponent
static_assert(kForgetExponent == -40, "kForgetLogBound is ln 2^kForgetExponent");
// Called by every thread of the CTA (a __syncthreads_or): dense batches (the sequence split's),
// sequence n's chunks as the prepare kernel left them (slot n chunks_per_seq + c).
__device__ __forceinline__ bool forgotten_layout(const ChunkParams& p, int64_t n, int h) {
  if (p.forget_mode == kForgetAlways) return true;
  const int64_t len = p.seg_chunks_forget;
  const int look = int(len < kForgetLookChunks ? len : kForgetLookChunks);
  const PreparedChunk* chunks = static_cast<const PreparedChunk*>(p.prepared) + n * p.chunks_per_seq * p.Hv + h;
  bool keeps = false;
  for (int m = 1 + int(threadIdx.x); m < p.segments - 1; m += int(blockDim.x)) {  // the middle segments
    float G[kForgetLookChunks];  // every load out before the sums (past `look`: chunk look - 1's again)
#pragma unroll
    for (int i = 0; i < kForgetLookChunks; ++i) G[i] = chunks[(m * len + min(i, look - 1)) * p.Hv].tiles.G[kC - 1];
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kForgetLookChunks; ++i) sum += i < look ? G[i] : 0.f;
    keeps = keeps || !(sum <= kForgetLogBound);  // (a NaN keeps)
  }
  return !__syncthreads_or(keeps);
}

// Whether the transition's values a thread holds are still live, m their largest |value| in the
// registers (abs_max), at 2^-sigma times the values (the test grows with m: a warp's rows are live
// where any lane's are).
__device__ __forceinline__ bool transition_live(float m, int sigma) {
  return m > 0.f && exponent_of(m) + sigma + 8 > kForgetExponent;  // (a subnormal m reads as 2^-127: above it)
}

// The run's start state as the warp's accumulator tiles (rows [row0, +16), key columns
// [col0, +8 kTiles)).
template <int kTiles>
__device__ __forceinline__ void load_run_start(const ChunkParams& p, const ChainRun& run, int64_t slot, int h,
                                               float (&S)[kTiles][4], int row0, int col0, int g, int q) {
  if (run.start == kStartInitial) {
    load_state(p, slot, h, S, row0, col0, g, q);
    return;
  }
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int v = row0 + g + 8 * hr, k = col0 + 8 * t + 2 * q;
      float2 x = make_float2(0.f, 0.f);
      if (run.start == kStartIdentity) x = make_float2(v == k ? 1.f : 0.f, v == k + 1 ? 1.f : 0.f);
      if (run.start == kStartSegment) x = *reinterpret_cast<const float2*>(run.start_state + v * kK + k);
      S[t][2 * hr] = x.x;
      S[t][2 * hr + 1] = x.y;
    }
}

template <int kTiles>
__device__ __forceinline__ void store_segment_state(float* state, const float (&S)[kTiles][4], int row0, int col0,
                                                    int g, int q) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int v = row0 + g + 8 * hr, k = col0 + 8 * t + 2 * q;
      *reinterpret_cast<float2*>(state + v * kK + k) = make_float2(S[t][2 * hr], S[t][2 * hr + 1]);
    }
}

}  // namespace gdn::cuda::chunked

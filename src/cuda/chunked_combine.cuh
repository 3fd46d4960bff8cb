// The exact sequence split's combine step (chunked_tile.h): the segments' start states from
// the first one's and each middle segment's R and A, between the two chain passes. Shared by the
// bf16 / f16 split form (chunked_split.cuh) and the f32 one (chunked_f32.cu).
#pragma once

#include "cuda/chunked_runs.cuh"
#include "cuda/chunked_wgmma.cuh"
#include "cuda/tma.cuh"

namespace gdn::cuda::chunked {

// S_start(m + 1) = S_start(m) A_m + R_m for m = 1 .. segments - 2, in f32: one CTA per
// (sequence, value head, block of kCombineRows = 8 state rows), the segments in order. The k
// sum is cut in kCombineKParts = 4 parts of 32: thread t (of 256) takes part t / 64 and a 4 x 4
// block of outputs, rows [4 (t % 64 / 32), +4) x columns [4 (t % 32), +4): per k one float4 of
// A_m (the warp's 512 contiguous bytes) and one broadcast float4 of S^T, 16 FMA, the loads two
// k ahead; part 0 adds the other parts' sums (shared memory) and R_m. A_m + 1 (into the second
// of two buffers: on sm_90 one bulk copy by thread 0, else cp.async by every thread) and R_m + 1
// (registers) are in flight while A_m is applied: only S's own dependence is serial.
// S^T's rows go four to a group of kCombineStGroup floats (4 x 8 and 4 of padding), so that
// part 0's transposed float4 stores (column c0 + e of 32 threads: rows 4 apart) fall in
// distinct 16-byte bank slots; unpadded they were 32-way conflicts on the step's serial path.
// (Measured for 2/8's seven steps: 69 us with 8 outputs a thread from three loads a k, 24.5 us
// with the 4 x 4 blocks over all of k, 21.7 us with the parts, 16 rows a CTA of 512 threads;
// two A matrices ahead in three buffers measured 23.2. 2/8 has N Hv = 8: 16 rows a CTA left 68
// of the 132 SMs idle and each CTA's 16 warps issue-bound on their FMA; 8 rows took the call
// from 0.357 to 0.350 ms, forty-sixth session. 16.9 us in the fifty-third, Nsight Compute: two
// warps a scheduler, each FMA waiting on the load before it (short scoreboard), the transposed
// stores 12-way conflicts on average, a quarter of the samples in the per-step cp.async issue.)
inline constexpr int kCombineKParts = 4;  // of the k sum
inline constexpr int kCombinePartThreads = (kCombineRows / 4) * (kK / 4);  // a 4 x 4 block each
inline constexpr int kCombineThreads = kCombineKParts * kCombinePartThreads;
inline constexpr int kCombineStGroup = 4 * kCombineRows + 4;  // floats a group of four k rows of S^T
struct CombineSmem {
  float A[2][kK][kK];                                   // A_m in A[m % 2]
  float St[kK / 4][kCombineStGroup];                    // S_start(m)^T of the block's rows: row k, column r
                                                        // at St[k / 4][8 (k % 4) + r]
  float partial[kCombineKParts - 1][kCombineRows][kK];  // the sums of parts 1 and up
  uint64_t a_full[2];                                   // A[b] has landed (sm_90: bulk copies)
};
inline constexpr size_t kCombineSmemBytes = sizeof(CombineSmem);
static_assert(kCombineSmemBytes <= 227 * 1024, "the combine's block fits Hopper's opt-in shared memory");
static_assert(kCombineRows % 4 == 0 && kCombineThreads <= 1024, "4 x 4 outputs a thread and part");
static_assert(kCombineStGroup % 4 == 0 && (kCombineStGroup / 4) % 2 == 1 && offsetof(CombineSmem, St) % 16 == 0 &&
                  offsetof(CombineSmem, a_full) % 8 == 0,
              "S^T's groups float4-aligned, an odd number of 16-byte slots apart");
__device__ __forceinline__ float* combine_st(CombineSmem& s, int k, int r) {
  return &s.St[k >> 2][kCombineRows * (k & 3) + r];
}

template <class M>  // (one copy per input dtype's translation unit; M is not used)
__global__ void __launch_bounds__(kCombineThreads) segment_combine_kernel(const __grid_constant__ ChunkParams p) {
  extern __shared__ float4 combine_smem[];
  CombineSmem& s = *reinterpret_cast<CombineSmem*>(combine_smem);
  const int tid = threadIdx.x, part = tid / kCombinePartThreads, t = tid % kCombinePartThreads;
  const int rb = int(blockIdx.x % (kV / kCombineRows));
  const int64_t sequence_head = blockIdx.x / (kV / kCombineRows);
  const int64_t n = sequence_head / p.Hv;
  const int h = int(sequence_head % p.Hv);
  const int r0 = 4 * (t / (kK / 4)), c0 = 4 * (t % (kK / 4));  // the thread's rows and columns of the block
  const int k0 = part * (kK / kCombineKParts);
  const int64_t rows = int64_t(rb) * kCombineRows * kK;  // the block's first element
  if (p.segments < 3) return;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (tid == 0) {
    mbarrier_init(&s.a_full[0], 1);
    mbarrier_init(&s.a_full[1], 1);
    fence_mbarrier_init();
  }
  __syncthreads();  // the mbarriers are initialised before anyone waits on them
  const auto load_a = [&](int m) {  // A_m into A[m % 2]: one bulk copy
    if (tid == 0) {
      mbarrier_arrive_expect(&s.a_full[m & 1], uint32_t(sizeof(s.A[0])));
      bulk_load(&s.A[m & 1][0][0], seg_state(p, n, m, h, kSegA), uint32_t(sizeof(s.A[0])), &s.a_full[m & 1]);
    }
  };
  const auto wait_a = [&](int m, bool) { mbarrier_wait(&s.a_full[m & 1], uint32_t((m - 1) >> 1) & 1u); };
#else
  const auto load_a = [&](int m) {  // A_m into A[m % 2], one group
    const float4* a = reinterpret_cast<const float4*>(seg_state(p, n, m, h, kSegA));
    float4* dst = reinterpret_cast<float4*>(&s.A[m & 1][0][0]);
    for (int i = tid; i < kK * kK / 4; i += kCombineThreads) cp_async16(dst + i, a + i, 16);
    cp_async_commit();
  };
  const auto wait_a = [&](int, bool ahead) {
    if (ahead)
      cp_async_wait<1>();
    else
      cp_async_wait<0>();
  };
#endif
  const auto load_r = [&](int m, float4 (&rv)[4]) {  // R_m at the thread's 4 x 4
    const float* R = seg_state(p, n, m, h, kSegR) + rows;
#pragma unroll
    for (int i = 0; i < 4; ++i) rv[i] = *reinterpret_cast<const float4*>(R + (r0 + i) * kK + c0);
  };

  load_a(1);
  if (part == 0) {  // S_start(1)'s rows, transposed
    const float* s1 = seg_state(p, n, 1, h, kSegStart) + rows;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 x = *reinterpret_cast<const float4*>(s1 + (r0 + i) * kK + c0);
      *combine_st(s, c0, r0 + i) = x.x, *combine_st(s, c0 + 1, r0 + i) = x.y;
      *combine_st(s, c0 + 2, r0 + i) = x.z, *combine_st(s, c0 + 3, r0 + i) = x.w;
    }
  }
  float4 rv[4] = {};
  if (part == 0) load_r(1, rv);
  for (int m = 1; m + 1 < p.segments; ++m) {
    const bool ahead = m + 2 < p.segments;  // A_m + 1 is used too
    if (ahead) load_a(m + 1);
    float4 rv_next[4];  // R_m + 1, a step ahead (from the end of step m, its latency was the step's)
    if (ahead && part == 0) load_r(m + 1, rv_next);
    wait_a(m, ahead);
    __syncthreads();  // A_m and S_start(m) are in shared memory
    float acc[4][4];  // [row r0 + i][column c0 + e]: the part's sum (part 0: plus R_m)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i][0] = rv[i].x, acc[i][1] = rv[i].y, acc[i][2] = rv[i].z, acc[i][3] = rv[i].w;
    const float (*a)[kK] = s.A[m & 1];
    constexpr int kKs = kK / kCombineKParts, kAhead = 2;
    float4 sq[kAhead + 1], aq[kAhead + 1];  // the loads of k .. k + kAhead, in a ring
#pragma unroll
    for (int j = 0; j < kAhead; ++j) {
      sq[j] = *reinterpret_cast<const float4*>(combine_st(s, k0 + j, r0));  // rows r0 .. r0 + 3 at k
      aq[j] = *reinterpret_cast<const float4*>(&a[k0 + j][c0]);
    }
#pragma unroll
    for (int j = 0; j < kKs; ++j) {
      if (j + kAhead < kKs) {
        sq[(j + kAhead) % (kAhead + 1)] = *reinterpret_cast<const float4*>(combine_st(s, k0 + j + kAhead, r0));
        aq[(j + kAhead) % (kAhead + 1)] = *reinterpret_cast<const float4*>(&a[k0 + j + kAhead][c0]);
      }
      const float4 sk = sq[j % (kAhead + 1)], ak = aq[j % (kAhead + 1)];
      const float sv[4] = {sk.x, sk.y, sk.z, sk.w}, av[4] = {ak.x, ak.y, ak.z, ak.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] += sv[i] * av[e];
    }
    if (part > 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float4*>(&s.partial[part - 1][r0 + i][c0]) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    fence_shared_for_wgmma();  // this thread's reads of A[m % 2] -> the bulk copy that refills it
#endif
    __syncthreads();  // every part's sum is formed (so S^T and A[m % 2] are read)
    if (part == 0) {
#pragma unroll
      for (int w = 0; w < kCombineKParts - 1; ++w)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float4 x = *reinterpret_cast<const float4*>(&s.partial[w][r0 + i][c0]);
          acc[i][0] += x.x, acc[i][1] += x.y, acc[i][2] += x.z, acc[i][3] += x.w;
        }
      if (ahead)
#pragma unroll
        for (int i = 0; i < 4; ++i) rv[i] = rv_next[i];
      float* next = seg_state(p, n, m + 1, h, kSegStart) + rows;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        *reinterpret_cast<float4*>(next + (r0 + i) * kK + c0) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        *reinterpret_cast<float4*>(combine_st(s, c0 + e, r0)) = make_float4(acc[0][e], acc[1][e], acc[2][e], acc[3][e]);
    }
  }
}

}  // namespace gdn::cuda::chunked

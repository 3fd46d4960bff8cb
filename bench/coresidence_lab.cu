// gdn_coresidence_lab: whether a CTA shaped like the split form's chain (one SM's worth of shared
// memory less a prepare CTA's, a few warps at many registers) lets a CTA shaped like the prepare
// kernel's (256 threads at 128 registers, about 95 KB) run beside it on the same SM. Each CTA
// spins for a fixed time and records its SM and start and end (globaltimer); the report counts
// the "prepare" CTAs that started on an SM while a "chain" CTA was running there.
//   chain shapes: 5 warps at about 200 registers (the chain with its copier warp), 4 warps at
//   about 200, and 8 warps launched at 128 with setmaxnreg (warpgroup 0 up to 216, warpgroup 1
//   down to 40: the chain kernel's plan, chunked_tile.h).
// What it showed (twenty-sixth session, docs/NOTES.md): the register file is split between the
// SM's four sub-partitions, each warp's registers in its own, so a five-warp chain CTA at 200
// registers leaves no prepare CTA room though the SM-wide sum would. sm_90a only (setmaxnreg).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

struct Span {
  unsigned sm;
  unsigned long long start, end;
};

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned sm_id() {
  unsigned s;
  asm volatile("mov.u32 %0, %smid;" : "=r"(s));
  return s;
}

// kLive values kept live in registers through the spin (ptxas -v shows the count).
template <int kLive>
__device__ __forceinline__ float hold_registers(unsigned long long until, float seed) {
  float r[kLive];
#pragma unroll
  for (int i = 0; i < kLive; ++i) r[i] = seed * float(i + 1);
  for (unsigned long long t = now_ns(); t < until; t = now_ns()) {
    const float tick = float(unsigned(t) & 1u) * 1e-30f;  // a value ptxas cannot know
#pragma unroll
    for (int i = 0; i < kLive; ++i) asm volatile("add.f32 %0, %0, %1;" : "+f"(r[i]) : "f"(tick));
  }
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kLive; ++i) sum += r[i];
  return sum;
}

template <int kLive>
__device__ __forceinline__ void spin_and_record(Span* spans, float* sink, unsigned long long ns) {
  extern __shared__ float smem[];
  const unsigned long long start = now_ns();
  const float v = hold_registers<kLive>(start + ns, float(threadIdx.x) + smem[threadIdx.x]);
  if (v == 1234.5f) sink[threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.x == 0) spans[blockIdx.x] = Span{sm_id(), start, now_ns()};
}

// one role at kLive registers for every warp
template <int kThreads, int kLive>
__global__ void __launch_bounds__(kThreads, 1) plain_kernel(Span* spans, float* sink, unsigned long long ns) {
  spin_and_record<kLive>(spans, sink, ns);
}

// 8 warps launched at 128 registers, warpgroup 0 raised to 216, warpgroup 1 lowered to 40
__global__ void __maxnreg__(128) split_kernel(Span* spans, float* sink, unsigned long long ns) {
  if (threadIdx.x >= 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    extern __shared__ float smem[];
    const unsigned long long start = now_ns();
    while (now_ns() < start + ns) {
    }
    if (smem[threadIdx.x] == 1234.5f) sink[threadIdx.x] = 0.f;
    __syncthreads();
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 216;\n");
  spin_and_record<204>(spans, sink, ns);
}

// a chain-shaped and a prepare-shaped CTA's shared memory (dynamic and static together)
struct Sizes {
  int chain, prep;
};
constexpr Sizes kFirstPlan{134176, 94720};                // one Qc buffer; the group prepare CTA
constexpr Sizes kVOverQ{150544 + 2176, 78336 + 128};      // both Qc buffers; the one-head CTA, v over q
constexpr Sizes kVOverQLess1K{150544 + 2176 - 1152, 78336 + 128};  // the same, 1,152 bytes fewer

// prep_first: the prepare-shaped grid launched first (as an overlapped window's next
// preparation may be), the chain-shaped one while it runs
template <class Kernel, class PrepKernel>
int run_case(const char* name, Kernel chain, int chain_threads, PrepKernel prep, Sizes sizes, bool prep_first, int sms,
             Span* d_chain, Span* d_prep, float* sink) {
  const int chain_ctas = sms / 2, prep_ctas = 4 * sms;
  const int kChainSmem = sizes.chain, kPrepSmem = sizes.prep;
  CHECK(cudaFuncSetAttribute(chain, cudaFuncAttributeMaxDynamicSharedMemorySize, kChainSmem));
  CHECK(cudaFuncSetAttribute(chain, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  CHECK(cudaFuncSetAttribute(prep, cudaFuncAttributeMaxDynamicSharedMemorySize, kPrepSmem));
  CHECK(cudaFuncSetAttribute(prep, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
  cudaFuncAttributes ca{}, pa{};
  CHECK(cudaFuncGetAttributes(&ca, chain));
  CHECK(cudaFuncGetAttributes(&pa, prep));
  int lo = 0, hi = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t s_chain, s_prep;
  CHECK(cudaStreamCreateWithPriority(&s_chain, cudaStreamNonBlocking, hi));
  CHECK(cudaStreamCreateWithPriority(&s_prep, cudaStreamNonBlocking, lo));
  for (int rep = 0; rep < 2; ++rep) {  // the first a warm-up
    // the chain on half the SMs' worth (as an overlapped window's), the preparation beside
    if (prep_first) prep<<<prep_ctas, 256, kPrepSmem, s_prep>>>(d_prep, sink, 20000ull);
    chain<<<chain_ctas, chain_threads, kChainSmem, s_chain>>>(d_chain, sink, 200000ull);
    if (!prep_first) prep<<<prep_ctas, 256, kPrepSmem, s_prep>>>(d_prep, sink, 20000ull);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
  }
  std::vector<Span> cs(chain_ctas), ps(prep_ctas);
  CHECK(cudaMemcpy(cs.data(), d_chain, sizeof(Span) * chain_ctas, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(ps.data(), d_prep, sizeof(Span) * prep_ctas, cudaMemcpyDeviceToHost));
  unsigned long long t0 = ~0ull, chain_end = 0, prep_end = 0;
  for (const Span& c : cs) t0 = std::min(t0, c.start), chain_end = std::max(chain_end, c.end);
  for (const Span& p : ps) t0 = std::min(t0, p.start), prep_end = std::max(prep_end, p.end);
  int beside = 0;
  for (const Span& p : ps)
    for (const Span& c : cs)
      if (p.sm == c.sm && p.start < c.end && p.end > c.start) {
        ++beside;
        break;
      }
  std::printf("%-52s chain %3d regs %6d B | prepare %3d regs %6d B | %4d of %4d prepare CTAs beside a chain CTA;"
              " chain ends %7.1f us, preparation %7.1f us\n",
              name, ca.numRegs, int(ca.sharedSizeBytes) + kChainSmem, pa.numRegs, int(pa.sharedSizeBytes) + kPrepSmem,
              beside, prep_ctas, (chain_end - t0) * 1e-3, (prep_end - t0) * 1e-3);
  CHECK(cudaStreamDestroy(s_chain));
  CHECK(cudaStreamDestroy(s_prep));
  return 0;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9) {
    std::printf("coresidence lab: needs a compute capability 9.x GPU\n");
    return 0;
  }
  std::printf("%s: %d SMs, %zu B shared memory an SM, %zu reserved a CTA, %d registers an SM\n", prop.name,
              prop.multiProcessorCount, prop.sharedMemPerMultiprocessor, prop.reservedSharedMemPerBlock,
              prop.regsPerMultiprocessor);
  const int sms = prop.multiProcessorCount;
  Span *d_chain = nullptr, *d_prep = nullptr;
  float* sink = nullptr;
  CHECK(cudaMalloc(&d_chain, sizeof(Span) * sms));
  CHECK(cudaMalloc(&d_prep, sizeof(Span) * 4 * sms));
  CHECK(cudaMalloc(&sink, 4096));
  int rc = 0;
  const auto prep128 = plain_kernel<256, 118>;  // 128 registers (the group prepare kernel's count)
  const auto prep112 = plain_kernel<256, 102>;  // about 112 (the one-head kernel's)
  rc |= run_case("5 warps, ~200 regs", plain_kernel<160, 188>, 160, prep128, kFirstPlan, false, sms, d_chain, d_prep, sink);
  rc |= run_case("5 warps, ~128 regs", plain_kernel<160, 116>, 160, prep128, kFirstPlan, false, sms, d_chain, d_prep, sink);
  rc |= run_case("4 warps, ~200 regs", plain_kernel<128, 188>, 128, prep128, kFirstPlan, false, sms, d_chain, d_prep, sink);
  rc |= run_case("8 warps, 128 -> 216 / 40", split_kernel, 256, prep128, kFirstPlan, false, sms, d_chain, d_prep, sink);
  rc |= run_case("8 warps, 128 -> 216 / 40; v over q sizes", split_kernel, 256, prep112, kVOverQ, false, sms, d_chain,
                 d_prep, sink);
  rc |= run_case("8 warps, 128 -> 216 / 40; v over q sizes, prep first", split_kernel, 256, prep112, kVOverQ, true, sms,
                 d_chain, d_prep, sink);
  rc |= run_case("8 warps; v over q sizes less 1,152 B", split_kernel, 256, prep112, kVOverQLess1K, false, sms, d_chain,
                 d_prep, sink);
  rc |= run_case("8 warps; v over q sizes less 1,152 B, prep first", split_kernel, 256, prep112, kVOverQLess1K, true, sms,
                 d_chain, d_prep, sink);
  return rc;
}

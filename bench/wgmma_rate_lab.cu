// gdn_wgmma_rate_lab: how many cycles one wgmma of the chain step's shapes takes, for each shared-
// memory layout of its B operand that the chunked kernels use (docs/NOTES.md, forty-eighth
// session). Not part of libgdn; sm_90a only. One warpgroup a CTA (or two: "x2"), one CTA an SM,
// A from registers (as every chain product), bf16, f32 accumulators; each row issues groups of
// eight products on one accumulator (the chain's pattern: a k loop into D or O) and either waits
// for each group (latency: "wait 0") or keeps one group in flight ("wait 1": throughput). The
// tiles hold zeros: the rate does not depend on the values. Printed: cycles a product, the SM's
// clock from clock64.
//   kmajor-128   m64n64k16, B K-major in core matrices, no swizzle, 128 columns (-W: k_major_desc<kK>)
//   kmajor-64    the same, 64 columns (P, T: k_major_desc<kC>)
//   swz128-k     m64n64k16, B 128-byte swizzled, K-major (Qc: swizzle128_desc_k)
//   swz128-mn    m64n128k16, B 128-byte swizzled, MN-major (Kc in the state update: swizzle128_desc_mn)
// Run: gdn_wgmma_rate_lab
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "chain_lab_common.h"
#include "cuda/chunked_wgmma.cuh"

namespace {

using namespace gdn::cuda::chunked;
using M = MmaBf16;

constexpr int kIters = 4096;  // groups a warpgroup
constexpr int kGroup = 8;     // products a group
constexpr int kTileBytes = 16384;

enum Layout { kKMajor128 = 0, kKMajor64 = 1, kSwz128K = 2, kSwz128Mn = 3 };

#if GDN_CHUNKED_WGMMA
template <int kLayout>
__device__ __forceinline__ uint64_t b_desc(const uint16_t* tile, int j) {
  if constexpr (kLayout == kKMajor128) return k_major_desc<128>(tile, 16 * (j & 7));
  if constexpr (kLayout == kKMajor64) return k_major_desc<64>(tile, 16 * (j & 3));
  if constexpr (kLayout == kSwz128K) return swizzle128_desc_k<64>(tile, 16 * (j & 7));
  return swizzle128_desc_mn<64>(tile, 16 * (j & 3));
}
#endif

// cycles[blockIdx.x * warpgroups + wg]: the warpgroup's clock64 cycles over its kIters groups
template <int kLayout, int kPending>
__global__ void __launch_bounds__(256, 1) rate_kernel(long long* cycles, float* sink) {
#if GDN_CHUNKED_WGMMA
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int wg = int(threadIdx.x) / 128;
  uint16_t* tile = reinterpret_cast<uint16_t*>(smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u)) +
                   wg * (kTileBytes / 2);
  for (int i = int(threadIdx.x) % 128; i < kTileBytes / 2; i += 128) tile[i] = 0;
  fence_shared_for_wgmma();
  __syncthreads();
  const uint32_t a[4] = {threadIdx.x, threadIdx.x * 3u, threadIdx.x * 5u, threadIdx.x * 7u};  // (any bits)
  float d64[8][4] = {};
  float d128[16][4] = {};
  const long long t0 = clock64();
  for (int it = 0; it < kIters; ++it) {
    wgmma_fence();
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      if constexpr (kLayout == kSwz128Mn)
        wgmma_128_mn<M>(d128, a, b_desc<kLayout>(tile, j));
      else
        wgmma_64<M>(d64, a, b_desc<kLayout>(tile, j));
    }
    wgmma_commit();
    wgmma_wait<kPending>();
  }
  wgmma_wait<0>();
  const long long t1 = clock64();
  if (threadIdx.x % 128 == 0) cycles[blockIdx.x * (blockDim.x / 128) + wg] = t1 - t0;
  float s = 0.f;
  for (int t = 0; t < 8; ++t) s += d64[t][0] + d64[t][1] + d64[t][2] + d64[t][3];
  for (int t = 0; t < 16; ++t) s += d128[t][0] + d128[t][1] + d128[t][2] + d128[t][3];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
#else
  (void)cycles, (void)sink;
#endif
}

template <int kLayout, int kPending>
void run(const char* name, int sms, int warpgroups) {
  const auto kernel = rate_kernel<kLayout, kPending>;
  const int smem = warpgroups * kTileBytes + 1024;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  long long* cycles = nullptr;
  float* sink = nullptr;
  CK(cudaMalloc(&cycles, sizeof(long long) * sms * warpgroups));
  CK(cudaMalloc(&sink, sizeof(float) * sms * 256));
  kernel<<<sms, 128 * warpgroups, smem>>>(cycles, sink);  // warm-up
  CK(cudaGetLastError());
  kernel<<<sms, 128 * warpgroups, smem>>>(cycles, sink);
  CK(cudaDeviceSynchronize());
  std::vector<long long> c(size_t(sms) * warpgroups);
  CK(cudaMemcpy(c.data(), cycles, sizeof(long long) * c.size(), cudaMemcpyDeviceToHost));
  double sum = 0;
  long long mx = 0;
  for (long long v : c) sum += double(v), mx = v > mx ? v : mx;
  const double per = sum / double(c.size()) / double(kIters * kGroup);
  std::printf("%-10s wait %d, %d warpgroup%s an SM: %6.1f cycles a product (slowest warpgroup %.1f)\n", name,
              kPending, warpgroups, warpgroups > 1 ? "s" : " ", per, double(mx) / double(kIters * kGroup));
  CK(cudaFree(cycles));
  CK(cudaFree(sink));
}

}  // namespace

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int wgs = 1; wgs <= 2; ++wgs) {
    run<kKMajor128, 0>("kmajor-128", sms, wgs);
    run<kKMajor64, 0>("kmajor-64", sms, wgs);
    run<kSwz128K, 0>("swz128-k", sms, wgs);
    run<kSwz128Mn, 0>("swz128-mn", sms, wgs);
    run<kKMajor128, 1>("kmajor-128", sms, wgs);
    run<kKMajor64, 1>("kmajor-64", sms, wgs);
    run<kSwz128K, 1>("swz128-k", sms, wgs);
    run<kSwz128Mn, 1>("swz128-mn", sms, wgs);
  }
  return 0;
}

// gdn_wgmma_lab: which shared-memory layouts and descriptors Hopper's wgmma reads the way the
// chain kernel would use it (docs/NOTES.md, fifth session: wgmma for the key products). Not part
// of libgdn; sm_90a only. One warpgroup computes D = A B, 64 x 64 x 16, bf16 in, f32 out:
//   A  [64, 16] from registers, in mma.m16n8k16's A fragment layout: warp w of the warpgroup
//      holds rows [16 w, +16) (what the chain's state tiles already are);
//   B  [16, 64] from shared memory, no swizzle, as core matrices of 8 rows x 16 bytes:
//      K-major (B stored [n][k], imm-trans-b 0: the chain's -W and Q tiles) or MN-major (B
//      stored [k][n], imm-trans-b 1: its K tile in the state update);
//   D  [64, 64] f32 read back in the m16n8 accumulator layout, 8-column tile j in d[4 j ..].
// Each candidate places B's core matrices with a byte stride between neighbours along K and
// along N, and gives the descriptor's leading / stride byte offsets from those strides under
// one reading of the PTX text. The lab prints which candidates reproduce the host product
// exactly (small integers: every sum is exact in f32). Then the same for a 128-byte swizzled
// MN-major B of 128 columns (which descriptor field strides the k groups and which the 64-column
// swizzle atoms). Run: gdn_wgmma_lab (exit 0 if at least one candidate of each kind matches).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kM = 64, kN = 64, kK = 16;
// Room for what a wrong reading reaches, not only what the right one does: with the strides
// swapped, the 8 N groups step by 1024 B (a 4 KB buffer made the fourth candidate fault).
constexpr int kSmemBytes = 16384;

struct Candidate {
  const char* name;
  int mn_major;        // 0: B stored [n][k]; 1: B stored [k][n] (imm-trans-b 1)
  uint32_t k_stride;   // bytes between core matrices adjacent along K
  uint32_t n_stride;   // bytes between core matrices adjacent along N
  uint32_t lbo, sbo;   // the descriptor's leading and stride byte offsets
};

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The warp's A fragment (rows r0, r0 + 8 of the row-major [64, 16] A) in mma.m16n8k16's layout.
__device__ __forceinline__ void a_fragment(const float* A, int r0, int q, uint32_t (&a)[4]) {
  a[0] = pack_bf16(A[r0 * kK + 2 * q], A[r0 * kK + 2 * q + 1]);
  a[1] = pack_bf16(A[(r0 + 8) * kK + 2 * q], A[(r0 + 8) * kK + 2 * q + 1]);
  a[2] = pack_bf16(A[r0 * kK + 2 * q + 8], A[r0 * kK + 2 * q + 9]);
  a[3] = pack_bf16(A[(r0 + 8) * kK + 2 * q + 8], A[(r0 + 8) * kK + 2 * q + 9]);
}

// The accumulators of rows r0, r0 + 8 (8-column tile j in d[4 j ..]) into row-major D [64, kCols].
template <int kCols>
__device__ __forceinline__ void store_d(float* D, const float (&d)[kCols / 2], int r0, int q) {
  for (int j = 0; j < kCols / 8; ++j) {
    D[r0 * kCols + 8 * j + 2 * q] = d[4 * j];
    D[r0 * kCols + 8 * j + 2 * q + 1] = d[4 * j + 1];
    D[(r0 + 8) * kCols + 8 * j + 2 * q] = d[4 * j + 2];
    D[(r0 + 8) * kCols + 8 * j + 2 * q + 1] = d[4 * j + 3];
  }
}

template <int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "
      "{%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(0), "n"(kTransB));
#else
  (void)d, (void)a, (void)desc_b;
  __trap();
#endif
}

// A [64, 16], B [16, 64] (row-major f32 holding bf16-exact values) -> D [64, 64].
__global__ void __launch_bounds__(128) product_kernel(const float* A, const float* B, float* D, Candidate c) {
  __shared__ __align__(1024) unsigned char smem[kSmemBytes];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
  for (int i = tid; i < kSmemBytes / 4; i += 128) reinterpret_cast<uint32_t*>(smem)[i] = 0u;
  __syncthreads();
  for (int i = tid; i < kK * kN; i += 128) {  // B[k][n] into its core matrix
    const int k = i / kN, n = i % kN;
    const uint32_t at = c.mn_major ? (n / 8) * c.n_stride + (k / 8) * c.k_stride + (k % 8) * 16 + (n % 8) * 2
                                   : (n / 8) * c.n_stride + (k / 8) * c.k_stride + (n % 8) * 16 + (k % 8) * 2;
    *reinterpret_cast<__nv_bfloat16*>(smem + at) = __float2bfloat16_rn(B[k * kN + n]);
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // generic writes -> async proxy
#endif
  __syncthreads();

  const int r0 = 16 * warp + g;
  uint32_t a[4];
  a_fragment(A, r0, q, a);

  const uint32_t start = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint64_t desc = uint64_t((start >> 4) & 0x3FFF) | (uint64_t((c.lbo >> 4) & 0x3FFF) << 16) |
                        (uint64_t((c.sbo >> 4) & 0x3FFF) << 32);  // base offset 0, no swizzle
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
  if (c.mn_major)
    wgmma_m64n64k16<1>(d, a, desc);
  else
    wgmma_m64n64k16<0>(d, a, desc);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
  store_d<kN>(D, d, r0, q);
}

// ---- 128-byte swizzled MN-major B, N = 128 (the fused kernel's Kc in the state update, if
// swizzled): B stored [k][n] in two 64-column halves (swizzle atoms of 8 k-rows x 128 bytes,
// the 16-byte chunk index XOR k % 8), the two 8-row k groups and the two halves at byte strides
// kg_stride and half_stride; the descriptor (layout type 1: 128-byte swizzle) takes lbo and sbo.
struct SwizzledCandidate {
  const char* name;
  uint32_t kg_stride, half_stride, lbo, sbo;
};

__device__ __forceinline__ void wgmma_m64n128k16_tb(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "
      "{%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(0));
#else
  (void)d, (void)a, (void)desc_b;
  __trap();
#endif
}

constexpr int kN2 = 128;

// A [64, 16], B [16, 128] -> D [64, 128].
__global__ void __launch_bounds__(128) swizzled_kernel(const float* A, const float* B, float* D, SwizzledCandidate c,
                                                       int* misaligned) {
  __shared__ __align__(1024) unsigned char smem[kSmemBytes];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const uint32_t start = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if (tid == 0) *misaligned = int(start & 1023u);
  for (int i = tid; i < kSmemBytes / 4; i += 128) reinterpret_cast<uint32_t*>(smem)[i] = 0u;
  __syncthreads();
  for (int i = tid; i < kK * kN2; i += 128) {
    const int k = i / kN2, n = i % kN2;
    const uint32_t at = (k / 8) * c.kg_stride + (n / 64) * c.half_stride + (k % 8) * 128 +
                        ((((n % 64) / 8) ^ (k % 8)) * 16) + (n % 8) * 2;
    *reinterpret_cast<__nv_bfloat16*>(smem + at) = __float2bfloat16_rn(B[k * kN2 + n]);
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
  __syncthreads();
  const int r0 = 16 * warp + g;
  uint32_t a[4];
  a_fragment(A, r0, q, a);
  const uint64_t desc = uint64_t((start >> 4) & 0x3FFF) | (uint64_t((c.lbo >> 4) & 0x3FFF) << 16) |
                        (uint64_t((c.sbo >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
  float d[64];
  for (int i = 0; i < 64; ++i) d[i] = 0.f;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
  wgmma_m64n128k16_tb(d, a, desc);
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
  store_d<kN2>(D, d, r0, q);
}

#define CHECK(expr)                                                                    \
  do {                                                                                 \
    const cudaError_t e_ = (expr);                                                     \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("%s: %s\n", #expr, cudaGetErrorString(e_));                          \
      return 2;                                                                        \
    }                                                                                  \
  } while (0)

}  // namespace

int main() {
  std::vector<float> A(kM * kK), B(kK * kN), ref(kM * kN, 0.f), D(kM * kN);
  uint32_t s = 12345u;
  const auto small = [&] { s = s * 1664525u + 1013904223u; return float(int((s >> 24) % 7) - 3); };
  for (float& x : A) x = small();
  for (float& x : B) x = small();
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n)
      for (int k = 0; k < kK; ++k) ref[m * kN + n] += A[m * kK + k] * B[k * kN + n];

  const Candidate candidates[] = {
      // K-major: the PTX text's reading (LBO along K, SBO along N) and the swapped one, for core
      // matrices packed along K first (K neighbours 128 B apart) and along N first
      {"K-major, K-packed, LBO=K SBO=N", 0, 128, 256, 128, 256},
      {"K-major, K-packed, LBO=N SBO=K", 0, 128, 256, 256, 128},
      {"K-major, N-packed, LBO=K SBO=N", 0, 1024, 128, 1024, 128},
      {"K-major, N-packed, LBO=N SBO=K", 0, 1024, 128, 128, 1024},
      // MN-major (imm-trans-b 1): the same four
      {"MN-major, K-packed, LBO=K SBO=N", 1, 128, 256, 128, 256},
      {"MN-major, K-packed, LBO=N SBO=K", 1, 128, 256, 256, 128},
      {"MN-major, N-packed, LBO=K SBO=N", 1, 1024, 128, 1024, 128},
      {"MN-major, N-packed, LBO=N SBO=K", 1, 1024, 128, 128, 1024},
  };
  float *dA, *dB, *dD;
  CHECK(cudaMalloc(&dA, A.size() * 4));
  CHECK(cudaMalloc(&dB, B.size() * 4));
  CHECK(cudaMalloc(&dD, D.size() * 4));
  CHECK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
  bool matched[2] = {false, false};
  for (const Candidate& c : candidates) {
    CHECK(cudaMemset(dD, 0xFF, D.size() * 4));  // NaN: every element must be written
    product_kernel<<<1, 128>>>(dA, dB, dD, c);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(D.data(), dD, D.size() * 4, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (size_t i = 0; i < D.size(); ++i) wrong += D[i] != ref[i];
    std::printf("%-36s %s (%d of %d elements differ)\n", c.name, wrong == 0 ? "MATCH" : "no", wrong, int(D.size()));
    matched[c.mn_major] |= wrong == 0;
  }
  std::printf("A from registers in the mma A layout, D in the m16n8 accumulator layout: %s\n",
              matched[0] || matched[1] ? "consistent (some candidate matches)" : "NOT confirmed (nothing matches)");

  // 128-byte swizzled MN-major, N = 128: which of LBO and SBO strides the k groups, which the
  // 64-column halves
  std::vector<float> B2(kK * kN2), ref2(kM * kN2, 0.f), D2(kM * kN2);
  for (float& x : B2) x = small();
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN2; ++n)
      for (int k = 0; k < kK; ++k) ref2[m * kN2 + n] += A[m * kK + k] * B2[k * kN2 + n];
  const SwizzledCandidate swizzled[] = {
      {"SW128 MN-major, k groups 1024, halves 2048, LBO=halves SBO=k", 1024, 2048, 2048, 1024},
      {"SW128 MN-major, k groups 1024, halves 2048, LBO=k SBO=halves", 1024, 2048, 1024, 2048},
      {"SW128 MN-major, k groups 2048, halves 1024, LBO=halves SBO=k", 2048, 1024, 1024, 2048},
      {"SW128 MN-major, k groups 2048, halves 1024, LBO=k SBO=halves", 2048, 1024, 2048, 1024},
  };
  float *dB2, *dD2;
  int* dMis;
  CHECK(cudaMalloc(&dB2, B2.size() * 4));
  CHECK(cudaMalloc(&dD2, D2.size() * 4));
  CHECK(cudaMalloc(&dMis, 4));
  CHECK(cudaMemcpy(dB2, B2.data(), B2.size() * 4, cudaMemcpyHostToDevice));
  bool swizzled_matched = false;
  for (const SwizzledCandidate& c : swizzled) {
    CHECK(cudaMemset(dD2, 0xFF, D2.size() * 4));
    swizzled_kernel<<<1, 128>>>(dA, dB2, dD2, c, dMis);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(D2.data(), dD2, D2.size() * 4, cudaMemcpyDeviceToHost));
    int mis = 0;
    CHECK(cudaMemcpy(&mis, dMis, 4, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (size_t i = 0; i < D2.size(); ++i) wrong += D2[i] != ref2[i];
    std::printf("%-62s %s (%d of %d elements differ; tile at %d mod 1024)\n", c.name, wrong == 0 ? "MATCH" : "no",
                wrong, int(D2.size()), mis);
    swizzled_matched |= wrong == 0;
  }
  return matched[0] && matched[1] && swizzled_matched ? 0 : 1;
}

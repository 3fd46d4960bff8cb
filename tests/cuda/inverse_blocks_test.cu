// The chunked kernels' 16 x 16 diagonal-block inverses, the device functions alone
// (chunked_steps.cuh): invert_diagonal_blocks_doubling, which forms X_bb = (I + L)^-1 as
// (I - L)(I + L^2)(I + L^4)(I + L^8) on f16 tensor-core products where every |L| <= 1 and by the
// f32 substitution elsewhere, one warp a block. Each of four blocks of one m takes another kind
// of L, so that both paths run side by side in one call, and each X_bb is compared with the f64
// inverse of the same (f32) L. Skips without a GPU of compute capability 8.0 or more.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/chunked_steps.cuh"

namespace {

using gdn::cuda::chunked::kC;
using gdn::cuda::chunked::kLdF;

struct Tiles {         // the kernels' m and X buffers
  float m[kC][kLdF];  // [C, C] strictly lower in each diagonal block
  float x[kC][kLdF];  // [C, C] X's diagonal blocks
};

// One CTA of four warps: m from `in`, X's diagonal blocks to `out` ([C, C], rows kC apart);
// in place: X over m in one buffer, as the warp-specialised fused kernel takes them.
__global__ void invert_blocks_kernel(const float* in, float* out, bool in_place) {
  __shared__ Tiles s;
  for (int i = threadIdx.x; i < kC * kC; i += blockDim.x) {
    s.m[i / kC][i % kC] = in[i];
    s.x[i / kC][i % kC] = 0.f;
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  struct InPlace {
    float (*m)[kLdF];
    float (*x)[kLdF];
  } one{s.m, s.m};
  if (in_place)
    gdn::cuda::chunked::invert_diagonal_blocks_doubling<true>(one, warp, lane);
  else
    gdn::cuda::chunked::invert_diagonal_blocks_doubling<false>(s, warp, lane);
  __syncthreads();
  for (int i = threadIdx.x; i < kC * kC; i += blockDim.x) out[i] = in_place ? s.m[i / kC][i % kC] : s.x[i / kC][i % kC];
}

bool have_gpu() {
  int n = 0, major = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess && major >= 8;
}

// The kinds of L: beta_i k_i . k_j of normalised keys (the kernels' m, the models' case), uniform
// in [-1, 1] (the products' range bound), uniform in [-2, 2] (the substitution), and the first
// kind with one NaN (the substitution, which carries it).
enum class Kind { kKeys, kUniform1, kUniform2, kKeysNaN };

void fill_block(std::vector<float>& m, int b, Kind kind, std::mt19937& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const int b0 = 16 * b;
  if (kind == Kind::kUniform1 || kind == Kind::kUniform2) {
    const double scale = kind == Kind::kUniform1 ? 1.0 : 2.0;
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < r; ++c) m[(b0 + r) * kC + b0 + c] = float(scale * u(rng));
    return;
  }
  std::vector<double> k(16 * 128), beta(16);
  for (int t = 0; t < 16; ++t) {
    double norm = 0;
    for (int i = 0; i < 128; ++i) norm += (k[t * 128 + i] = normal(rng)) * k[t * 128 + i];
    for (int i = 0; i < 128; ++i) k[t * 128 + i] /= std::sqrt(norm);
    beta[t] = 1 / (1 + std::exp(-normal(rng)));
  }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < r; ++c) {
      double dot = 0;
      for (int i = 0; i < 128; ++i) dot += k[r * 128 + i] * k[c * 128 + i];
      m[(b0 + r) * kC + b0 + c] = float(beta[r] * dot);
    }
  if (kind == Kind::kKeysNaN) m[(b0 + 9) * kC + b0 + 3] = std::nanf("");
}

// ||X - (I + L)^-1|| / ||(I + L)^-1|| over block b, the inverse by f64 forward substitution.
double block_error(const std::vector<float>& m, const std::vector<float>& x, int b) {
  const int b0 = 16 * b;
  double diff = 0, ref = 0;
  for (int c = 0; c < 16; ++c) {
    double y[16];
    for (int r = 0; r < 16; ++r) {
      y[r] = r == c ? 1.0 : 0.0;
      for (int j = 0; j < r; ++j) y[r] -= double(m[(b0 + r) * kC + b0 + j]) * y[j];
    }
    for (int r = 0; r < 16; ++r) {
      const double d = double(x[(b0 + r) * kC + b0 + c]) - y[r];
      diff += d * d;
      ref += y[r] * y[r];
    }
  }
  return std::sqrt(diff / ref);
}

std::vector<float> run(const std::vector<float>& m, bool in_place) {
  float *in = nullptr, *out = nullptr;
  const size_t bytes = m.size() * sizeof(float);
  EXPECT_EQ(cudaMalloc(&in, bytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&out, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(in, m.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  invert_blocks_kernel<<<1, 128>>>(in, out, in_place);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<float> x(m.size());
  EXPECT_EQ(cudaMemcpy(x.data(), out, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(in);
  cudaFree(out);
  return x;
}

TEST(InverseBlocks, DoublingAndSubstitutionMatchTheInverse) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device of compute capability 8.0 or more";
  // f64 emulation of the products' roundings over 200 draws of each kind (the thirty-third
  // session): at most 6e-5 for the keys' kind (500 draws), 9e-4 for uniform [-1, 1]; the f32 substitution
  // of uniform [-2, 2] at most 3.4e-7
  const Kind kinds[4] = {Kind::kKeys, Kind::kUniform1, Kind::kUniform2, Kind::kKeys};
  const double bound[4] = {2e-4, 3e-3, 1e-5, 2e-4};
  for (unsigned seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    std::vector<float> m(kC * kC, 0.f);
    for (int b = 0; b < 4; ++b) fill_block(m, b, kinds[(b + seed) % 4], rng);
    const std::vector<float> x = run(m, false), x_in_place = run(m, true);
    for (int b = 0; b < 4; ++b) {
      const int kind = int((b + seed) % 4);
      EXPECT_LE(block_error(m, x, b), bound[kind]) << "seed " << seed << ", block " << b << ", kind " << kind;
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) {
          const int i = (16 * b + r) * kC + 16 * b + c;
          ASSERT_EQ(std::memcmp(&x[i], &x_in_place[i], sizeof(float)), 0) << "in place differs: block " << b;
          if (c > r) ASSERT_EQ(x[i], 0.f) << "above the diagonal: block " << b;
        }
    }
  }
}

TEST(InverseBlocks, ANaNStaysInItsBlock) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device of compute capability 8.0 or more";
  std::mt19937 rng(11);
  std::vector<float> m(kC * kC, 0.f);
  const Kind kinds[4] = {Kind::kKeys, Kind::kKeysNaN, Kind::kUniform1, Kind::kKeys};
  for (int b = 0; b < 4; ++b) fill_block(m, b, kinds[b], rng);
  const std::vector<float> x = run(m, false);
  bool nan_in_block_1 = false;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) nan_in_block_1 |= std::isnan(x[(16 + r) * kC + 16 + c]);
  EXPECT_TRUE(nan_in_block_1);
  for (int b : {0, 2, 3}) EXPECT_LE(block_error(m, x, b), b == 2 ? 3e-3 : 2e-4) << "block " << b;
}

}  // namespace

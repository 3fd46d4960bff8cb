// The seed's known bug as a negative test. mlx-native 0.4.0's kernel and its own oracle took
// delta from the state *before* decay (SPEC.md, "Note on the original design"), so they agreed
// with each other and were both wrong. Here two small recurrences written apart from
// src/reference meet the oracle on a random case with decay: SPEC.md's decay-first order must
// agree with it, the seed's order must not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gdn/gdn.hpp"

namespace {

constexpr int64_t N = 2, T = 16, H = 2, K = 8, V = 8;  // Hk = Hv = H

// Realistic inputs (SPEC.md "Numerical targets"), f64, dense.
struct Inputs {
  std::vector<double> q, k, v, g, beta, h0;  // [N,T,H,K] x2, [N,T,H,V], [N,T,H] x2, [N,H,V,K]
};

Inputs draw(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Inputs in;
  for (int64_t i = 0; i < N * T * H * K; ++i) in.q.push_back(normal(rng));
  for (int64_t i = 0; i < N * T * H; ++i) {  // k: L2-normalised rows
    std::vector<double> row(K);
    double norm2 = 0;
    for (double& x : row) {
      x = normal(rng);
      norm2 += x * x;
    }
    for (double x : row) in.k.push_back(x / std::sqrt(norm2));
  }
  for (int64_t i = 0; i < N * T * H * V; ++i) in.v.push_back(normal(rng));
  for (int64_t i = 0; i < N * T * H; ++i) {
    in.g.push_back(-std::log1p(std::exp(-normal(rng))));  // logsigmoid(x)
    in.beta.push_back(1 / (1 + std::exp(-normal(rng))));  // sigmoid(x)
  }
  for (int64_t i = 0; i < N * H * V * K; ++i) in.h0.push_back(0.1 * normal(rng));
  return in;
}

enum class Order { kDecayFirst, kUndecayedDelta };

// The recurrence, vk state, block map (Hk = Hv), scale 1/sqrt(K): o is [N,T,H,V].
std::vector<double> recur(const Inputs& in, Order order) {
  const double scale = double(float(1 / std::sqrt(double(K))));  // the library's f32 scale
  std::vector<double> o(size_t(N * T * H * V));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> S(in.h0.begin() + (n * H + h) * V * K,
                            in.h0.begin() + (n * H + h + 1) * V * K);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = (n * T + t) * H + h;  // index of (n, t, h)
        const double* q = &in.q[size_t(row * K)];
        const double* k = &in.k[size_t(row * K)];
        const double* v = &in.v[size_t(row * V)];
        const double alpha = std::exp(in.g[size_t(row)]), beta = in.beta[size_t(row)];
        if (order == Order::kDecayFirst)
          for (double& s : S) s *= alpha;  // S = alpha S, then delta from it
        std::vector<double> delta(V);
        for (int64_t i = 0; i < V; ++i) {
          double Sk = 0;
          for (int64_t j = 0; j < K; ++j) Sk += S[size_t(i * K + j)] * k[j];
          delta[size_t(i)] = v[i] - Sk;
        }
        for (int64_t i = 0; i < V; ++i)
          for (int64_t j = 0; j < K; ++j) {
            double& s = S[size_t(i * K + j)];
            if (order == Order::kUndecayedDelta) s *= alpha;  // the seed: decay after delta
            s += beta * delta[size_t(i)] * k[j];
          }
        for (int64_t i = 0; i < V; ++i) {
          double Sq = 0;
          for (int64_t j = 0; j < K; ++j) Sq += S[size_t(i * K + j)] * q[j];
          o[size_t(row * V + i)] = scale * Sq;
        }
      }
    }
  return o;
}

double rel_l2(const std::vector<double>& x, const std::vector<double>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (x[i] - ref[i]) * (x[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff / norm);
}

std::vector<double> oracle(Inputs& in) {
  std::vector<double> o(size_t(N * T * H * V), NAN);
  gdn::ForwardArgs args;
  args.q = gdn::tensor(in.q.data(), GDN_DTYPE_F64, {N, T, H, K});
  args.k = gdn::tensor(in.k.data(), GDN_DTYPE_F64, {N, T, H, K});
  args.v = gdn::tensor(in.v.data(), GDN_DTYPE_F64, {N, T, H, V});
  args.g = gdn::tensor(in.g.data(), GDN_DTYPE_F64, {N, T, H});
  args.beta = gdn::tensor(in.beta.data(), GDN_DTYPE_F64, {N, T, H});
  args.initial_state = gdn::tensor(in.h0.data(), GDN_DTYPE_F64, {N, H, V, K});
  args.o = gdn::tensor(o.data(), GDN_DTYPE_F64, {N, T, H, V});
  args.backend = GDN_BACKEND_REFERENCE;
  gdn::forward(args);
  return o;
}

TEST(OracleSeedBug, DecayFirstAgreesAndUndecayedDeltaDoesNot) {
  Inputs in = draw(7);
  const std::vector<double> ref = oracle(in);
  const double decay_first = rel_l2(recur(in, Order::kDecayFirst), ref);
  const double undecayed = rel_l2(recur(in, Order::kUndecayedDelta), ref);
  EXPECT_LT(decay_first, 1e-12);
  EXPECT_GT(undecayed, 5e-2) << "the seed's order should be far off, not " << undecayed;
}

// Without decay (g = 0) the two orders coincide: the bug only shows when alpha < 1, which is
// why a test suite without decaying heads could not see it.
TEST(OracleSeedBug, OrdersCoincideWithoutDecay) {
  Inputs in = draw(8);
  for (double& g : in.g) g = 0;
  const std::vector<double> ref = oracle(in);
  EXPECT_LT(rel_l2(recur(in, Order::kDecayFirst), ref), 1e-12);
  EXPECT_LT(rel_l2(recur(in, Order::kUndecayedDelta), ref), 1e-12);
}

}  // namespace

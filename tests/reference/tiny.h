// Tiny hand-worked problems for the oracle: K = V = 2, T = 3, f64 host tensors, run through
// the C API on the reference backend and compared with values traced by hand in the tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "gdn/gdn.hpp"

namespace tiny {

// The base sequence, one row per token t = 0, 1, 2 (used by most tests):
//   q = (1,1) (1,0) (0,2)   k = (1,0) (0,1) (1,1)   v = (1,2) (3,1) (2,3)
//   g = 0, ln .5, ln .5  (alpha = 1, .5, .5)         beta = 1, .5, 1
// Its trace from S = 0 (S is V x K, rows v), scale 1:
//   t0: S = 1 S = 0;                Sk = (0,0);    delta = 1 ((1,2) - Sk) = (1,2)
//       S = [[1,0],[2,0]];          o = S (1,1) = (1,2)
//   t1: S = .5 S = [[.5,0],[1,0]];  Sk = (0,0);    delta = .5 ((3,1) - Sk) = (1.5,.5)
//       S = [[.5,1.5],[1,.5]];      o = S (1,0) = (.5,1)
//   t2: S = .5 S = [[.25,.75],[.5,.25]];  Sk = (1,.75);  delta = 1 ((2,3) - Sk) = (1,2.25)
//       S = [[1.25,1.75],[2.75,2.5]];     o = S (0,2) = (3.5,5)
inline const std::vector<double> kQ = {1, 1, 1, 0, 0, 2};                 // [T, K]
inline const std::vector<double> kK = {1, 0, 0, 1, 1, 1};                 // [T, K]
inline const std::vector<double> kV = {1, 2, 3, 1, 2, 3};                 // [T, V]
inline const std::vector<double> kG = {0, std::log(0.5), std::log(0.5)};  // [T]
inline const std::vector<double> kBeta = {1, 0.5, 1};                     // [T]
inline const std::vector<double> kOut = {1, 2, 0.5, 1, 3.5, 5};           // [T, V]
inline const std::vector<double> kFinal = {1.25, 1.75, 2.75, 2.5};        // [V, K]

// With the initial state S0 = [[0,2],[0,0]] instead of 0, the same tokens give
//   t0: S = S0;  Sk = S0 (1,0) = (0,0);  delta = (1,2);  S = [[1,2],[2,0]];  o = S (1,1) = (3,2)
//   t1: S = [[.5,1],[1,0]];  Sk = (1,0);  delta = .5 ((3,1) - (1,0)) = (1,.5)
//       S = [[.5,2],[1,.5]];  o = S (1,0) = (.5,1)
//   t2: S = [[.25,1],[.5,.25]];  Sk = (1.25,.75);  delta = (.75,2.25)
//       S = [[1,1.75],[2.75,2.5]];  o = S (0,2) = (3.5,5)
inline const std::vector<double> kS0 = {0, 2, 0, 0};  // [V, K]
inline const std::vector<double> kOutFromS0 = {3, 2, 0.5, 1, 3.5, 5};
inline const std::vector<double> kFinalFromS0 = {1, 1.75, 2.75, 2.5};

// `base` is [T, width]; the result is [T, H, width] with head h holding factor[h] * base.
inline std::vector<double> heads(const std::vector<double>& base, int64_t width,
                                 std::initializer_list<double> factor) {
  std::vector<double> out;
  for (size_t t = 0; t < base.size() / size_t(width); ++t)
    for (double f : factor)
      for (int64_t i = 0; i < width; ++i) out.push_back(f * base[t * size_t(width) + size_t(i)]);
  return out;
}

// [V, K] -> [K, V]
inline std::vector<double> transpose2(const std::vector<double>& s) {
  return {s[0], s[2], s[1], s[3]};
}

inline gdn_tensor f64(std::vector<double>& x, std::initializer_list<int64_t> shape) {
  return gdn::tensor(x.data(), GDN_DTYPE_F64, shape);
}

// One call's buffers, set to the base sequence: N = 1, Hk = Hv = 1, dense, scale 1, no
// states, outputs pre-filled with NaN. Tests change what they exercise (a test that replaces a
// vector points its tensor at it again), then run().
struct Call {
  std::vector<double> q = kQ, k = kK, v = kV, g = kG, beta = kBeta;
  std::vector<double> o = std::vector<double>(6, NAN);
  gdn::ForwardArgs args;

  Call() {
    args.q = f64(q, {1, 3, 1, 2});
    args.k = f64(k, {1, 3, 1, 2});
    args.v = f64(v, {1, 3, 1, 2});
    args.g = f64(g, {1, 3, 1});
    args.beta = f64(beta, {1, 3, 1});
    args.o = f64(o, {1, 3, 1, 2});
    args.scale = 1;
    args.backend = GDN_BACKEND_REFERENCE;
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  void run() { ASSERT_EQ(gdn_forward(&args), GDN_STATUS_SUCCESS) << gdn_last_error(); }
};

inline void expect_values(const std::vector<double>& got, const std::vector<double>& want,
                          double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at element " << i;
}

}  // namespace tiny

// The oracle against hand-worked tiny cases, one per option (values traced in tiny.h and below).
#include <cmath>
#include <cstdint>
#include <vector>

#include "reference/tiny.h"

namespace {

using tiny::Call;
using tiny::expect_values;
using tiny::f64;

std::vector<double> twice(const std::vector<double>& x) {
  std::vector<double> xx = x;
  xx.insert(xx.end(), x.begin(), x.end());
  return xx;
}

TEST(OracleHand, LogDecay) {
  Call c;
  std::vector<double> final_state(4, NAN);
  c.args.final_state = f64(final_state, {1, 1, 2, 2});
  c.run();
  expect_values(c.o, tiny::kOut);
  expect_values(final_state, tiny::kFinal);
}

TEST(OracleHand, InitialState) {
  Call c;
  std::vector<double> initial_state = tiny::kS0, final_state(4, NAN);
  c.args.initial_state = f64(initial_state, {1, 1, 2, 2});
  c.args.final_state = f64(final_state, {1, 1, 2, 2});
  c.run();
  expect_values(c.o, tiny::kOutFromS0);
  expect_values(final_state, tiny::kFinalFromS0);
}

// alpha = exp(-g): g = 0, ln 2, ln 2 gives the base's alpha = 1, .5, .5.
TEST(OracleHand, DecayRate) {
  Call c;
  c.g = {0, std::log(2.0), std::log(2.0)};
  c.args.g = f64(c.g, {1, 3, 1});
  c.args.gate = GDN_GATE_DECAY_RATE;
  c.run();
  expect_values(c.o, tiny::kOut);
}

// g = -exp(A_log) softplus(a + dt_bias) with A_log = ln .5, dt_bias = 1, a = (-41, ln3 - 1, ln3 -
// 1):
//   a + dt_bias = (-40, ln 3, ln 3);  softplus = (log1p(e^-40) ~ 4e-18, ln 4, ln 4)
//   g = -.5 softplus = (~ -2e-18, -ln 2, -ln 2);  alpha = (1, .5, .5): the base sequence.
TEST(OracleHand, RawGate) {
  Call c;
  std::vector<double> a = {-41, std::log(3.0) - 1, std::log(3.0) - 1};
  std::vector<double> A_log = {std::log(0.5)}, dt_bias = {1};
  c.args.gate = GDN_GATE_RAW;
  c.args.g = gdn_tensor{};
  c.args.a = f64(a, {1, 3, 1});
  c.args.A_log = f64(A_log, {1});
  c.args.dt_bias = f64(dt_bias, {1});
  c.run();
  expect_values(c.o, tiny::kOut);
}

// beta = sigmoid(b): b = (40, 0, 40) gives beta = (1 - 4e-18, .5, 1 - 4e-18): the base's.
TEST(OracleHand, BetaLogit) {
  Call c;
  c.beta = {40, 0, 40};
  c.args.beta = f64(c.beta, {1, 3, 1});
  c.args.beta_mode = GDN_BETA_LOGIT;
  c.run();
  expect_values(c.o, tiny::kOut);
}

// Hk = 1, Hv = 2: both value heads read key head 0 under either map. Value head 1 has v doubled;
// S is linear in v from S = 0, so its outputs are the base's doubled.
TEST(OracleHand, OneKeyHeadFeedsTwoValueHeads) {
  for (gdn_head_map map : {GDN_HEAD_MAP_BLOCK, GDN_HEAD_MAP_TILED}) {
    SCOPED_TRACE(map == GDN_HEAD_MAP_BLOCK ? "block" : "tiled");
    Call c;
    c.v = tiny::heads(tiny::kV, 2, {1, 2});  // [T, Hv, V]
    c.g = tiny::heads(tiny::kG, 1, {1, 1});  // [T, Hv]
    c.beta = tiny::heads(tiny::kBeta, 1, {1, 1});
    c.o.assign(12, NAN);
    c.args.v = f64(c.v, {1, 3, 2, 2});
    c.args.g = f64(c.g, {1, 3, 2});
    c.args.beta = f64(c.beta, {1, 3, 2});
    c.args.o = f64(c.o, {1, 3, 2, 2});
    c.args.head_map = map;
    c.run();
    expect_values(c.o, tiny::heads(tiny::kOut, 2, {1, 2}));
  }
}

// Hk = 2, Hv = 4: key head 0 has the base q, k; key head 1 has q = k = 0, so S stays 0 and the
// value heads it feeds output 0. block: j = h / 2 = (0, 0, 1, 1); tiled: j = h % 2 = (0, 1, 0, 1).
TEST(OracleHand, BlockAndTiledHeadMaps) {
  for (gdn_head_map map : {GDN_HEAD_MAP_BLOCK, GDN_HEAD_MAP_TILED}) {
    SCOPED_TRACE(map == GDN_HEAD_MAP_BLOCK ? "block" : "tiled");
    Call c;
    c.q = tiny::heads(tiny::kQ, 2, {1, 0});  // [T, Hk, K]
    c.k = tiny::heads(tiny::kK, 2, {1, 0});
    c.v = tiny::heads(tiny::kV, 2, {1, 1, 1, 1});  // [T, Hv, V]
    c.g = tiny::heads(tiny::kG, 1, {1, 1, 1, 1});
    c.beta = tiny::heads(tiny::kBeta, 1, {1, 1, 1, 1});
    c.o.assign(24, NAN);
    c.args.q = f64(c.q, {1, 3, 2, 2});
    c.args.k = f64(c.k, {1, 3, 2, 2});
    c.args.v = f64(c.v, {1, 3, 4, 2});
    c.args.g = f64(c.g, {1, 3, 4});
    c.args.beta = f64(c.beta, {1, 3, 4});
    c.args.o = f64(c.o, {1, 3, 4, 2});
    c.args.head_map = map;
    c.run();
    const auto want = map == GDN_HEAD_MAP_BLOCK ? tiny::heads(tiny::kOut, 2, {1, 1, 0, 0})
                                                : tiny::heads(tiny::kOut, 2, {1, 0, 1, 0});
    expect_values(c.o, want);
  }
}

// kv: element (k, v) of S at row k. S0 = [[0,2],[0,0]] (vk) is stored as [[0,0],[2,0]]; the final
// [[1,1.75],[2.75,2.5]] (vk) comes back as [[1,2.75],[1.75,2.5]].
TEST(OracleHand, KvStateLayout) {
  Call c;
  std::vector<double> initial_state = {0, 0, 2, 0}, final_state(4, NAN);
  c.args.initial_state = f64(initial_state, {1, 1, 2, 2});
  c.args.final_state = f64(final_state, {1, 1, 2, 2});
  c.args.state_layout = GDN_STATE_KV;
  c.run();
  expect_values(c.o, tiny::kOutFromS0);
  expect_values(final_state, {1, 2.75, 1.75, 2.5});
  EXPECT_EQ(tiny::transpose2(tiny::kFinalFromS0), final_state);
}

// qk_l2norm: x <- x / sqrt(sum x^2 + 1e-6). alpha = 1, beta = 1 throughout; raw vectors
//   k = (2,0) (0,3) (4,0) -> (1,0) (0,1) (1,0)   (to within 1.3e-7)
//   q = (5,0) (0,7) (1e-3,0) -> (1,0) (0,1) (1e-3/sqrt(1e-6 + 1e-6), 0) = (1/sqrt2, 0)
//   v = (1,2) (3,1) (2,3)
//   t0: delta = (1,2);  S = [[1,0],[2,0]];  o = S (1,0) = (1,2)
//   t1: Sk = (0,0);  delta = (3,1);  S = [[1,3],[2,1]];  o = S (0,1) = (3,1)
//   t2: Sk = (1,2);  delta = (1,1);  S = [[2,3],[3,1]];  o = S (1/sqrt2, 0) = (sqrt2, 3/sqrt2)
TEST(OracleHand, QkL2Norm) {
  Call c;
  c.q = {5, 0, 0, 7, 1e-3, 0};
  c.k = {2, 0, 0, 3, 4, 0};
  c.g = {0, 0, 0};
  c.beta = {1, 1, 1};
  c.args.q = f64(c.q, {1, 3, 1, 2});
  c.args.k = f64(c.k, {1, 3, 1, 2});
  c.args.g = f64(c.g, {1, 3, 1});
  c.args.beta = f64(c.beta, {1, 3, 1});
  std::vector<double> final_state(4, NAN);
  c.args.final_state = f64(final_state, {1, 1, 2, 2});
  c.args.qk_l2norm = 1;
  c.run();
  const double r2 = std::sqrt(2.0);
  expect_values(c.o, {1, 2, 3, 1, r2, 3 / r2}, 1e-6);
  expect_values(final_state, {2, 3, 3, 1}, 1e-6);
}

// o = scale * S q: scale .5 halves the base outputs; scale 0 means 1/sqrt(K) = 1/sqrt2.
TEST(OracleHand, Scale) {
  Call half;
  half.args.scale = 0.5f;
  half.run();
  std::vector<double> want;
  for (double x : tiny::kOut) want.push_back(0.5 * x);
  expect_values(half.o, want);

  Call fallback;
  fallback.args.scale = 0;
  fallback.run();
  want.clear();
  for (double x : tiny::kOut) want.push_back(x * double(float(1 / std::sqrt(2.0))));
  expect_values(fallback.o, want);
}

// Packed: the base tokens split as cu_seqlens = [0, 2, 2, 3]: sequence 0 = tokens 0, 1, sequence 1
// empty, sequence 2 = token 2 alone. Initial states: 0, S0, 0.
//   sequence 0: the base's t0, t1: o = (1,2) (.5,1); S = [[.5,1.5],[1,.5]]
//   sequence 1: no tokens, no outputs; final = initial = S0
//   sequence 2: from S = 0: alpha = .5, S = 0; delta = 1 ((2,3) - 0) = (2,3)
//               S = delta (1,1)^T = [[2,2],[3,3]];  o = S (0,2) = (4,6)
TEST(OracleHand, PackedWithEmptySequence) {
  Call c;
  std::vector<int32_t> cu_seqlens = {0, 2, 2, 3};
  std::vector<double> initial_state = {0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0};  // [N, Hv, V, K]
  std::vector<double> final_state(12, NAN);
  c.args.q = f64(c.q, {3, 1, 2});
  c.args.k = f64(c.k, {3, 1, 2});
  c.args.v = f64(c.v, {3, 1, 2});
  c.args.g = f64(c.g, {3, 1});
  c.args.beta = f64(c.beta, {3, 1});
  c.args.o = f64(c.o, {3, 1, 2});
  c.args.cu_seqlens = gdn::tensor(cu_seqlens.data(), GDN_DTYPE_I32, {4});
  c.args.initial_state = f64(initial_state, {3, 1, 2, 2});
  c.args.final_state = f64(final_state, {3, 1, 2, 2});
  c.run();
  expect_values(c.o, {1, 2, 0.5, 1, 4, 6});
  expect_values(final_state, {0.5, 1.5, 1, 0.5, /**/ 0, 2, 0, 0, /**/ 2, 2, 3, 3});
}

// A pool of P = 3 slots, state_indices = [2, -1]: sequence 0 (the base tokens) starts from slot 2
// = S0 and writes its final state there; sequence 1 is padding: outputs 0 (over the NaN they
// held), no state read or written. Slots 0 and 1 of the final pool keep their 99s.
TEST(OracleHand, PoolWithPaddingSlot) {
  Call c;
  c.q = twice(tiny::kQ);  // [N = 2, T, Hk, K]: the base tokens for both sequences
  c.k = twice(tiny::kK);
  c.v = twice(tiny::kV);
  c.g = twice(tiny::kG);
  c.beta = twice(tiny::kBeta);
  c.o.assign(12, NAN);
  std::vector<int32_t> state_indices = {2, -1};
  std::vector<double> initial_pool = {7, 7, 7, 7, 7, 7, 7, 7, 0, 2, 0, 0};  // [P, Hv, V, K]
  std::vector<double> final_pool(12, 99);
  c.args.q = f64(c.q, {2, 3, 1, 2});
  c.args.k = f64(c.k, {2, 3, 1, 2});
  c.args.v = f64(c.v, {2, 3, 1, 2});
  c.args.g = f64(c.g, {2, 3, 1});
  c.args.beta = f64(c.beta, {2, 3, 1});
  c.args.o = f64(c.o, {2, 3, 1, 2});
  c.args.state_indices = gdn::tensor(state_indices.data(), GDN_DTYPE_I32, {2});
  c.args.initial_state = f64(initial_pool, {3, 1, 2, 2});
  c.args.final_state = f64(final_pool, {3, 1, 2, 2});
  c.run();
  std::vector<double> want = tiny::kOutFromS0;
  want.insert(want.end(), 6, 0.0);
  expect_values(c.o, want);
  expect_values(final_pool, {99, 99, 99, 99, 99, 99, 99, 99, 1, 1.75, 2.75, 2.5});
  expect_values(initial_pool, {7, 7, 7, 7, 7, 7, 7, 7, 0, 2, 0, 0});
}

// final_state is initial_state (in place), pooled: slot 1 of 2 goes from S0 to its final value;
// slot 0 is not addressed and stays.
TEST(OracleHand, InPlaceFinalState) {
  Call c;
  std::vector<int32_t> state_indices = {1};
  std::vector<double> pool = {5, 6, 7, 8, 0, 2, 0, 0};  // [P = 2, Hv, V, K]
  c.args.state_indices = gdn::tensor(state_indices.data(), GDN_DTYPE_I32, {1});
  c.args.initial_state = f64(pool, {2, 1, 2, 2});
  c.args.final_state = c.args.initial_state;
  c.run();
  expect_values(c.o, tiny::kOutFromS0);
  expect_values(pool, {5, 6, 7, 8, 1, 1.75, 2.75, 2.5});
}

// Dense snapshots [N, T, Hv, V, K]: the state after each token of the base trace.
TEST(OracleHand, DenseSnapshots) {
  Call c;
  std::vector<double> snapshots(12, NAN);
  c.args.state_snapshots = f64(snapshots, {1, 3, 1, 2, 2});
  c.run();
  expect_values(snapshots, {1, 0, 2, 0, /**/ 0.5, 1.5, 1, 0.5, /**/ 1.25, 1.75, 2.75, 2.5});
}

// Pooled snapshots: snapshot_indices [N, T] = [3, -1, 0] stores the state after token 0 in slot 3
// and after token 2 in slot 0; token 1 is not stored; slots 1 and 2 keep their 99s.
TEST(OracleHand, PooledSnapshots) {
  Call c;
  std::vector<int32_t> snapshot_indices = {3, -1, 0};
  std::vector<double> pool(16, 99);  // [P2 = 4, Hv, V, K]
  c.args.snapshot_indices = gdn::tensor(snapshot_indices.data(), GDN_DTYPE_I32, {1, 3});
  c.args.state_snapshots = f64(pool, {4, 1, 2, 2});
  c.run();
  expect_values(pool,
                {1.25, 1.75, 2.75, 2.5, /**/ 99, 99, 99, 99, /**/ 99, 99, 99, 99, /**/ 1, 0, 2, 0});
}

}  // namespace

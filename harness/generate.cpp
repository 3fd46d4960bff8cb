// generate(): SPEC.md's realistic inputs for a case, drawn in f64 and rounded to its dtypes,
// and its output buffers filled with poison.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>

#include "case_rules.h"
#include "harness.h"
#include "random.h"
#include "tensor_roles.h"

namespace gdn::harness {
namespace {

// One random stream per tensor, so that changing one tensor's shape leaves the others alone.
enum Stream : uint64_t { kSq = 1, kSk, kSv, kSg, kSbeta, kSa, kSALog, kSDtBias, kSState };

// Gap added to every stride but the last one's in strided cases (elements; keeps 16-byte rows).
constexpr int64_t kStrideGap = 8;
// Standard deviation of the initial state: the size of a state after a few hundred tokens of
// unit-norm keys and decays near SPEC.md's.
constexpr double kStateStd = 0.1;

HostTensor make(const Case& c, gdn_dtype dtype, std::vector<int64_t> shape) {
  std::vector<int64_t> strides;
  if (c.strided && shape.size() > 1) {
    strides.assign(shape.size(), 1);
    for (size_t d = shape.size() - 1; d-- > 0;)
      strides[d] = strides[d + 1] * shape[d + 1] + kStrideGap;
  }
  return HostTensor(dtype, std::move(shape), std::move(strides));
}

// Fills t row by row (a row = the last dimension): row(r, out) writes the row's values in f64,
// which are then rounded to t's dtype. Rows are independent, so they are drawn in parallel.
void fill_rows(HostTensor& t, const std::function<void(int64_t, double*)>& row) {
  const int64_t n = t.shape().empty() ? 1 : t.shape().back();
  const int64_t rows = n == 0 ? 0 : t.numel() / n;
  // threads only pay off for large tensors (benchmark cases); small ones are drawn serially
#pragma omp parallel if (t.numel() > (int64_t{1} << 20))
  {
    std::vector<double> values(size_t(std::max<int64_t>(n, 1)));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      row(r, values.data());
      t.set_row(r, values.data());
    }
  }
}

// Rows of i.i.d. std * N(0, 1) draws.
void fill_normal(HostTensor& t, uint64_t seed, Stream s, double std = 1.0) {
  const Random rng(seed, s);
  const int64_t n = t.shape().back();
  fill_rows(t, [&](int64_t r, double* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = std * rng.normal(uint64_t(r * n + i));
  });
}

double logsigmoid(double x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

enum class Decay { kNormal, kNone, kFast, kSlow };

// The decay regime of value head h: decay=mixed cycles through normal, none and fast.
Decay regime(const Case& c, int64_t h) {
  if (c.decay == "none") return Decay::kNone;
  if (c.decay == "fast") return Decay::kFast;
  if (c.decay == "slow") return Decay::kSlow;
  if (c.decay == "mixed")
    return h % 3 == 0 ? Decay::kNormal : h % 3 == 1 ? Decay::kNone : Decay::kFast;
  return Decay::kNormal;
}

// log-decay g <= 0 of draw z in regime d: logsigmoid(z), 0, about -20, or about -0.1.
double log_decay(Decay d, double z) {
  switch (d) {
    case Decay::kNone: return 0.0;
    case Decay::kFast: return -20.0 + 0.5 * z;
    case Decay::kSlow: return std::min(0.0, -0.1 + 0.025 * z);
    default: return logsigmoid(z);
  }
}

std::vector<int64_t> sequence_lengths(const Case& c, std::mt19937_64& rng) {
  if (!c.seqlens.empty()) return c.seqlens;
  std::vector<int64_t> lens(size_t(c.N), c.T);
  if (!c.packed) return lens;
  // uniform in [1, 2T - 1] (mean T), and one empty sequence once there are three
  std::uniform_int_distribution<int64_t> len(1, 2 * c.T - 1);
  for (auto& l : lens) l = len(rng);
  if (c.N >= 3) lens[size_t(rng() % uint64_t(c.N))] = 0;
  return lens;
}

// The state slot of each sequence: n for dense states; for a pool, `pad` random entries -1 and
// the others distinct random slots of [0, P) (P >= N - pad: the pool may be smaller than N).
std::vector<int32_t> state_slots(const Case& c, std::mt19937_64& rng) {
  std::vector<int32_t> slot(size_t(c.N));
  std::iota(slot.begin(), slot.end(), 0);
  if (c.pool == 0) return slot;
  std::vector<int32_t> all(size_t(c.pool));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<size_t> order(size_t(c.N));
  std::iota(order.begin(), order.end(), size_t(0));
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<bool> padding(size_t(c.N), false);
  for (int64_t i = 0; i < c.pad; ++i) padding[order[size_t(i)]] = true;
  size_t next = 0;  // live entries take the shuffled slots in turn
  for (size_t n = 0; n < slot.size(); ++n) slot[n] = padding[n] ? -1 : all[next++];
  return slot;
}

}  // namespace

GeneratedInputs generate(const Case& case_) {
  check_case(case_);
  GeneratedInputs in;
  in.c = case_;
  Case& c = in.c;
  std::mt19937_64 plan(c.seed);  // the batch's structure: lengths and slots

  const std::vector<int64_t> lens = sequence_lengths(c, plan);
  if (c.packed) c.seqlens = lens;
  in.bos.assign(size_t(c.N + 1), 0);
  for (int64_t n = 0; n < c.N; ++n) in.bos[size_t(n + 1)] = in.bos[size_t(n)] + lens[size_t(n)];
  in.T_total = in.bos.back();
  in.slot = state_slots(c, plan);
  in.state_slots = c.pool > 0 ? c.pool : c.N;

  // leading dimensions of per-token tensors: [N, T] dense, [T_total] packed
  const std::vector<int64_t> tokens =
      c.packed ? std::vector<int64_t>{in.T_total} : std::vector<int64_t>{c.N, c.T};
  auto per_token = [&](std::vector<int64_t> inner) {
    std::vector<int64_t> shape = tokens;
    shape.insert(shape.end(), inner.begin(), inner.end());
    return shape;
  };
  const bool vk = c.layout == GDN_STATE_VK;
  const int64_t R = vk ? c.V : c.K, C = vk ? c.K : c.V;  // state rows, columns

  // q ~ N(0, 1); k L2-normalised per head, or raw N(0, 1) when the kernel normalises (l2norm)
  in.q = make(c, c.dtype, per_token({c.Hk, c.K}));
  fill_normal(in.q, c.seed, kSq);
  in.k = make(c, c.dtype, per_token({c.Hk, c.K}));
  {
    const Random rng(c.seed, kSk);
    fill_rows(in.k, [&](int64_t r, double* out) {
      double sum = 0;
      for (int64_t i = 0; i < c.K; ++i) {
        out[i] = rng.normal(uint64_t(r * c.K + i));
        sum += out[i] * out[i];
      }
      if (!c.l2norm)
        for (int64_t i = 0; i < c.K; ++i) out[i] /= std::sqrt(sum);
    });
  }
  in.v = make(c, c.dtype, per_token({c.Hv, c.V}));
  fill_normal(in.v, c.seed, kSv);

  // gates, per value head in its decay regime
  const Random rg(c.seed, kSg), ra(c.seed, kSa);
  if (c.gate == GDN_GATE_RAW) {
    // g = -exp(A_log) softplus(a + dt_bias): A_log ~ U(-1, 1), dt_bias ~ N(0, 0.5), a ~ N(0, 1);
    // no decay: a near -60 (softplus ~ 1e-26); fast: A = 1 and a + dt_bias above softplus's
    // threshold 20, so that both of its branches run; slow: a near -2.5 (g about -0.03 to -0.2).
    in.A_log = make(c, c.gate_dtype, {c.Hv});
    in.dt_bias = make(c, c.gate_dtype, {c.Hv});
    const Random rl(c.seed, kSALog), rb(c.seed, kSDtBias);
    fill_rows(in.A_log, [&](int64_t, double* out) {
      for (int64_t h = 0; h < c.Hv; ++h)
        out[h] = regime(c, h) == Decay::kFast ? 0.0 : 2.0 * rl.uniform(uint64_t(h)) - 1.0;
    });
    fill_rows(in.dt_bias, [&](int64_t, double* out) {
      for (int64_t h = 0; h < c.Hv; ++h) out[h] = 0.5 * rb.normal(uint64_t(h));
    });
    in.a = make(c, c.gate_dtype, per_token({c.Hv}));
    fill_rows(in.a, [&](int64_t r, double* out) {
      for (int64_t h = 0; h < c.Hv; ++h) {
        const double z = ra.normal(uint64_t(r * c.Hv + h));
        switch (regime(c, h)) {
          case Decay::kNone: out[h] = -60.0 + z; break;
          case Decay::kFast: out[h] = 20.0 + std::abs(z); break;
          case Decay::kSlow: out[h] = -2.5 + 0.2 * z; break;
          default: out[h] = z;
        }
      }
    });
  } else {
    // log_decay: g = log-decay <= 0; decay_rate: g = -log-decay >= 0
    const double sign = c.gate == GDN_GATE_LOG_DECAY ? 1.0 : -1.0;
    in.g = make(c, c.gate_dtype, per_token({c.Hv}));
    fill_rows(in.g, [&](int64_t r, double* out) {
      for (int64_t h = 0; h < c.Hv; ++h)
        out[h] = sign * log_decay(regime(c, h), rg.normal(uint64_t(r * c.Hv + h))) + 0.0;
    });
  }
  // beta = sigmoid(z) (prob), or the logit z itself
  in.beta = make(c, c.gate_dtype, per_token({c.Hv}));
  {
    const Random rng(c.seed, kSbeta);
    fill_rows(in.beta, [&](int64_t r, double* out) {
      for (int64_t h = 0; h < c.Hv; ++h) {
        const double z = rng.normal(uint64_t(r * c.Hv + h));
        out[h] = c.beta == GDN_BETA_PROB ? sigmoid(z) : z;
      }
    });
  }

  // states: [N | P, Hv, R, C], every slot drawn (slots no sequence addresses must survive)
  const std::vector<int64_t> state_shape = {in.state_slots, c.Hv, R, C};
  if (c.initial_state) {
    in.initial_state = make(c, c.state_dtype, state_shape);
    fill_normal(in.initial_state, c.seed, kSState, kStateStd);
  }
  if (c.final_state && !c.in_place) in.final_state = make(c, c.state_dtype, state_shape);

  // indices
  if (c.packed) {
    const gdn_dtype idx = c.cu_seqlens_i64 ? GDN_DTYPE_I64 : GDN_DTYPE_I32;
    in.cu_seqlens = HostTensor(idx, {c.N + 1});
    for (int64_t n = 0; n <= c.N; ++n) in.cu_seqlens.set(n, double(in.bos[size_t(n)]));
  }
  if (c.pool > 0) {
    in.state_indices = HostTensor(GDN_DTYPE_I32, {c.N});
    for (int64_t n = 0; n < c.N; ++n) in.state_indices.set(n, in.slot[size_t(n)]);
  }

  // outputs
  in.o = make(c, c.dtype, per_token({c.Hv, c.V}));
  if (c.snapshots) in.snapshots = make(c, c.state_dtype, per_token({c.Hv, R, C}));
  if (c.snapshot_pool) {
    // a pool with a few more slots than the tokens that store a state; each such token a
    // distinct random slot, or -1 (not stored) for about a quarter of them. With checkpoints
    // only the checkpoint tokens store one (the pool stays small for long sequences); the
    // others' indices are -1 (checked, never used: the dense checkpoint cases show that no
    // other token's state is stored).
    const int64_t every = c.ckpt * GDN_CHECKPOINT_TOKENS;  // 0: every token stores
    const auto stores = [&](int64_t i) {  // token i of the batch's token axis
      if (every == 0) return true;
      const int64_t n = std::upper_bound(in.bos.begin(), in.bos.end(), i) - in.bos.begin() - 1;
      return (i - in.bos[size_t(n)] + 1) % every == 0;
    };
    int64_t storing = 0;
    for (int64_t i = 0; i < in.T_total; ++i) storing += stores(i);
    in.snapshot_slots = storing + 3;
    in.snapshots = make(c, c.state_dtype, {in.snapshot_slots, c.Hv, R, C});
    in.snapshot_indices = make(c, GDN_DTYPE_I32, tokens);
    std::vector<int32_t> perm(size_t(in.snapshot_slots));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), plan);
    for (int64_t i = 0, next = 0; i < in.T_total; ++i)
      in.snapshot_indices.set(i, !stores(i) || plan() % 4 == 0 ? -1 : perm[size_t(next++)]);
  }
  for (int r = 0; r < kRoleCount; ++r) {
    if (r != kInitialState && written_by_call(in, Role(r)) && tensor_of(in, Role(r)).present())
      tensor_of(in, Role(r)).fill_poison();
  }
  return in;
}

}  // namespace gdn::harness

// check_outputs(): what a backend wrote, against the oracle and against what must not change.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/dtype.h"
#include "harness.h"

namespace gdn::harness {
namespace {

// What a row (the last dimension) of an output must hold after the call.
enum class Expect : uint8_t {
  kUnchanged,  // byte-identical to before (unaddressed pool slots, stride gaps)
  kZero,       // exactly zero (outputs of padding sequences)
  kValue,      // written: compared with the oracle when it has the row (ref >= 0)
};

struct RowRule {
  Expect expect = Expect::kUnchanged;
  int64_t ref = -1;  // first element of the oracle's row, -1: head not sampled
};

struct Sums {
  double diff = 0, ref = 0, out = 0;
  double rel() const { return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(out); }
};

std::string coords(const std::vector<int64_t>& shape, int64_t index) {
  std::string s;
  for (size_t d = shape.size(); d-- > 0;) {
    s = std::to_string(index % shape[d]) + (s.empty() ? "" : ", ") + s;
    index /= shape[d];
  }
  return "[" + s + "]";
}

// Checks one output: `rule(row)` for each row of its logical shape, the rest of its storage
// unchanged. Returns the relative L2 error over the compared rows; fills the flags of `e`.
// Rows are checked in parallel for large tensors (benchmark cases); a problem found is
// reported under a lock, so `e.detail` names one of them.
double check_tensor(const char* name, const HostTensor& before, const HostTensor& after,
                    const HostTensor* ref, const std::function<RowRule(int64_t)>& rule, Errors& e) {
  auto problem = [&](bool& flag, const std::string& what) {
#pragma omp critical(gdn_harness_check_problem)
    {
      if (e.detail.empty()) e.detail = std::string(name) + ": " + what;
      flag = false;
    }
  };
  const int64_t size = dtype_size(after.dtype());
  const uint64_t poison = poison_bits(after.dtype());
  const char* a = static_cast<const char*>(after.data());
  const char* b = static_cast<const char*>(before.data());
  const int64_t n = after.shape().back();
  const int64_t rows = after.numel() / n;
  const int64_t storage = after.storage_elements();
  std::vector<uint8_t> covered(size_t(storage), 0);  // bytes, not bits: written concurrently
  double diff = 0, ref_sq = 0, out_sq = 0;
#pragma omp parallel for schedule(static) reduction(+ : diff, ref_sq, out_sq) if (rows * n > (int64_t{1} << 20))
  for (int64_t row = 0; row < rows; ++row) {
    const RowRule r = rule(row);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = after.offset(row * n + i);
      covered[size_t(at)] = 1;
      const char* pa = a + at * size;
      if (r.expect == Expect::kUnchanged) {
        if (std::memcmp(pa, b + at * size, size_t(size)) != 0)
          problem(e.untouched_ok, "changed at " + coords(after.shape(), row * n + i) +
                                      ", which the call must not write");
        continue;
      }
      uint64_t bits = 0;
      std::memcpy(&bits, pa, size_t(size));
      if (bits == poison) {
        problem(e.all_written, "not written at " + coords(after.shape(), row * n + i));
        continue;
      }
      const double x = after.get(row * n + i);
      if (!std::isfinite(x)) {
        problem(e.finite, "not finite at " + coords(after.shape(), row * n + i));
        continue;
      }
      if (r.expect == Expect::kZero) {
        if (x != 0)
          problem(e.untouched_ok,
                  "padding output not zero at " + coords(after.shape(), row * n + i));
        continue;
      }
      out_sq += x * x;
      if (r.ref >= 0) {
        const double y = ref->get(r.ref + i);
        diff += (x - y) * (x - y);
        ref_sq += y * y;
      }
    }
  }
#pragma omp parallel for schedule(static) if (storage > (int64_t{1} << 20))
  for (int64_t at = 0; at < storage; ++at) {
    if (!covered[size_t(at)] && std::memcmp(a + at * size, b + at * size, size_t(size)) != 0)
      problem(e.untouched_ok, "stride gap changed at storage element " + std::to_string(at));
  }
  Sums sums;
  sums.diff = diff;
  sums.ref = ref_sq;
  sums.out = out_sq;
  return sums.rel();
}

}  // namespace

bool Errors::pass(const Tolerance& t) const {
  return all_written && untouched_ok && finite && o <= t.o && final_state <= t.state &&
         snapshots <= t.state;
}

double rel_l2(const double* x, const double* ref, int64_t n) {
  Sums s;
  for (int64_t i = 0; i < n; ++i) {
    s.diff += (x[i] - ref[i]) * (x[i] - ref[i]);
    s.ref += ref[i] * ref[i];
    s.out += x[i] * x[i];
  }
  return s.rel();
}

Errors check_outputs(const GeneratedInputs& before, const GeneratedInputs& after,
                     const OracleOutputs& oracle) {
  const Case& c = before.c;
  const int64_t heads = oracle.heads;
  const bool vk = c.layout == GDN_STATE_VK;
  const int64_t R = vk ? c.V : c.K;
  // sequence of the token at position p of [N, T] (dense) or [T_total] (packed)
  auto sequence_of = [&](int64_t p) {
    if (!c.packed) return p / c.T;
    return int64_t(std::upper_bound(before.bos.begin(), before.bos.end(), p) - before.bos.begin()) -
           1;
  };
  const int64_t C = vk ? c.K : c.V;
  // whether the state after the token at position p is a snapshot (ckpt: only every 64 ckpt
  // tokens from its sequence's start)
  auto snapshot_after = [&](int64_t p) {
    if (c.ckpt == 0) return true;
    const int64_t t = c.packed ? p - before.bos[size_t(sequence_of(p))] : p % c.T;
    return (t + 1) % (c.ckpt * GDN_CHECKPOINT_TOKENS) == 0;
  };
  // per-token outputs: rows (p, h, r) of `width` elements, `inner` rows per head (o: 1); a
  // padding sequence's rows are zero (o) or untouched (snapshots: states are not written)
  auto per_token = [&](int64_t inner, int64_t width, Expect padding) {
    return [&, inner, width, padding](int64_t row) {
      const int64_t p = row / (c.Hv * inner), h = row / inner % c.Hv, r = row % inner;
      if (before.slot[size_t(sequence_of(p))] < 0) return RowRule{padding, -1};
      return RowRule{Expect::kValue, h < heads ? ((p * heads + h) * inner + r) * width : -1};
    };
  };
  // pooled or dense states: rows (slot, h, r); live slots compared
  auto per_slot = [&](const std::vector<bool>& live) {
    return [&, live](int64_t row) {
      const int64_t s = row / (c.Hv * R), h = row / R % c.Hv, r = row % R;
      if (!live[size_t(s)]) return RowRule{Expect::kUnchanged, -1};
      return RowRule{Expect::kValue, h < heads ? ((s * heads + h) * R + r) * C : -1};
    };
  };

  Errors e;
  e.o = check_tensor("o", before.o, after.o, &oracle.o, per_token(1, c.V, Expect::kZero), e);
  if (const HostTensor* fs = after.final_state_out()) {
    std::vector<bool> live(size_t(before.state_slots), false);
    for (int32_t s : before.slot)
      if (s >= 0) live[size_t(s)] = true;
    e.final_state = check_tensor("final_state", *before.final_state_out(), *fs, &oracle.final_state,
                                 per_slot(live), e);
  }
  if (c.snapshots) {
    const auto all_tokens = per_token(R, C, Expect::kUnchanged);
    const auto rule = [&, all_tokens](int64_t row) {
      return snapshot_after(row / (c.Hv * R)) ? all_tokens(row) : RowRule{Expect::kUnchanged, -1};
    };
    e.snapshots = check_tensor("state_snapshots", before.snapshots, after.snapshots, &oracle.snapshots, rule, e);
  }
  if (c.snapshot_pool) {
    // slots addressed by a token of a live sequence; a padding sequence stores no state
    std::vector<bool> live(size_t(before.snapshot_slots), false);
    for (int64_t p = 0; p < before.T_total; ++p) {
      const int64_t s = int64_t(before.snapshot_indices.get(p));
      const int64_t n = c.packed ? sequence_of(p) : p / c.T;
      if (s >= 0 && before.slot[size_t(n)] >= 0 && snapshot_after(p)) live[size_t(s)] = true;
    }
    e.snapshots = check_tensor("state_snapshots", before.snapshots, after.snapshots,
                               &oracle.snapshots, per_slot(live), e);
  }
  return e;
}

}  // namespace gdn::harness

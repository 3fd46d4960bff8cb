// gdn demo: the job the library is for. A Qwen3.5-shaped gated delta layer (Hk = 16, Hv = 32,
// K = V = 128; bf16 q, k, v; f32 gates and state) serves a packed batch: the prompts are
// prefilled into a state pool (one entry is padding, one slot belongs to another request), then
// decode steps update the pool in place. Each phase is checked against the f64 oracle on sampled
// value heads, which runs on strided one-head views (Hk = Hv = 1) of the very same inputs.
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

#include "commands.h"
#include "core/dtype.h"
#include "core/names.h"
#include "device.h"
#include "gdn/gdn.hpp"
#include "harness/harness.h"
#include "text.h"

namespace gdn::tool {
namespace {

using harness::HostTensor;

constexpr int64_t kHk = 16, kHv = 32, kK = 128, kV = 128, kRatio = kHv / kHk;
// The same as a harness case string (its inputs are SPEC.md's distributions).
const std::string kLayer = "Hk=16,Hv=32,K=128,V=128,dtype=bf16,gdtype=f32,sdtype=f32";
// The batch: entry 2 is padding (state index -1); pool slot 2 belongs to another request.
const std::vector<int32_t> kSlots = {3, 0, -1, 4, 1};
constexpr int64_t kPoolSlots = 5, kUntouchedSlot = 2, kPaddingEntry = 2;
// Value heads the oracle checks, fed by different key heads (block map: j = h / 2).
const std::vector<int64_t> kSampledHeads = {5, 26};

struct DemoSize {
  std::vector<int64_t> prompt_lengths;  // per entry, the padding entry's included
  int64_t decode_steps;
};

DemoSize demo_size(gdn_backend backend, bool quick) {
  if (quick) return {{96, 64, 8, 128, 80}, 8};
  if (backend == GDN_BACKEND_CUDA) return {{3217, 2048, 16, 4000, 2731}, 32};
  return {{512, 448, 16, 512, 384}, 32};  // well under a minute on 2 cores
}

// The prompts: a packed batch; its pool's initial contents are the other request's state.
std::string prompts_case(const std::vector<int64_t>& lengths) {
  std::string text = kLayer + ",seed=7,pool=" + std::to_string(kPoolSlots) + ",seqlens=";
  for (size_t i = 0; i < lengths.size(); ++i) text += (i ? ":" : "") + std::to_string(lengths[i]);
  return text;
}

// The decode tokens: one dense batch [entries, steps, ...], one step sliced per call.
std::string steps_case(int64_t steps) {
  return kLayer + ",seed=8,h0=0,ht=0,N=" + std::to_string(kSlots.size()) + ",T=" + std::to_string(steps);
}

// Descriptor `t` narrowed to index `at` of dimension `dim` (kept, with size 1).
gdn_tensor pick(gdn_tensor t, int dim, int64_t at) {
  t.data = static_cast<char*>(t.data) + at * t.strides[dim] * dtype_size(t.dtype);
  t.shape[dim] = 1;
  return t;
}

HostTensor f64_zeros(std::vector<int64_t> shape) {
  HostTensor t(GDN_DTYPE_F64, std::move(shape));
  std::memset(t.data(), 0, t.bytes());
  return t;
}

// Pairs of (ours, oracle) values, gathered over heads; their relative L2 error.
struct Comparison {
  std::vector<double> ours, oracle;
  void add(double x, double ref) {
    ours.push_back(x);
    oracle.push_back(ref);
  }
  double rel() const { return harness::rel_l2(ours.data(), oracle.data(), int64_t(ours.size())); }
};

struct PhaseResult {
  double ms = 0;
  int64_t tokens = 0;
  Comparison o, state;
};

class Demo {
 public:
  Demo(gdn_backend backend, const DemoSize& size)
      : backend_(backend),
        size_(size),
        place_(backend),
        prompts_(harness::generate(harness::parse_case(prompts_case(size.prompt_lengths)))),
        steps_(harness::generate(harness::parse_case(steps_case(size.decode_steps)))),
        slots_(GDN_DTYPE_I32, {int64_t(kSlots.size())}),
        pool_initial_(prompts_.initial_state),
        pool_host_(pool_initial_),
        pool_(place_.input(pool_host_)) {
    std::memcpy(slots_.data(), kSlots.data(), kSlots.size() * sizeof(int32_t));
    placed_slots_ = place_.input(slots_);
  }

  const harness::GeneratedInputs& prompts() const { return prompts_; }
  const HostTensor& pool_initial() const { return pool_initial_; }

  // Prompts into the pool (no initial state): ours timed, then the oracle on the sampled heads.
  PhaseResult prefill(HostTensor& o, HostTensor& pool_after) {
    ForwardArgs a = base_args();
    a.q = place_.input(prompts_.q);
    a.k = place_.input(prompts_.k);
    a.v = place_.input(prompts_.v);
    a.g = place_.input(prompts_.g);
    a.beta = place_.input(prompts_.beta);
    a.cu_seqlens = place_.input(prompts_.cu_seqlens);
    a.state_indices = placed_slots_;
    a.o = place_.output(o);
    a.final_state = pool_;
    a.workspace_bytes = workspace_size(a);
    a.workspace = place_.workspace(a.workspace_bytes);
    if (place_.on_device()) {  // first-launch costs out of the timed call; the pool restored
      forward(a);
      place_.refill(pool_, pool_initial_);
    }
    PhaseResult r;
    r.ms = timed([&] { forward(a); });
    r.tokens = live_tokens();
    place_.fetch(a.o, o);
    place_.fetch(pool_, pool_after);

    for (int64_t h : kSampledHeads) {
      const int64_t j = h / kRatio;  // block map
      ForwardArgs ref = oracle_args();
      ref.q = pick(prompts_.q.view(), 1, j);
      ref.k = pick(prompts_.k.view(), 1, j);
      ref.v = pick(prompts_.v.view(), 1, h);
      ref.g = pick(prompts_.g.view(), 1, h);
      ref.beta = pick(prompts_.beta.view(), 1, h);
      ref.cu_seqlens = prompts_.cu_seqlens.view();
      HostTensor o_ref = f64_zeros({prompts_.T_total, 1, kV});
      oracle_pool_[h] = f64_zeros({kPoolSlots, 1, kV, kK});
      ref.o = o_ref.view();
      ref.final_state = oracle_pool_[h].view();
      forward(ref);
      for (int64_t t = 0; t < prompts_.T_total; ++t)
        for (int64_t i = 0; i < kV; ++i) r.o.add(o.get((t * kHv + h) * kV + i), o_ref.get(t * kV + i));
      compare_states(pool_after, h, r.state);
    }
    return r;
  }

  // Decode steps, each a dense batch of one token per entry, the pool updated in place.
  PhaseResult decode(HostTensor& o, HostTensor& pool_after) {
    const gdn_tensor q = place_.input(steps_.q), k = place_.input(steps_.k), v = place_.input(steps_.v),
                     g = place_.input(steps_.g), beta = place_.input(steps_.beta), out = place_.output(o);
    std::vector<ForwardArgs> calls(size_t(size_.decode_steps));
    for (int64_t s = 0; s < size_.decode_steps; ++s) {
      ForwardArgs& a = calls[size_t(s)] = base_args();
      a.q = pick(q, 1, s);
      a.k = pick(k, 1, s);
      a.v = pick(v, 1, s);
      a.g = pick(g, 1, s);
      a.beta = pick(beta, 1, s);
      a.o = pick(out, 1, s);
      a.state_indices = placed_slots_;
      a.initial_state = a.final_state = pool_;
    }
    const size_t workspace_bytes = workspace_size(calls.front());  // every step's shapes are the same
    void* workspace = place_.workspace(workspace_bytes);
    for (ForwardArgs& a : calls) {
      a.workspace = workspace;
      a.workspace_bytes = workspace_bytes;
    }
    PhaseResult r;
    r.ms = timed([&] {
      for (const ForwardArgs& a : calls) forward(a);
    });
    r.tokens = live_entries() * size_.decode_steps;
    place_.fetch(out, o);
    place_.fetch(pool_, pool_after);

    for (int64_t h : kSampledHeads) {
      const int64_t j = h / kRatio;  // block map
      HostTensor o_ref = f64_zeros({int64_t(kSlots.size()), 1, 1, kV});
      for (int64_t s = 0; s < size_.decode_steps; ++s) {
        ForwardArgs ref = oracle_args();
        ref.q = pick(pick(steps_.q.view(), 1, s), 2, j);
        ref.k = pick(pick(steps_.k.view(), 1, s), 2, j);
        ref.v = pick(pick(steps_.v.view(), 1, s), 2, h);
        ref.g = pick(pick(steps_.g.view(), 1, s), 2, h);
        ref.beta = pick(pick(steps_.beta.view(), 1, s), 2, h);
        ref.o = o_ref.view();
        ref.initial_state = ref.final_state = oracle_pool_[h].view();
        forward(ref);
        for (int64_t n = 0; n < int64_t(kSlots.size()); ++n)
          for (int64_t i = 0; i < kV; ++i)
            r.o.add(o.get(((n * size_.decode_steps + s) * kHv + h) * kV + i), o_ref.get(n * kV + i));
      }
      compare_states(pool_after, h, r.state);
    }
    return r;
  }

  int64_t live_entries() const { return int64_t(kSlots.size()) - 1; }
  int64_t live_tokens() const {
    int64_t tokens = 0;
    for (size_t n = 0; n < kSlots.size(); ++n)
      if (kSlots[n] >= 0) tokens += size_.prompt_lengths[n];
    return tokens;
  }

 private:
  ForwardArgs base_args() const {
    ForwardArgs a;
    a.backend = backend_;
    return a;
  }

  // The oracle's call on one value head: host views, f64 outputs, the same indices.
  ForwardArgs oracle_args() const {
    ForwardArgs a;
    a.backend = GDN_BACKEND_REFERENCE;
    a.state_indices = slots_.view();
    return a;
  }

  // The live slots of head h in our pool against the oracle's.
  void compare_states(const HostTensor& pool, int64_t h, Comparison& c) const {
    const HostTensor& ref = oracle_pool_.at(h);
    for (int32_t slot : kSlots) {
      if (slot < 0) continue;
      for (int64_t e = 0; e < kV * kK; ++e)
        c.add(pool.get((slot * kHv + h) * kV * kK + e), ref.get(slot * kV * kK + e));
    }
  }

  template <class F>
  double timed(F&& work) {
    const auto start = std::chrono::steady_clock::now();
    work();
    place_.synchronize();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }

  gdn_backend backend_;
  DemoSize size_;
  Placement place_;
  harness::GeneratedInputs prompts_, steps_;
  HostTensor slots_;
  HostTensor pool_initial_;
  HostTensor pool_host_;                    // the pool's host storage (host backends update it)
  gdn_tensor pool_;                         // ours, [P, Hv, V, K] f32, updated by both phases
  gdn_tensor placed_slots_;                 // state indices where the backend reads them
  std::map<int64_t, HostTensor> oracle_pool_;  // per sampled head: [P, 1, V, K] f64
};

// The padding entry's outputs are exactly zero: its prompt rows of the prefill output, its
// rows of every decode step.
bool padding_outputs_zero(const HostTensor& prefill_o, const harness::GeneratedInputs& prompts,
                          const HostTensor& decode_o, int64_t steps) {
  const int64_t row = kHv * kV;
  for (int64_t t = prompts.bos[kPaddingEntry]; t < prompts.bos[kPaddingEntry + 1]; ++t)
    for (int64_t e = 0; e < row; ++e)
      if (prefill_o.get(t * row + e) != 0) return false;
  for (int64_t e = 0; e < steps * row; ++e)
    if (decode_o.get(kPaddingEntry * steps * row + e) != 0) return false;
  return true;
}

// The other request's pool slot holds exactly what it held before.
bool slot_untouched(const HostTensor& pool_initial, const HostTensor& pool) {
  const size_t slot_bytes = size_t(kHv * kV * kK) * sizeof(float);
  return std::memcmp(static_cast<const char*>(pool_initial.data()) + kUntouchedSlot * slot_bytes,
                     static_cast<const char*>(pool.data()) + kUntouchedSlot * slot_bytes, slot_bytes) == 0;
}

std::string device_line(gdn_backend backend) {
  if (backend == GDN_BACKEND_CUDA) {
    char line[256] = "";
    gdn_cuda_device_info(0, line, sizeof line);
    return std::string("cuda on ") + line;
  }
  return std::string("cpu (SIMD target ") + gdn_cpu_simd_target() + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " hardware threads)";
}

}  // namespace

int demo_command(const DemoCommand& cmd) {
  const gdn_backend backend = resolve_backend(cmd.backend);
  const DemoSize size = demo_size(backend, cmd.quick);
  std::cout << "gdn demo: a Qwen3.5-shaped gated delta layer (Hk=16, Hv=32, K=V=128; bf16 q/k/v, f32 gates "
               "and state)\n"
            << "backend: " << device_line(backend) << "\n";
  Demo demo(backend, size);
  const harness::GeneratedInputs& prompts = demo.prompts();
  std::cout << "batch: " << demo.live_entries() << " sequences of ";
  for (size_t n = 0, shown = 0; n < kSlots.size(); ++n)
    if (kSlots[n] >= 0) std::cout << (shown++ ? ", " : "") << size.prompt_lengths[n];
  std::cout << " tokens and 1 padding entry, prefilled into a pool of " << kPoolSlots << " states (slot "
            << kUntouchedSlot << " belongs to another request), then " << size.decode_steps
            << " decode steps in place\n"
            << "checked against the f64 oracle on value heads " << kSampledHeads[0] << " and " << kSampledHeads[1]
            << " (relative L2 error, tolerance in brackets)\n\n";

  const harness::Tolerance tol = harness::tolerance(prompts.c, backend, GDN_PATH_AUTO);
  HostTensor prefill_o(GDN_DTYPE_BF16, {prompts.T_total, kHv, kV});
  HostTensor decode_o(GDN_DTYPE_BF16, {int64_t(kSlots.size()), size.decode_steps, kHv, kV});
  HostTensor pool_after_prefill = demo.pool_initial(), pool_after_decode = demo.pool_initial();

  const Table table(std::cout, {{"phase", -8}, {"tokens", 7}, {"ms", 10}, {"tokens/s", 9},
                                {"o err", 8}, {"(tol)", 9}, {"state err", 9}, {"(tol)", 9}, {"result", -6}});
  table.header();
  bool all_pass = true;
  auto report = [&](const char* phase, const PhaseResult& r) {
    const double o_err = r.o.rel(), state_err = r.state.rel();
    const bool pass = o_err <= tol.o && state_err <= tol.state;
    all_pass &= pass;
    table.row({phase, std::to_string(r.tokens), fixed(r.ms, 2), si(double(r.tokens) / (r.ms * 1e-3)), scientific(o_err),
               "(" + scientific(tol.o) + ")", scientific(state_err), "(" + scientific(tol.state) + ")",
               pass ? "PASS" : "FAIL"});
  };
  report("prefill", demo.prefill(prefill_o, pool_after_prefill));
  report("decode", demo.decode(decode_o, pool_after_decode));

  const bool intact = padding_outputs_zero(prefill_o, prompts, decode_o, size.decode_steps) &&
                      slot_untouched(demo.pool_initial(), pool_after_prefill) &&
                      slot_untouched(demo.pool_initial(), pool_after_decode);
  all_pass &= intact;
  std::cout << "\npadding entry's outputs zero, other request's slot " << kUntouchedSlot
            << " untouched: " << (intact ? "PASS" : "FAIL") << "\n"
            << (all_pass ? "demo PASS" : "demo FAIL") << "\n";
  return all_pass ? 0 : 1;
}

}  // namespace gdn::tool

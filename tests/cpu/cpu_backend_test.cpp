// The cpu backend against the f64 oracle: every built-in case within SPEC.md's tolerance, every
// element written, nothing else touched; thread counts agree bit for bit. CTest runs this once
// per SIMD target (GDN_CPU_TARGET, see CMakeLists.txt); a target the CPU lacks is skipped.
#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "harness/harness.h"

namespace gdn::harness {

// Test names and failure messages print a case as its case string.
void PrintTo(const Case& c, std::ostream* os) { *os << to_string(c); }

namespace {

// A fresh seed per run, printed with every failure; GDN_TEST_SEED=<n> repeats a run.
uint64_t fresh_seed() {
  if (const char* fixed = std::getenv("GDN_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
  return std::random_device{}() | uint64_t(std::random_device{}()) << 32;
}

// Skips the test when CTest asked for a target this CPU cannot run (dispatch fell back).
void skip_unless_requested_target() {
  const char* wanted = std::getenv("GDN_CPU_TARGET");
  if (wanted != nullptr && std::strcmp(wanted, gdn_cpu_simd_target()) != 0)
    GTEST_SKIP() << "GDN_CPU_TARGET=" << wanted << " is not available here ("
                 << gdn_cpu_simd_target() << " instead)";
}

std::string report(const Case& c, const RunResult& r) {
  const Tolerance t = tolerance(c, GDN_BACKEND_CPU, c.path);
  return "case " + to_string(c) + " on " + gdn_cpu_simd_target() + ": " +
         gdn_status_string(r.status) + " " + r.message + "; rel L2 o " +
         std::to_string(r.errors.o) + " (<= " + std::to_string(t.o) + "), final state " +
         std::to_string(r.errors.final_state) + ", snapshots " +
         std::to_string(r.errors.snapshots) + " (<= " + std::to_string(t.state) + "); " +
         r.errors.detail;
}

void expect_matches_oracle(Case c) {
  c.seed = fresh_seed();
  const RunResult r = run_case(c, RunOptions{});
  ASSERT_EQ(r.status, GDN_STATUS_SUCCESS) << report(c, r);
  EXPECT_TRUE(r.errors.pass(tolerance(c, GDN_BACKEND_CPU, c.path))) << report(c, r);
}

class BuiltinCase : public ::testing::TestWithParam<Case> {};

TEST_P(BuiltinCase, MatchesOracle) {
  skip_unless_requested_target();
  expect_matches_oracle(GetParam());
}

// c's outputs with `threads` threads and with one agree bit for bit.
void expect_threads_agree_exactly(const Case& c, int threads) {
  const GeneratedInputs pristine = generate(c);
  GeneratedInputs one = pristine, many = pristine;
  gdn_forward_args a1 = one.args(GDN_BACKEND_CPU), an = many.args(GDN_BACKEND_CPU);
  a1.num_threads = 1;
  an.num_threads = threads;
  ASSERT_EQ(gdn_forward(&a1), GDN_STATUS_SUCCESS) << gdn_last_error();
  ASSERT_EQ(gdn_forward(&an), GDN_STATUS_SUCCESS) << gdn_last_error();
  auto same = [](const HostTensor* x, const HostTensor* y) {  // absent (null or empty) or equal
    if (x == nullptr || !x->present()) return y == nullptr || !y->present();
    return std::memcmp(x->data(), y->data(), x->bytes()) == 0;
  };
  EXPECT_TRUE(same(&one.o, &many.o)) << to_string(c) << ", " << threads << " threads";
  EXPECT_TRUE(same(one.final_state_out(), many.final_state_out())) << to_string(c) << ", " << threads << " threads";
  EXPECT_TRUE(same(&one.snapshots, &many.snapshots)) << to_string(c) << ", " << threads << " threads";
}

// Each task is computed whole by one thread, so the thread count cannot change a bit.
TEST_P(BuiltinCase, OneAndTwoThreadsAgreeExactly) {
  skip_unless_requested_target();
  Case c = GetParam();
  c.seed = fresh_seed();
  expect_threads_agree_exactly(c, 2);
}

// Fewer (sequence, value head) pairs than threads: the value rows are cut into finer blocks
// (tiles.h, task_width), one task each, which changes no bit either, token by token or in token
// blocks; and the result stays the oracle's.
TEST(CpuBackend, RowBlocksForIdleThreadsAgreeExactly) {
  skip_unless_requested_target();
  for (const char* text : {"N=1,T=40,Hk=1,Hv=1,K=128,V=128,dtype=bf16", "N=1,T=5,Hk=1,Hv=1,K=128,V=128",
                           "N=1,T=40,Hk=1,Hv=1,K=64,V=104,layout=kv,sdtype=bf16",
                           "N=1,T=6,Hk=1,Hv=1,K=128,V=104,layout=kv", "N=1,T=33,Hk=1,Hv=2,K=24,V=70",
                           "N=1,T=70,Hk=1,Hv=1,K=128,V=128,snap=1,ckpt=1",
                           "N=1,T=1,Hk=1,Hv=1,K=128,V=128,inplace=1",
                           "N=1,T=1,Hk=1,Hv=1,K=64,V=104,layout=kv,sdtype=bf16,inplace=1"}) {
    Case c = parse_case(text);
    c.seed = fresh_seed();
    for (int threads : {2, 3, 4}) expect_threads_agree_exactly(c, threads);
    expect_matches_oracle(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, BuiltinCase, ::testing::ValuesIn(builtin_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

// Qwen3-Next's linear-attention shape: Hk = 16, Hv = 32 (r = 2), K = V = 128, bf16 inputs.
TEST(CpuBackend, QwenShaped) {
  skip_unless_requested_target();
  expect_matches_oracle(parse_case("N=2,T=64,Hk=16,Hv=32,K=128,V=128,dtype=bf16"));
}

// The token-block path (tasks of 12 tokens or more in vk, 8 in kv; kernel_impl.h) against the
// oracle around its thresholds and block lengths (8 tokens on AVX-512, 6 on AVX2, 4 otherwise),
// with checkpoints that end blocks early, heads cut into several blocks (K = 200, V = 72; K = V =
// 256) or padded (V = 40), vk blocks whose transposition has a tail (K = 20, K = 1), fast decay
// (products of decays flushed to zero) and none.
TEST(CpuBackend, TokenBlocksMatchOracle) {
  skip_unless_requested_target();
  for (const char* text : {
           "N=2,T=11,Hk=1,Hv=2,K=64,V=64", "N=2,T=12,Hk=1,Hv=2,K=64,V=64",
           "N=2,T=17,Hk=1,Hv=2,K=64,V=64,dtype=bf16", "N=2,T=7,Hk=1,Hv=2,K=64,V=64,layout=kv",
           "N=2,T=8,Hk=1,Hv=2,K=64,V=64,layout=kv", "N=2,T=13,Hk=1,Hv=2,K=64,V=64,layout=kv",
           "seqlens=16:0:7:8:25:49,Hk=1,Hv=2,K=64,V=64,pool=7,pad=1",
           "seqlens=16:0:7:8:25:49,Hk=1,Hv=2,K=64,V=64,pool=7,pad=1,layout=kv,inplace=1",
           "N=2,T=70,Hk=1,Hv=3,K=200,V=72,gate=raw,l2norm=1",
           "N=1,T=20,Hk=1,Hv=2,K=256,V=256,dtype=bf16", "N=1,T=20,Hk=1,Hv=2,K=256,V=256,layout=kv",
           "N=2,T=40,Hk=1,Hv=2,K=24,V=40,layout=kv,sdtype=bf16", "N=2,T=14,Hk=1,Hv=2,K=20,V=12",
           "N=1,T=13,Hk=1,Hv=2,K=1,V=3,sdtype=bf16",
           "N=1,T=150,Hk=1,Hv=2,K=128,V=128,decay=fast", "N=1,T=150,Hk=1,Hv=2,K=128,V=128,decay=none",
           "N=2,T=137,Hk=1,Hv=2,K=64,V=64,snap=1,ckpt=1",
           "seqlens=130:0:64:77,Hk=1,Hv=2,K=64,V=64,pool=5,pad=1,snap=pool,ckpt=1,layout=kv",
       }) {
    expect_matches_oracle(parse_case(text));
  }
}

// The decode path (one token, no snapshots, a state to read; kernel_impl.h) against the oracle:
// vk rows in fours and one by one, keys past the last whole vector (K = 20, 1, 200); kv columns
// in passes of 8, 4, 2 and 1 vectors and single columns (V = 256, 120, 40, 3); bf16 states in
// place; pools with padding and strided views; no final state; no initial state (the general
// path); packed batches with empty sequences; Qwen's shape in both layouts.
TEST(CpuBackend, DecodeMatchesOracle) {
  skip_unless_requested_target();
  for (const char* text : {
           "N=3,T=1,Hk=1,Hv=2,K=20,V=13", "N=3,T=1,Hk=1,Hv=2,K=1,V=3,sdtype=bf16,inplace=1",
           "N=2,T=1,Hk=1,Hv=3,K=200,V=72,gate=raw,l2norm=1",
           "N=2,T=1,Hk=1,Hv=2,K=256,V=256,layout=kv", "N=2,T=1,Hk=1,Hv=2,K=64,V=120,layout=kv",
           "N=2,T=1,Hk=1,Hv=2,K=24,V=40,layout=kv,sdtype=bf16",
           "N=2,T=1,Hk=1,Hv=2,K=64,V=3,layout=kv,inplace=1,sdtype=bf16",
           "N=4,T=1,Hk=2,Hv=4,K=64,V=64,pool=9,pad=2,inplace=1,sdtype=bf16,strided=1",
           "N=4,T=1,Hk=2,Hv=4,K=64,V=64,pool=9,pad=2,layout=kv,strided=1,beta=logit",
           "N=4,T=1,Hk=2,Hv=4,K=64,V=64,ht=0", "N=4,T=1,Hk=2,Hv=4,K=64,V=64,ht=0,layout=kv",
           "N=4,T=1,Hk=2,Hv=4,K=64,V=64,h0=0",
           "seqlens=1:0:1:1,Hk=2,Hv=4,K=64,V=64,layout=kv,decay=fast",
           "N=2,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16,inplace=1",
           "N=2,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16,inplace=1,layout=kv,sdtype=bf16",
       }) {
    expect_matches_oracle(parse_case(text));
  }
}

// Per-token snapshots, streamed past the caches where a row starts aligned to a vector and
// stored as usual where not (K = 20: rows of 80 bytes; bf16 K = 24; kv V = 40), dense and pooled.
TEST(CpuBackend, SnapshotsMatchOracle) {
  skip_unless_requested_target();
  for (const char* text : {
           "N=2,T=5,Hk=1,Hv=2,K=20,V=12,snap=1", "N=2,T=3,Hk=1,Hv=2,K=24,V=20,snap=1,sdtype=bf16",
           "N=2,T=4,Hk=1,Hv=2,K=64,V=40,snap=pool,pool=4,pad=1,layout=kv",
           "N=3,T=4,Hk=1,Hv=2,K=72,V=36,snap=pool,pool=5,sdtype=bf16,layout=kv,strided=1",
       }) {
    expect_matches_oracle(parse_case(text));
  }
}

// Random cases over the whole option space (sizes past whole vectors, dtypes, gates, decay
// regimes, layouts, head maps at ratios 1 to 3, dense and packed batches with empty sequences,
// pools with padding, in place, snapshots dense and pooled, checkpoints, strided views, thread
// counts), each against the oracle: the combinations the lists above do not name. A failure
// prints its case string (seed included); GDN_TEST_SEED=<n> repeats a run's draws.
TEST(CpuBackend, RandomCasesMatchOracle) {
  skip_unless_requested_target();
  const RandomCaseSpace space = random_case_space(GDN_BACKEND_CPU, GDN_PATH_RECURRENT);
  const uint64_t first = fresh_seed();
  for (uint64_t i = 0; i < 60 && !HasFailure(); ++i)  // one case string to repeat, not sixty
    expect_matches_oracle(random_case(first + i, space));
}

// The dispatched target is the one asked for when the CPU has it, else the best it has.
TEST(CpuBackend, DispatchesTheRequestedTarget) {
  const std::string target = gdn_cpu_simd_target();
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;  // F16C from CPUID (Clang's builtin does not know it)
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("fma") && f16c;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  const bool avx512bf16 = avx512 && __builtin_cpu_supports("avx512bf16");
  const std::string best = avx512bf16 ? "avx512bf16" : avx512 ? "avx512" : avx2 ? "avx2" : "sse2";
  const char* wanted = std::getenv("GDN_CPU_TARGET");
  const bool can = wanted != nullptr &&
                   ((std::strcmp(wanted, "avx512bf16") == 0 && avx512bf16) ||
                    (std::strcmp(wanted, "avx512") == 0 && avx512) ||
                    (std::strcmp(wanted, "avx2") == 0 && avx2) || std::strcmp(wanted, "sse2") == 0);
  EXPECT_EQ(target, can ? std::string(wanted) : best);
#elif defined(__aarch64__)
  EXPECT_EQ(target, "neon");
#else
  EXPECT_EQ(target, "scalar");
#endif
}

}  // namespace
}  // namespace gdn::harness

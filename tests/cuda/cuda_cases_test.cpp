// The cuda recurrent kernel against the f64 oracle, outputs poisoned first (harness run_case):
//   Builtin: the harness's built-in cases the cuda rows of the configuration table take;
//   Table:   every (input dtype, state dtype, K, V, layout) of those rows, options rotated;
//   Extra:   decode and verify at the models' shapes, odd T, ratio 3, pools, packed batches;
//   Random:  cases drawn over the whole option space.
// Every test skips without a GPU.
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace gdn::cuda_test {
namespace {

void expect_matches_oracle(Case c) {
  GDN_SKIP_WITHOUT_GPU();
  c.seed = fresh_seed();
  c.path = GDN_PATH_RECURRENT;  // (auto may take the chunked kernel for long bf16 sequences)
  RunOptions opt;
  opt.backend = GDN_BACKEND_CUDA;
  const RunResult r = run_case(c, opt);
  ASSERT_EQ(r.status, GDN_STATUS_SUCCESS) << to_string(c) << ": " << r.message;
  EXPECT_TRUE(r.errors.pass(cuda_tolerance(c))) << report(c, r.errors);
}

std::vector<Case> builtin_cuda_cases() {
  std::vector<Case> out;
  for (const Case& c : builtin_cases())
    if (cuda_supports(c)) out.push_back(c);
  return out;
}

// One case per (input dtype, state dtype, K, V, layout) of the cuda rows, T cycling through
// 1, 2, 7 and the options rotating so that every gate, beta, head map, norm, pool and snapshot
// mode meets every dtype and layout.
std::vector<Case> table_cases() {
  const char* const options[] = {
      "gate=log_decay,map=block",
      "gate=raw,beta=logit,l2norm=1,pool=5,pad=1,inplace=1",
      "gate=decay_rate,map=tiled,snap=1",
      "gate=raw,l2norm=1,map=tiled,snap=pool,pool=6,pad=1",
      "beta=logit,packed=1,h0=0",
      "l2norm=1,pool=4,pad=1,snap=1,scale=0.3",
  };
  const int64_t Ts[] = {1, 2, 7};
  std::vector<Case> out;
  int i = 0;
  for (const ConfigRow& row : kConfigTable) {
    if (row.backend != GDN_BACKEND_CUDA) continue;
    for (int d = 0; d < 32; ++d) {
      if (!contains(row.inputs, gdn_dtype(d))) continue;
      for (int sd = 0; sd < 32; ++sd) {
        if (!contains(row.states, gdn_dtype(sd))) continue;
        for (int ki = 0; ki < row.K.count; ++ki)
          for (int vi = 0; vi < row.V.count; ++vi)
            for (const char* layout : {"vk", "kv"}) {
              const std::string text =
                  "N=3,T=" + std::to_string(Ts[i % 3]) + ",Hk=2,Hv=6,K=" + std::to_string(row.K.listed[ki]) +
                  ",V=" + std::to_string(row.V.listed[vi]) + ",dtype=" + dtype_name(gdn_dtype(d)) +
                  ",sdtype=" + dtype_name(gdn_dtype(sd)) + ",layout=" + layout + "," + options[i % 6];
              Case c = parse_case(text);
              c.name = std::string(layout) + "_" + dtype_name(gdn_dtype(d)) + "_s" + dtype_name(gdn_dtype(sd)) +
                       "_K" + std::to_string(c.K) + "V" + std::to_string(c.V) + "_" + std::to_string(i);
              out.push_back(c);
              ++i;
            }
      }
    }
  }
  return out;
}

std::vector<Case> extra_cases() {
  const char* const table[][2] = {
      {"decode_b1", "N=1,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16"},
      {"decode_b3_kv", "N=3,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16,layout=kv"},
      {"decode_bf16state", "N=5,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16,sdtype=bf16"},
      // a bf16 state of one token is held as stored (the raw kernels): each layout, V = 64, K = 64
      {"decode_bf16state_kv", "N=5,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16,sdtype=bf16,layout=kv"},
      {"decode_bf16state_v64", "N=3,T=1,Hk=2,Hv=4,K=128,V=64,sdtype=bf16,snap=1"},
      {"decode_bf16state_v64_kv", "N=3,T=1,Hk=2,Hv=4,K=128,V=64,sdtype=bf16,layout=kv,map=tiled"},
      {"decode_bf16state_k64_kv_pool", "N=4,T=1,Hk=2,Hv=4,K=64,V=128,dtype=f16,sdtype=bf16,layout=kv,pool=6,"
                                       "pad=1,inplace=1,snap=pool"},
      {"decode_bf16state_serving", "N=6,T=1,Hk=16,Hv=48,K=128,V=128,dtype=bf16,sdtype=bf16,gate=raw,beta=logit,"
                                   "l2norm=1,pool=9,pad=2,inplace=1"},
      {"decode_serving", "N=6,T=1,Hk=16,Hv=48,K=128,V=128,dtype=bf16,gdtype=bf16,gate=raw,beta=logit,"
                         "l2norm=1,pool=9,pad=2,inplace=1"},
      {"decode_serving_kv", "N=6,T=1,Hk=16,Hv=48,K=128,V=128,dtype=bf16,gate=raw,l2norm=1,pool=9,pad=2,"
                            "inplace=1,layout=kv,map=tiled"},
      {"verify_t4_snap", "N=4,T=4,Hk=16,Hv=32,K=128,V=128,dtype=bf16,snap=1"},
      {"verify_t4_snappool_kv", "N=4,T=4,Hk=4,Hv=8,K=128,V=128,dtype=bf16,snap=pool,pool=6,pad=1,layout=kv"},
      {"ckpt_t200", "N=2,T=200,Hk=2,Hv=4,K=128,V=128,dtype=bf16,snap=1,ckpt=1,path=recurrent"},
      {"ckpt_pool_packed_kv", "seqlens=130:0:64:3,Hk=2,Hv=4,K=128,V=64,layout=kv,pool=5,pad=1,snap=pool,ckpt=1,"
                              "path=recurrent"},
      {"t2_ratio3_f32", "N=2,T=2,Hk=2,Hv=6,K=128,V=128"},
      {"t7_ratio3_tiled_kv", "N=2,T=7,Hk=2,Hv=6,K=128,V=64,map=tiled,layout=kv"},
      {"t300_k128", "N=1,T=300,Hk=1,Hv=3,K=128,V=128,dtype=bf16"},
      {"t300_kv_bf16state", "N=1,T=300,Hk=1,Hv=3,K=128,V=128,layout=kv,sdtype=bf16,l2norm=1"},
      {"packed_zero_len", "seqlens=3:0:1:7:0:300,Hk=2,Hv=6,K=128,V=128,dtype=f16"},
      {"packed_zero_len_kv_pool", "seqlens=0:2:0:5,Hk=2,Hv=4,K=64,V=128,layout=kv,pool=7,pad=1,inplace=1"},
      {"pool_padding_f16", "N=5,T=3,Hk=2,Hv=4,K=128,V=64,dtype=f16,gdtype=f16,pool=9,pad=2"},
      {"strided_decode", "N=4,T=1,Hk=2,Hv=6,K=128,V=128,dtype=bf16,strided=1,pool=6,pad=1,inplace=1"},
      // plain bf16 inputs (the one-token kernel with them fixed at compile time;
      // DecodeForms.SpecialisedFormsMatchGeneric compares it with the generic one): K = 64,
      // pools, a bf16 state
      {"decode_plain_k64_pool", "N=4,T=1,Hk=2,Hv=4,K=64,V=128,dtype=bf16,pool=7,pad=1,inplace=1"},
      {"decode_plain_bf16state_pool_tiled", "N=4,T=1,Hk=2,Hv=6,K=128,V=64,dtype=bf16,sdtype=bf16,pool=6,pad=1,"
                                            "map=tiled,scale=0.3"},
      {"decay_fast_kv", "N=2,T=9,Hk=2,Hv=4,K=128,V=128,decay=fast,layout=kv"},
      {"decay_none_vk", "N=2,T=40,Hk=2,Hv=4,K=128,V=128,decay=none"},
      {"v64_bf16state", "N=3,T=3,Hk=1,Hv=2,K=64,V=64,sdtype=bf16,dtype=bf16,layout=kv"},
  };
  std::vector<Case> out;
  for (const auto& row : table) {
    Case c = parse_case(row[1]);
    c.name = row[0];
    out.push_back(c);
  }
  return out;
}

class Builtin : public ::testing::TestWithParam<Case> {};
TEST_P(Builtin, MatchesOracle) { expect_matches_oracle(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cuda, Builtin, ::testing::ValuesIn(builtin_cuda_cases()), case_name);

class Table : public ::testing::TestWithParam<Case> {};
TEST_P(Table, MatchesOracle) { expect_matches_oracle(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cuda, Table, ::testing::ValuesIn(table_cases()), case_name);

class Extra : public ::testing::TestWithParam<Case> {};
TEST_P(Extra, MatchesOracle) { expect_matches_oracle(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cuda, Extra, ::testing::ValuesIn(extra_cases()), case_name);

// Random cases over the whole option space at the kernel's head dims (harness random_case):
// the combinations the lists above do not name. A failure prints its case string (seed
// included); GDN_TEST_SEED=<n> repeats a run's draws.
TEST(Random, MatchesOracle) {
  GDN_SKIP_WITHOUT_GPU();
  const RandomCaseSpace space = random_case_space(GDN_BACKEND_CUDA, GDN_PATH_RECURRENT);
  const uint64_t first = fresh_seed();
  for (uint64_t i = 0; i < 60 && !HasFailure(); ++i)  // one case string to repeat
    expect_matches_oracle(random_case(first + i, space));
}

}  // namespace
}  // namespace gdn::cuda_test

// The built-in case list: every option of SPEC.md once or more, odd shapes, the real models'
// shapes. Mostly K = V = 64 or 128 (the sizes the CUDA kernels take) and small N, T, H so the
// f64 oracle stays fast; a few odd K, V for the CPU paths' tails.
#include "harness.h"

namespace gdn::harness {

std::vector<Case> builtin_cases() {
  const char* const table[][2] = {
      // ---- shapes: T, ratio r = Hv / Hk, K, V
      {"basic", "N=2,T=33,Hk=2,Hv=4,K=64,V=64"},
      {"decode", "N=8,T=1,Hk=2,Hv=4,K=64,V=64"},
      {"t2", "N=3,T=2,Hk=2,Hv=4,K=64,V=64"},
      {"t7", "N=2,T=7,Hk=2,Hv=4,K=64,V=64"},
      {"t64", "N=2,T=64,Hk=1,Hv=2,K=64,V=64"},
      {"t130", "N=2,T=130,Hk=1,Hv=2,K=64,V=64"},
      {"t300", "N=1,T=300,Hk=1,Hv=2,K=64,V=64"},
      {"ratio1", "N=2,T=9,Hk=4,Hv=4,K=64,V=64"},
      {"ratio3", "N=2,T=9,Hk=2,Hv=6,K=64,V=64"},
      {"ratio4", "N=2,T=9,Hk=1,Hv=4,K=64,V=64"},
      {"ratio3-tiled", "N=2,T=9,Hk=2,Hv=6,K=64,V=64,map=tiled"},
      {"ratio2-tiled-kv", "N=2,T=9,Hk=2,Hv=4,K=64,V=64,map=tiled,layout=kv"},
      {"k128", "N=2,T=20,Hk=2,Hv=4,K=128,V=128"},
      {"k128-kv-bf16", "N=2,T=20,Hk=2,Hv=4,K=128,V=128,layout=kv,dtype=bf16"},
      {"k32", "N=2,T=17,Hk=2,Hv=4,K=32,V=32"},
      {"k64-v128", "N=2,T=11,Hk=1,Hv=2,K=64,V=128"},
      {"k128-v64-kv", "N=2,T=11,Hk=1,Hv=2,K=128,V=64,layout=kv"},
      {"k256", "N=1,T=5,Hk=1,Hv=2,K=256,V=256"},
      {"odd-k24-v40", "N=2,T=6,Hk=1,Hv=3,K=24,V=40"},
      {"odd-k20-v12-kv", "N=2,T=5,Hk=1,Hv=2,K=20,V=12,layout=kv"},
      {"odd-k1-v3", "N=2,T=4,Hk=1,Hv=2,K=1,V=3"},
      // ---- dtypes
      {"bf16", "N=2,T=33,Hk=2,Hv=4,K=64,V=64,dtype=bf16"},
      {"f16", "N=2,T=33,Hk=2,Hv=4,K=64,V=64,dtype=f16"},
      {"bf16-gates", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,dtype=bf16,gdtype=bf16"},
      {"f16-gates", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,dtype=f16,gdtype=f16"},
      {"bf16-state", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,sdtype=bf16"},
      {"bf16-state-kv", "N=2,T=21,Hk=2,Hv=4,K=128,V=128,dtype=bf16,sdtype=bf16,layout=kv"},
      // ---- gates and beta
      {"decay-rate", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,gate=decay_rate"},
      {"raw", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,gate=raw"},
      {"raw-bf16-tiled", "N=2,T=21,Hk=2,Hv=6,K=64,V=64,gate=raw,dtype=bf16,gdtype=bf16,map=tiled"},
      {"logit", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,beta=logit"},
      {"decay-none", "N=2,T=50,Hk=2,Hv=4,K=64,V=64,decay=none"},
      {"decay-fast", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,decay=fast"},
      {"decay-mixed-raw", "N=2,T=21,Hk=2,Hv=6,K=64,V=64,gate=raw,decay=mixed"},
      {"decay-mixed-rate-kv", "N=2,T=40,Hk=1,Hv=3,K=64,V=64,gate=decay_rate,decay=mixed,layout=kv"},
      // ---- layout, norm, scale
      {"kv", "N=2,T=33,Hk=2,Hv=4,K=64,V=64,layout=kv"},
      {"kv-decode-ratio3", "N=5,T=1,Hk=2,Hv=6,K=64,V=64,layout=kv"},
      {"l2norm", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,l2norm=1"},
      {"l2norm-bf16-kv", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,l2norm=1,dtype=bf16,layout=kv"},
      {"scale", "N=2,T=21,Hk=2,Hv=4,K=64,V=64,scale=0.5"},
      // ---- batches: packed (with empty sequences), pools with padding, in place, no states
      {"packed", "N=5,T=20,Hk=2,Hv=4,K=64,V=64,packed=1"},
      {"packed-lengths", "seqlens=5:0:1:64:130,Hk=1,Hv=2,K=64,V=64"},
      {"packed-cu64-bf16", "N=4,T=15,Hk=2,Hv=4,K=64,V=64,packed=1,cu64=1,dtype=bf16"},
      {"packed-decode", "seqlens=1:0:1:1:0:1,Hk=2,Hv=4,K=64,V=64"},
      {"pool", "N=4,T=9,Hk=2,Hv=4,K=64,V=64,pool=7,pad=1"},
      {"pool-decode", "N=4,T=1,Hk=2,Hv=4,K=64,V=64,pool=9,pad=2"},
      {"pool-packed-kv", "N=4,T=12,Hk=2,Hv=4,K=64,V=64,packed=1,pool=6,pad=1,layout=kv"},
      {"inplace", "N=2,T=9,Hk=2,Hv=4,K=64,V=64,inplace=1"},
      {"inplace-pool-bf16", "N=4,T=3,Hk=2,Hv=4,K=64,V=64,inplace=1,pool=6,pad=1,sdtype=bf16"},
      {"no-h0", "N=2,T=9,Hk=2,Hv=4,K=64,V=64,h0=0"},
      {"no-ht", "N=2,T=9,Hk=2,Hv=4,K=64,V=64,ht=0"},
      {"no-states", "N=3,T=5,Hk=2,Hv=4,K=64,V=64,h0=0,ht=0"},
      {"no-h0-pool", "N=3,T=5,Hk=2,Hv=4,K=64,V=64,h0=0,pool=5,pad=1"},
      // ---- per-token state snapshots (speculative decoding)
      {"snap", "N=3,T=4,Hk=2,Hv=4,K=64,V=64,snap=1"},
      {"snap-pool", "N=3,T=4,Hk=2,Hv=4,K=64,V=64,snap=pool,pool=8,pad=1"},
      {"snap-packed-kv", "N=4,T=3,Hk=2,Hv=4,K=64,V=64,packed=1,snap=1,layout=kv"},
      {"snap-pool-packed-bf16",
       "N=4,T=3,Hk=2,Hv=4,K=64,V=64,packed=1,snap=pool,sdtype=bf16,dtype=bf16"},
      // ---- state checkpoints (prefix caching): the state after every 64 n tokens only
      {"ckpt", "N=2,T=200,Hk=1,Hv=2,K=64,V=64,snap=1,ckpt=1"},
      {"ckpt-pool-packed", "seqlens=130:0:64:200,Hk=1,Hv=2,K=64,V=64,pool=5,pad=1,snap=pool,ckpt=2"},
      {"ckpt-qwen-bf16", "N=2,T=300,Hk=2,Hv=4,K=128,V=128,dtype=bf16,snap=1,ckpt=1"},
      // ---- strided views (fused projections, interleaved pools)
      {"strided", "N=4,T=7,Hk=2,Hv=4,K=64,V=64,strided=1,packed=1,pool=6,pad=1,snap=1"},
      {"strided-kv-inplace", "N=2,T=7,Hk=2,Hv=4,K=64,V=64,strided=1,layout=kv,inplace=1,gate=raw"},
      {"strided-snap-pool", "N=3,T=4,Hk=1,Hv=2,K=64,V=64,strided=1,snap=pool,pool=4,pad=1"},
      // ---- the models' shapes
      {"qwen3-next", "N=2,T=64,Hk=16,Hv=32,K=128,V=128,dtype=bf16"},
      {"qwen3.5-serving-decode",
       "N=4,T=1,Hk=16,Hv=48,K=128,V=128,dtype=bf16,gdtype=bf16,gate=raw,beta=logit,l2norm=1,"
       "pool=8,pad=1,inplace=1,sdtype=bf16"},
      {"qwen3.5-verify", "N=2,T=4,Hk=16,Hv=48,K=128,V=128,dtype=bf16,map=tiled,snap=pool,pool=4"},
  };
  std::vector<Case> cases;
  uint64_t seed = 1;
  for (const auto& row : table) {
    Case c = parse_case(row[1]);
    c.name = row[0];
    c.seed = seed++;
    cases.push_back(c);
  }
  return cases;
}

}  // namespace gdn::harness

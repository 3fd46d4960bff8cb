// random_case(): a case drawn over the whole option space, written as a case string and parsed
// (so that it is one the case language can repeat).
#include <algorithm>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>

#include "core/config_table.h"
#include "core/dtype.h"
#include "harness.h"

namespace gdn::harness {

Case random_case(uint64_t draw, const RandomCaseSpace& space) {
  std::mt19937_64 rng(draw);
  const auto pick = [&](std::initializer_list<const char*> xs) {
    return std::string(xs.begin()[rng() % xs.size()]);
  };
  const auto pick_of = [&](const auto& xs) {  // one of a space's values, as case-string text
    const auto& x = xs[rng() % xs.size()];
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>) return x;
    else return std::to_string(x);
  };
  const auto chance = [&](double p) { return std::uniform_real_distribution<double>()(rng) < p; };
  const auto below = [&](int64_t n) { return int64_t(rng() % uint64_t(n)); };

  const bool checkpoints = !space.long_lengths.empty() && chance(0.1);
  const auto length = [&] { return pick_of(checkpoints ? space.long_lengths : space.lengths); };
  const int64_t Hk = 1 + below(2), ratio = 1 + below(3);
  std::string text = "Hk=" + std::to_string(Hk) + ",Hv=" + std::to_string(Hk * ratio) +
                     ",K=" + pick_of(space.K) + ",V=" + pick_of(space.V);
  int64_t N = 1 + below(4);
  if (chance(0.4)) {  // packed, with empty sequences (the first never empty)
    N = 1 + below(5);
    std::string lengths = length();
    for (int64_t n = 1; n < N; ++n) lengths += ":" + (chance(0.3) ? std::string("0") : length());
    text += ",seqlens=" + lengths + (chance(0.5) ? ",cu64=1" : "");
  } else {
    text += ",N=" + std::to_string(N) + ",T=" + length();
  }
  const std::string dtype = pick_of(space.dtypes);
  text += ",dtype=" + dtype + ",gdtype=" + (chance(0.5) ? dtype : "f32") +  // f32 or q's
          ",sdtype=" + pick_of(space.state_dtypes) + ",gate=" + pick({"log_decay", "decay_rate", "raw"}) +
          ",beta=" + pick({"prob", "logit"}) + ",map=" + pick({"block", "tiled"}) +
          ",layout=" + pick({"vk", "kv"}) + ",l2norm=" + pick({"0", "1"}) +
          ",scale=" + pick({"0", "0.5", "-1.5"}) +
          ",decay=" + pick({"normal", "none", "fast", "slow", "mixed"}) +
          ",strided=" + pick({"0", "0", "1"});
  if (space.threads) text += ",threads=" + pick({"0", "1", "2", "3"});
  const bool h0 = chance(0.85), ht = chance(0.85);
  text += std::string(",h0=") + (h0 ? "1" : "0") + ",ht=" + (ht ? "1" : "0");
  if (h0 && ht && chance(0.4)) text += ",inplace=1";
  if ((h0 || ht) && chance(0.4)) {  // a pool, at times with fewer slots than sequences
    const int64_t pad = below(std::min<int64_t>(N, 2) + 1);
    text += ",pool=" + std::to_string(N - pad + below(3) + (N == pad)) + ",pad=" + std::to_string(pad);
  }
  if (checkpoints || (space.per_token_snapshots && chance(0.3)))
    text += std::string(",snap=") + (chance(0.5) ? "1" : "pool") + (checkpoints ? ",ckpt=1" : "");
  if (space.path != GDN_PATH_AUTO)
    text += std::string(",path=") + (space.path == GDN_PATH_CHUNKED ? "chunked" : "recurrent");
  return parse_case(text);
}

RandomCaseSpace random_case_space(gdn_backend backend, gdn_path path) {
  if (backend != GDN_BACKEND_CUDA) path = GDN_PATH_RECURRENT;  // (the cpu backends' one path)
  const bool chunked = path == GDN_PATH_CHUNKED;
  RandomCaseSpace space;
  for (const ConfigRow& row : config_rows()) {
    if (row.backend != backend || row.path != path) continue;
    // head dims: the listed ones, or sizes on both sides of whole SIMD vectors up to the range's end
    const auto dims = [](const DimSet& set, std::initializer_list<int64_t> odd) {
      std::vector<int64_t> out;
      if (set.count > 0) return std::vector<int64_t>(set.listed, set.listed + set.count);
      for (int64_t d : odd)
        if (d <= set.max) out.push_back(d);
      return out;
    };
    space.K = dims(row.K, {1, 8, 20, 24, 64, 72, 128});
    space.V = dims(row.V, {3, 12, 32, 40, 64, 104, 128});
    for (gdn_dtype t : {GDN_DTYPE_F32, GDN_DTYPE_BF16, GDN_DTYPE_F16}) {  // the case language's
      if (contains(row.inputs, t)) space.dtypes.push_back(dtype_name(t));
      if (contains(row.states, t)) space.state_dtypes.push_back(dtype_name(t));
    }
  }
  if (space.K.empty()) return space;  // no such row
  space.lengths = chunked ? std::vector<int64_t>{1, 2, 17, 63, 64, 65, 100, 130, 200, 300}
                          : std::vector<int64_t>{1, 1, 2, 3, 4, 7, 8, 11, 12, 13, 17, 40};
  space.long_lengths = chunked ? std::vector<int64_t>{130, 200, 300} : std::vector<int64_t>{64, 70, 130};
  space.per_token_snapshots = !chunked;  // the chunked path writes checkpoints only
  space.threads = backend == GDN_BACKEND_CPU;
  space.path = backend == GDN_BACKEND_CUDA ? path : GDN_PATH_AUTO;
  return space;
}

}  // namespace gdn::harness

// The test harness: one case vocabulary for the tests, `gdn check`, `gdn bench` and `gdn demo`.
// A Case is parsed from a case string ("N=4,T=300,Hk=16,Hv=48,K=128,V=128,dtype=bf16,gate=raw,
// map=tiled"); generate() draws SPEC.md's realistic inputs for it; run_case() runs one backend
// on them with poisoned outputs, runs the f64 oracle on the same rounded inputs, and reports the
// relative L2 error of every output and whether every element that should be written was.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gdn/gdn.h"

namespace gdn::harness {

struct Case {
  std::string name;  // optional label
  // sizes (SPEC letters); for packed batches T is ignored and `seqlens` gives each length
  int64_t N = 2, T = 33, Hk = 2, Hv = 4, K = 32, V = 32;
  gdn_dtype dtype = GDN_DTYPE_F32;        // q, k, v (and o)          key: dtype=f32|bf16|f16
  gdn_dtype gate_dtype = GDN_DTYPE_F32;   // g, beta, a, A_log, dt_bias  key: gdtype=
  gdn_dtype state_dtype = GDN_DTYPE_F32;  // states and snapshots     key: sdtype=f32|bf16
  gdn_gate_mode gate = GDN_GATE_LOG_DECAY;  // key: gate=log_decay|decay_rate|raw
  gdn_beta_mode beta = GDN_BETA_PROB;       // key: beta=prob|logit
  gdn_head_map map = GDN_HEAD_MAP_BLOCK;    // key: map=block|tiled
  gdn_state_layout layout = GDN_STATE_VK;   // key: layout=vk|kv
  bool l2norm = false;                      // key: l2norm=0|1
  float scale = 0.f;                        // key: scale=X (0: default)
  bool packed = false;                      // key: packed=1 (lengths random, or seqlens=)
  std::vector<int64_t> seqlens;             // key: seqlens=5:0:300 (implies packed)
  bool initial_state = true;                // key: h0=0|1
  bool final_state = true;                  // key: ht=0|1
  bool in_place = false;                    // key: inplace=1 (final state aliases the initial)
  int64_t pool = 0;                         // key: pool=P (state pool of P slots; 0 = dense)
  int64_t pad = 0;                          // key: pad=n (n of the N state_indices are -1)
  bool snapshots = false;                   // key: snap=1 (dense per-token states)
  bool snapshot_pool = false;               // key: snap=pool (pooled, with snapshot_indices)
  gdn_path path = GDN_PATH_AUTO;            // key: path=auto|recurrent|chunked
  // head-decay regime: key: decay=normal|none|fast (g = logsigmoid(N(0,1)), 0, or near -20)
  std::string decay = "normal";
  uint64_t seed = 1;                        // key: seed=
  int64_t threads = 0;                      // key: threads= (cpu backend)
};

// Parses a case string; throws std::invalid_argument naming the bad key or value.
Case parse_case(const std::string& text);
std::string to_string(const Case& c);
// The built-in case list of `gdn check` and the tests: every option, odd shapes.
std::vector<Case> builtin_cases();

// Tolerances of SPEC.md's "Numerical targets" for a backend, path and input dtype.
struct Tolerance { double o, state; };
Tolerance tolerance(const Case& c, gdn_backend backend, gdn_path path);

struct Errors {
  double o = 0, final_state = 0, snapshots = 0;  // relative L2 vs the f64 oracle (0 if absent)
  bool all_written = true;     // no poison left where the backend must write
  bool untouched_ok = true;    // pool slots not addressed (and padding outputs) unchanged / zero
  bool finite = true;          // no NaN or Inf in any output
  std::string detail;          // first problem found, for messages
  bool pass(const Tolerance& t) const;
};

struct RunOptions {
  gdn_backend backend = GDN_BACKEND_CPU;
  int device_id = 0;
  void* stream = nullptr;           // cuda backend
  bool compare = true;              // run the oracle and fill Errors
  int64_t sample_heads = 0;         // >0: oracle only on this many value heads (long cases)
};

struct RunResult {
  gdn_status status = GDN_STATUS_SUCCESS;
  std::string message;  // gdn_last_error() on failure
  Errors errors;
  double ms = 0;        // one timed call (wall clock, synchronised), for information only
};

RunResult run_case(const Case& c, const RunOptions& opt);

// Relative L2 error ||x - ref|| / ||ref|| (ref all zero: ||x||).
double rel_l2(const double* x, const double* ref, int64_t n);

}  // namespace gdn::harness

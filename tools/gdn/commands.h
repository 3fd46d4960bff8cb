// The gdn tool's subcommands: their options (filled by main.cpp's command line) and entry
// points. Each returns the process exit status; errors are thrown (std::exception) and main
// prints their message.
#pragma once

#include <string>
#include <vector>

#include "gdn/gdn.h"

namespace gdn::tool {

// gdn run: one forward call on tensors read from a safetensors file, results written to another.
struct RunCommand {
  std::string in, out;
  gdn_gate_mode gate = GDN_GATE_LOG_DECAY;
  gdn_beta_mode beta = GDN_BETA_PROB;
  gdn_head_map head_map = GDN_HEAD_MAP_BLOCK;
  gdn_state_layout state_layout = GDN_STATE_VK;
  float scale = 0.f;  // 0: 1 / sqrt(K)
  bool qk_l2norm = false;
  gdn_dtype state_dtype = GDN_DTYPE_NONE;  // NONE: initial_state's dtype, else f32
  gdn_backend backend = GDN_BACKEND_AUTO;
  gdn_path path = GDN_PATH_AUTO;
  bool final_state = false;  // also without an initial_state
  bool snapshots = false;
  int checkpoint_every = 0;  // > 0: the snapshots only after every 64 n tokens (chunk_checkpoint_every)
};
int run_command(const RunCommand& cmd);

// gdn check: case strings (or the built-in list) against the oracle.
struct CheckCommand {
  std::vector<std::string> cases;
  gdn_backend backend = GDN_BACKEND_CPU;
  bool list = false;
  int random = 0;     // > 0: that many random cases (harness random_case) instead of the built-ins
  uint64_t seed = 0;  // their draws' seed (0: a fresh one)
  std::string json;   // results file, or empty
};
int check_command(const CheckCommand& cmd);

// gdn bench: BENCH.md's cases on one backend.
struct BenchCommand {
  gdn_backend backend = GDN_BACKEND_CPU;
  std::vector<std::string> cases;  // groups (decode, prefill, all), BENCH.md names, case strings
  bool full = false;               // cpu: every case, not the reduced set
  int repeat = 0;                  // timed calls per case (0: the backend's default)
  bool skip_accuracy = false;      // no comparison of one call with the oracle
  std::string json;
  std::string commit;              // recorded in the results file
};
int bench_command(const BenchCommand& cmd);

// gdn demo: a Qwen3.5-shaped layer, prefill into a state pool then decode, checked.
struct DemoCommand {
  gdn_backend backend = GDN_BACKEND_AUTO;
  bool quick = false;
};
int demo_command(const DemoCommand& cmd);

// gdn info: version, backends, CPU target, devices.
int info_command();

}  // namespace gdn::tool

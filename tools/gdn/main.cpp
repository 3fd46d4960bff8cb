// gdn: the command-line tool. This file is only the command line: subcommands, their options,
// and turning an exception into a message on stderr and exit status 1.
#include <exception>
#include <initializer_list>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "core/dtype.h"
#include "core/names.h"

namespace {

using gdn::tool::BenchCommand;
using gdn::tool::CheckCommand;
using gdn::tool::DemoCommand;
using gdn::tool::RunCommand;

template <class E>
using Names = std::map<std::string, E>;

// The command line spells each value as the library's messages and case strings do.
template <class E>
Names<E> names(const char* (*name)(E), std::initializer_list<E> values) {
  Names<E> map;
  for (E value : values) map[name(value)] = value;
  return map;
}

const Names<gdn_gate_mode> kGates = names(gdn::gate_name, {GDN_GATE_LOG_DECAY, GDN_GATE_DECAY_RATE, GDN_GATE_RAW});
const Names<gdn_beta_mode> kBetas = names(gdn::beta_mode_name, {GDN_BETA_PROB, GDN_BETA_LOGIT});
const Names<gdn_head_map> kHeadMaps = names(gdn::head_map_name, {GDN_HEAD_MAP_BLOCK, GDN_HEAD_MAP_TILED});
const Names<gdn_state_layout> kLayouts = names(gdn::state_layout_name, {GDN_STATE_VK, GDN_STATE_KV});
const Names<gdn_dtype> kStateDtypes = names(gdn::dtype_name, {GDN_DTYPE_F32, GDN_DTYPE_BF16});
const Names<gdn_path> kPaths = names(gdn::path_name, {GDN_PATH_AUTO, GDN_PATH_RECURRENT, GDN_PATH_CHUNKED});

Names<gdn_backend> backends(std::initializer_list<gdn_backend> allowed) {
  return names(gdn::backend_name, allowed);
}

// An option taking one of `choices`; its help lists them, and the current value is the default.
template <class E>
CLI::Option* add_choice(CLI::App* app, const std::string& flag, E& value, const Names<E>& choices,
                        const std::string& help) {
  std::vector<std::string> spellings;
  std::string current;
  for (const auto& [name, v] : choices) {
    spellings.push_back(name);
    if (v == value) current = name;
  }
  auto set = [&value, choices](const std::string& name) { value = choices.at(name); };
  return app->add_option_function<std::string>(flag, set, help)
      ->check(CLI::IsMember(spellings).description(""))
      ->type_name("{" + CLI::detail::join(spellings, ",") + "}")
      ->default_str(current);
}

void add_run(CLI::App& app, RunCommand& cmd) {
  CLI::App* run = app.add_subcommand(
      "run", "Run one forward call on tensors from a safetensors file and write the results to another.\n"
             "Reads q, k, v, beta and g (gate raw: a, A_log, dt_bias); optional initial_state, cu_seqlens\n"
             "(packed batch), state_indices (state pool, updated in place), snapshot_indices (with a\n"
             "state_snapshots pool). Writes o, final_state (with initial_state or --final-state) and\n"
             "state_snapshots (--snapshots). Nothing is written on error.");
  run->add_option("--in", cmd.in, "input safetensors file")->required();
  run->add_option("--out", cmd.out, "output safetensors file (replaced only on success)")->required();
  add_choice(run, "--gate", cmd.gate, kGates, "gate convention");
  add_choice(run, "--beta", cmd.beta, kBetas, "beta convention");
  add_choice(run, "--head-map", cmd.head_map, kHeadMaps, "value head -> key head map");
  add_choice(run, "--state-layout", cmd.state_layout, kLayouts, "state layout: vk = [.., V, K], kv = [.., K, V]");
  run->add_option("--scale", cmd.scale, "output scale (default 1/sqrt(K))");
  run->add_flag("--qk-l2norm", cmd.qk_l2norm, "L2-normalise q and k per head");
  add_choice(run, "--state-dtype", cmd.state_dtype, kStateDtypes,
             "dtype of the written states (default: initial_state's, else f32)");
  add_choice(run, "--backend", cmd.backend,
             backends({GDN_BACKEND_AUTO, GDN_BACKEND_CPU, GDN_BACKEND_CUDA, GDN_BACKEND_REFERENCE}),
             "backend (auto: cuda when a GPU is present, else cpu)");
  add_choice(run, "--path", cmd.path, kPaths, "algorithm");
  run->add_flag("--final-state", cmd.final_state, "write final_state also without an initial_state");
  run->add_flag("--snapshots", cmd.snapshots, "write state_snapshots, the state after every token");
  run->add_option("--checkpoint-every", cmd.checkpoint_every,
                  "with --snapshots: only the states after every N x 64 tokens of a sequence (prefix caching)")
      ->check(CLI::NonNegativeNumber);
}

void add_check(CLI::App& app, CheckCommand& cmd) {
  CLI::App* check = app.add_subcommand(
      "check", "Run cases against the f64 oracle; exit status 0 only if all pass.\n"
               "A case is a string such as N=4,T=300,Hk=16,Hv=48,K=128,V=128,dtype=bf16,gate=raw,map=tiled;\n"
               "without any, the built-in list runs.");
  check->add_option("cases", cmd.cases, "case strings");
  add_choice(check, "--backend", cmd.backend,
             backends({GDN_BACKEND_CPU, GDN_BACKEND_CUDA, GDN_BACKEND_REFERENCE}), "backend under test");
  check->add_flag("--list", cmd.list, "print the built-in cases (or the drawn ones) and exit");
  check->add_option("--random", cmd.random,
                    "instead of the built-in list, N cases drawn over every option the backend "
                    "takes (cuda: its recurrent and chunked paths in turn)")
      ->check(CLI::PositiveNumber);
  check->add_option("--seed", cmd.seed, "the draws' seed (default: a fresh one, printed)");
  check->add_option("--json", cmd.json, "also write the results to this JSON file");
}

void add_bench(CLI::App& app, BenchCommand& cmd) {
  CLI::App* bench = app.add_subcommand(
      "bench", "Time BENCH.md's cases. On the cpu backend the default is a reduced set that finishes in\n"
               "about a minute (--full: all), and the reference backend is timed alongside.");
  add_choice(bench, "--backend", cmd.backend, backends({GDN_BACKEND_CPU, GDN_BACKEND_CUDA}), "backend");
  bench->add_option("--cases", cmd.cases,
                    "decode | prefill | all | a BENCH.md case name (decode-B64-kv, prefill-1x4096, ...) | a case\n"
                    "string over BENCH.md's shape (Hk=16, Hv=32, K=V=128, bf16); several allowed");
  bench->add_flag("--full", cmd.full, "cpu: every BENCH.md case");
  bench->add_option("--repeat", cmd.repeat, "timed calls per case (default: cpu 5, cuda 50)")
      ->check(CLI::PositiveNumber);
  bench->add_flag("--no-accuracy", cmd.skip_accuracy, "skip the comparison with the oracle");
  bench->add_option("--json", cmd.json, "write a results file in BENCH.md's format");
  bench->add_option("--commit", cmd.commit, "the commit measured, recorded in the results file");
}

void add_demo(CLI::App& app, DemoCommand& cmd) {
  CLI::App* demo = app.add_subcommand(
      "demo", "A Qwen3.5-shaped layer: a packed batch prefilled into a state pool, then decode steps\n"
              "updating it in place, checked against the oracle on sampled heads.");
  add_choice(demo, "--backend", cmd.backend, backends({GDN_BACKEND_AUTO, GDN_BACKEND_CPU, GDN_BACKEND_CUDA}),
             "backend (auto: cuda when a GPU is present, else cpu)");
  demo->add_flag("--quick", cmd.quick, "a few hundred tokens and 8 decode steps");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gdn: Gated DeltaNet kernels from the command line"};
  app.require_subcommand(1);
  app.set_version_flag("--version", gdn_version_string());

  RunCommand run;
  CheckCommand check;
  BenchCommand bench;
  DemoCommand demo;
  add_run(app, run);
  add_check(app, check);
  add_bench(app, bench);
  add_demo(app, demo);
  app.add_subcommand("info", "Version, backends, CPU SIMD target, CUDA devices, cores.");

  CLI11_PARSE(app, argc, argv);
  const std::string command = app.get_subcommands().front()->get_name();
  try {
    if (command == "run") return gdn::tool::run_command(run);
    if (command == "check") return gdn::tool::check_command(check);
    if (command == "bench") return gdn::tool::bench_command(bench);
    if (command == "demo") return gdn::tool::demo_command(demo);
    return gdn::tool::info_command();
  } catch (const std::exception& e) {
    std::cerr << "gdn " << command << ": " << e.what() << "\n";
    return 1;
  }
}

// gdn bench: BENCH.md's cases on one backend: time per call, GB/s of state traffic (decode),
// tokens/s, and the accuracy of one call against the oracle on sampled heads. On the cpu backend
// the reference backend is timed alongside, on a sample (it is slow) scaled per token.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/dtype.h"
#include "core/names.h"
#include "device.h"
#include "gdn/gdn.hpp"
#include "harness/harness.h"
#include "progress.h"
#include "text.h"
#include "timing.h"

namespace gdn::tool {
namespace {

using harness::Case;
using harness::GeneratedInputs;

// Calls rotate over copies of their buffers until these many bytes are touched in all, so
// that no call finds its data in a cache left warm by the previous one (H200's L2: 60 MB).
constexpr double kRotationBytes = 256.0 * (1 << 20);
constexpr int kMaxCopies = 256;
// Calls captured per CUDA graph, at least.
constexpr int kGraphCalls = 20;
// The host time of one plain decode call that issue 3 allows (validation, checks, the launch),
// and the timed calls its median takes at least (20 calls, each on a set of buffers no call had
// used, read 8.8 and 9.5 us where 500 calls read 6.0: H200 host, gdn bench --repeat 20 and 500).
constexpr double kPlainHostBudgetUs = 8.0;
constexpr int kPlainHostCalls = 500;
// The reference backend's sample: at most this many sequences (decode) or tokens (prefill).
constexpr int64_t kReferenceSequences = 64;
constexpr int64_t kReferenceTokens = 256;

enum class Method { kWall, kEvents, kGraph };

struct BenchCase {
  std::string name;  // BENCH.md's name, or the case string of a case given on the command line
  Case c;
  bool decode_like;  // dense, T <= 4: bound by the state, reported as GB/s of state traffic
  bool plain;        // cuda: one plain launch per timing, not a graph (shows the host cost)
};

BenchCase bench_case(const std::string& spec, bool plain = false) {
  // BENCH.md: Hk = 16, K = V = 128, bf16 q/k/v, f32 gates and state, Hv = 32 unless named
  Case c = harness::parse_case("Hk=16,Hv=32,K=128,V=128,dtype=bf16," + spec);
  return {c.name.empty() ? spec : c.name, c, !c.packed && c.T <= 4, plain};
}

std::vector<BenchCase> decode_cases(std::initializer_list<int> batches, bool with_plain) {
  std::vector<BenchCase> cases;
  for (int B : batches) {
    const std::string b = std::to_string(B), shape = ",N=" + b + ",T=1,inplace=1";
    cases.push_back(bench_case("name=decode-B" + b + "-vk" + shape));
    if (B == 1 && with_plain) cases.push_back(bench_case("name=decode-B1-vk-plain" + shape, true));
    cases.push_back(bench_case("name=decode-B" + b + "-kv" + shape + ",layout=kv"));
    cases.push_back(bench_case("name=decode-B" + b + "-vk-bf16state" + shape + ",sdtype=bf16"));
  }
  cases.push_back(bench_case("name=verify-B64-T4,N=64,T=4,inplace=1,snap=1"));
  return cases;
}

// Every case of BENCH.md (with the cuda-only plain launch).
std::vector<BenchCase> full_cases(bool with_plain) {
  std::vector<BenchCase> cases = decode_cases({1, 16, 64, 256, 1024}, with_plain);
  for (const char* spec : {"name=prefill-1x4096,N=1,T=4096", "name=prefill-1x16384,N=1,T=16384",
                           "name=prefill-1x65536,N=1,T=65536", "name=prefill-4x8192,N=4,T=8192",
                           "name=prefill-16x4096,N=16,T=4096",
                           // 16 lengths from 1 to 8192, 35509 tokens (BENCH.md's peer figure)
                           "name=prefill-varlen16,seqlens=1:8192:37:4096:512:2048:129:6000:3000:1024:77:"
                           "5000:2500:300:1590:1003",
                           "name=prefill-1x32768-hv64,N=1,T=32768,Hv=64",
                           "name=prefill-1x32768-hk2hv8,N=1,T=32768,Hk=2,Hv=8"})
    cases.push_back(bench_case(spec));
  return cases;
}

// The cpu default: about a minute on 2 cores.
std::vector<BenchCase> reduced_cases() {
  std::vector<BenchCase> cases = decode_cases({1, 16, 64}, false);
  cases.push_back(bench_case("name=prefill-1x1024,N=1,T=1024"));
  return cases;
}

std::vector<BenchCase> select_cases(const BenchCommand& cmd) {
  const bool cuda = cmd.backend == GDN_BACKEND_CUDA;
  const std::vector<BenchCase> base = cuda || cmd.full ? full_cases(cuda) : reduced_cases();
  if (cmd.cases.empty()) return base;
  const std::vector<BenchCase> named = full_cases(cuda);
  std::vector<BenchCase> chosen;
  for (const std::string& pick : cmd.cases) {
    if (pick == "all" || pick == "decode" || pick == "prefill") {
      for (const BenchCase& b : base)
        if (pick == "all" || b.decode_like == (pick == "decode")) chosen.push_back(b);
      continue;
    }
    auto it = std::find_if(named.begin(), named.end(), [&](const BenchCase& b) { return b.name == pick; });
    if (it != named.end()) {
      chosen.push_back(*it);
      continue;
    }
    try {
      chosen.push_back(bench_case(pick));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--cases " + pick + ": neither decode, prefill, all, a BENCH.md case name, "
                                  "nor a case string (" + e.what() + ")");
    }
  }
  return chosen;
}

// Bytes of every buffer a call touches.
double bytes_touched(const GeneratedInputs& in) {
  double bytes = 0;
  for (const harness::HostTensor* t :
       {&in.q, &in.k, &in.v, &in.g, &in.beta, &in.a, &in.A_log, &in.dt_bias, &in.initial_state, &in.cu_seqlens,
        &in.state_indices, &in.snapshot_indices, &in.o, &in.final_state, &in.snapshots})
    if (t->present()) bytes += double(t->bytes());
  return bytes;
}

// State bytes read and written by one call (initial state, final state, snapshots).
double state_traffic(const GeneratedInputs& in) {
  const Case& c = in.c;
  const double state = double(c.Hv * c.V * c.K * dtype_size(c.state_dtype));
  const double live = double(c.N - c.pad);
  double bytes = live * state * (double(c.initial_state) + double(c.final_state));
  if (c.snapshots || c.snapshot_pool) bytes += live * double(c.T) * state;
  return bytes;
}

struct Measurement {
  Timing timing;
  double tokens = 0;
  double state_bytes = 0;
  std::optional<harness::Errors> errors;
  bool accurate = true;
  std::optional<double> reference_ms;  // estimated for the whole case
  std::string reference_sample;        // empty: the reference ran the case itself
};

class Bench {
 public:
  explicit Bench(const BenchCommand& cmd) : cmd_(cmd), backend_(cmd.backend), on_device_(cmd.backend == GDN_BACKEND_CUDA) {
    repeat_ = cmd.repeat > 0 ? cmd.repeat : on_device_ ? 50 : 5;
    if (on_device_) {
      if (!tool_has_cuda() || !harness::DeviceBuffers::compiled() || !gdn_backend_available(GDN_BACKEND_CUDA))
        throw std::runtime_error("backend cuda: not available here (no GPU, or built without CUDA)");
      stream_.emplace();
    }
  }

  Measurement measure(const BenchCase& b) {
    Measurement m;
    const GeneratedInputs pristine = harness::generate(b.c);
    GeneratedInputs after = pristine;
    m.tokens = double(pristine.T_total);
    m.state_bytes = b.decode_like ? state_traffic(pristine) : 0;
    if (!cmd_.skip_accuracy) check_one_call(pristine, after, m);
    m.timing = on_device_ ? time_on_device(b, after) : time_on_host(after);
    if (!on_device_) time_reference(b, m);
    return m;
  }

 private:
  int copies_for(const GeneratedInputs& in, int most) const {
    const double copies = std::ceil(kRotationBytes / std::max(bytes_touched(in), 1.0));
    return int(std::clamp(copies, 1.0, double(std::min(most, kMaxCopies))));
  }

  // One call from the pristine inputs, compared with the oracle on one key head's value heads.
  void check_one_call(const GeneratedInputs& pristine, GeneratedInputs& after, Measurement& m) {
    if (on_device_) {
      harness::DeviceBuffers dev(after, 0);
      gdn_forward_args a = dev.args(after, backend_, stream_->get());
      a = dev.args(after, backend_, stream_->get(), workspace_size(a));
      forward(a);
      dev.synchronize(stream_->get());
      dev.download(after);
    } else {
      run_on_host(after);
    }
    harness::OracleOutputs oracle;
    check(harness::run_oracle(pristine, pristine.c.Hv / pristine.c.Hk, &oracle));
    m.errors = harness::check_outputs(pristine, after, oracle);
    m.accurate = m.errors->pass(harness::tolerance(pristine.c, backend_, pristine.c.path));
  }

  // Arguments for a call on `in`'s host buffers, with a workspace of this object's.
  gdn_forward_args host_args(GeneratedInputs& in, gdn_backend backend) {
    gdn_forward_args a = in.args(backend);
    a.workspace_bytes = workspace_size(a);
    if (host_workspace_.size() < a.workspace_bytes) host_workspace_.resize(a.workspace_bytes);
    a.workspace = host_workspace_.data();
    return a;
  }
  void run_on_host(GeneratedInputs& in) { forward(host_args(in, backend_)); }

  Timing time_on_host(const GeneratedInputs& in) {
    const int warmup = 1;
    std::vector<GeneratedInputs> sets(size_t(copies_for(in, warmup + repeat_)), in);
    std::vector<gdn_forward_args> args;
    for (GeneratedInputs& set : sets) args.push_back(host_args(set, backend_));
    for (gdn_forward_args& a : args) a.workspace = host_workspace_.data();  // the largest, allocated last
    return time_wall([&](int i) { forward(args[size_t(i) % args.size()]); }, warmup, repeat_);
  }

  Timing time_on_device(const BenchCase& b, GeneratedInputs& in) {
    std::vector<harness::DeviceBuffers> sets;
    std::vector<gdn_forward_args> args;
    // the plain launch's case is there for its host time: one input set, as a serving step reuses its
    // buffers (rotated sets of their own allocations cost the pointer checks about 0.75 us more
    // a call on an H200 host: bench/host_cost_lab.cu)
    const int copies = b.plain ? 1 : copies_for(in, kMaxCopies);
    for (int i = 0; i < copies; ++i) {
      harness::DeviceBuffers& dev = sets.emplace_back(in, 0);
      gdn_forward_args a = dev.args(in, backend_, stream_->get());
      args.push_back(dev.args(in, backend_, stream_->get(), workspace_size(a)));
    }
    auto call = [&](int i, void*) { forward(args[size_t(i) % args.size()]); };
    if (b.decode_like && !b.plain) return time_graph(call, stream_->get(), std::max(copies, kGraphCalls), repeat_);
    return time_events(call, stream_->get(), 3, b.plain ? std::max(repeat_, kPlainHostCalls) : repeat_);
  }

  // The reference backend on the case, or on a sample of it scaled per token.
  void time_reference(const BenchCase& b, Measurement& m) {
    Case sample = b.c;
    double scale = 1;
    if (b.decode_like && sample.N > kReferenceSequences) {
      scale = double(sample.N - sample.pad) / double(kReferenceSequences);
      sample.N = kReferenceSequences;
      sample.pad = 0;
      m.reference_sample = "B=" + std::to_string(kReferenceSequences);
    } else if (!b.decode_like && m.tokens > double(kReferenceTokens)) {
      scale = m.tokens / double(kReferenceTokens);
      sample.packed = false;
      sample.seqlens.clear();
      sample.N = 1;
      sample.T = kReferenceTokens;
      m.reference_sample = std::to_string(kReferenceTokens) + " tokens";
    }
    GeneratedInputs in = harness::generate(sample);
    const gdn_forward_args a = host_args(in, GDN_BACKEND_REFERENCE);
    m.reference_ms = scale * time_wall([&](int) { forward(a); }, 1, 2).ms;
  }

  const BenchCommand& cmd_;
  gdn_backend backend_;
  bool on_device_;
  int repeat_;
  std::optional<CudaStream> stream_;
  std::vector<unsigned char> host_workspace_;
};

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&now));
  return buf;
}

nlohmann::json optional_number(bool present, double x) { return present ? nlohmann::json(x) : nlohmann::json(); }

nlohmann::json case_result(const BenchCase& b, const Measurement& m) {
  const double seconds = m.timing.ms * 1e-3;
  nlohmann::json j = {{"name", b.name},
                      {"case", harness::to_string(b.c)},
                      {"ours_ms", m.timing.ms},
                      {"peer_ms", nullptr},
                      {"ratio", nullptr},
                      {"timing", m.timing.method},
                      {"tokens_per_s", m.tokens / seconds}};
  if (b.decode_like) j["state_gbps"] = m.state_bytes / seconds * 1e-9;
  if (b.plain) {
    j["host_us"] = m.timing.host_us;
    j["host_budget_us"] = kPlainHostBudgetUs;
  }
  if (m.errors) {
    j["rel_err_o"] = m.errors->o;
    j["rel_err_state"] = optional_number(b.c.final_state, m.errors->final_state);
    j["accurate"] = m.accurate;
  }
  if (m.reference_ms) {
    j["reference_ms"] = *m.reference_ms;
    j["reference_sample"] = m.reference_sample.empty() ? nlohmann::json() : nlohmann::json(m.reference_sample);
  }
  return j;
}

}  // namespace

int bench_command(const BenchCommand& cmd) {
  const std::vector<BenchCase> cases = select_cases(cmd);
  const bool cpu = cmd.backend != GDN_BACKEND_CUDA;
  Bench bench(cmd);

  std::string device = std::string("cpu (SIMD target ") + gdn_cpu_simd_target() + ")";
  if (!cpu) {
    char line[256] = "";
    gdn_cuda_device_info(0, line, sizeof line);
    device = line;
  }
  std::cout << "gdn bench: " << backend_name(cmd.backend) << " backend on " << device << "; " << cases.size()
            << " case(s); median of " << (cmd.repeat > 0 ? cmd.repeat : cpu ? 5 : 50) << " timed calls\n";
  std::vector<Table::Column> columns = {{"case", -26}, {"ms", 10}, {"timing", 6}, {"state GB/s", 10}, {"tokens/s", 9}};
  if (cpu) columns.insert(columns.end(), {{"reference ms", 13}, {"speedup", 8}});
  columns.insert(columns.end(), {{"o err", 8}, {"state err", 9}, {"", -1}});
  const Table table(std::cout, columns);
  table.header();

  nlohmann::json results = nlohmann::json::array();
  bool all_accurate = true, any_sampled = false;
  {
    ProgressBar progress(int(cases.size()));
    for (const BenchCase& b : cases) {
      progress.start(b.name);
      const Measurement m = bench.measure(b);
      progress.clear();
      const double seconds = m.timing.ms * 1e-3;
      std::vector<std::string> row = {b.name, fixed(m.timing.ms, 3), m.timing.method,
                                      b.decode_like ? fixed(m.state_bytes / seconds * 1e-9, 1) : "-",
                                      si(m.tokens / seconds)};
      if (cpu) {
        const bool sampled = !m.reference_sample.empty();
        any_sampled |= sampled;
        row.push_back(fixed(*m.reference_ms, 2) + (sampled ? "*" : " "));
        row.push_back(fixed(*m.reference_ms / m.timing.ms, 1) + "x");
      }
      row.push_back(m.errors ? scientific(m.errors->o) : "-");
      row.push_back(m.errors && b.c.final_state ? scientific(m.errors->final_state) : "-");
      std::string note = m.accurate ? "" : "ACCURACY FAIL: " + m.errors->detail;
      if (b.plain)  // the host's side of the call, the figure a plain launch is there to show
        note += (note.empty() ? "" : "; ") + std::string("host ") + fixed(m.timing.host_us, 2) + " us a call (budget " +
                fixed(kPlainHostBudgetUs, 0) + ": " + (m.timing.host_us <= kPlainHostBudgetUs ? "met" : "MISSED") + ")";
      row.push_back(note);
      table.row(row);
      all_accurate &= m.accurate;
      results.push_back(case_result(b, m));
    }
  }
  if (any_sampled)
    std::cout << "* the reference backend ran on a sample (B=" << kReferenceSequences << " for decode, "
              << kReferenceTokens << " tokens for prefill), scaled to the whole case per token\n";
  if (!cmd.skip_accuracy)
    std::cout << "errors: relative L2 against the f64 oracle on value heads of one key head, after one call\n";

  if (!cmd.json.empty()) {
    const std::string driver = cpu ? "" : cuda_driver_version();
    nlohmann::json file = {{"date", today()},
                           {"gpu", cpu ? nlohmann::json() : nlohmann::json(device)},
                           {"driver", driver.empty() ? nlohmann::json() : nlohmann::json(driver)},
                           {"commit", cmd.commit.empty() ? nlohmann::json() : nlohmann::json(cmd.commit)},
                           {"peer", nullptr},
                           {"backend", backend_name(cmd.backend)},
                           {"device", device},
                           {"version", gdn_version_string()},
                           {"cases", results}};
    std::ofstream out(cmd.json);
    out << file.dump(2) << "\n";
    if (!out) throw std::runtime_error(cmd.json + ": cannot write the results");
  }
  return all_accurate ? 0 : 1;
}

}  // namespace gdn::tool

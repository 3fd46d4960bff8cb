// run_case(): one backend on a case's inputs, then the oracle on the same inputs, compared.
#include <chrono>
#include <string>
#include <vector>

#include "harness.h"

namespace gdn::harness {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Runs the backend on host buffers (the cuda backend answers BACKEND_UNAVAILABLE or rejects
// host pointers when the harness has no CUDA), with a host workspace.
gdn_status run_on_host(GeneratedInputs& in, const RunOptions& opt, double* ms) {
  gdn_forward_args a = in.args(opt.backend);
  size_t bytes = 0;
  if (gdn_status s = gdn_forward_workspace_size(&a, &bytes); s != GDN_STATUS_SUCCESS) return s;
  std::vector<unsigned char> workspace(bytes);
  a.workspace = bytes ? workspace.data() : nullptr;
  a.workspace_bytes = bytes;
  const auto start = Clock::now();
  const gdn_status s = gdn_forward(&a);
  *ms = ms_since(start);
  return s;
}

gdn_status run_on_device(GeneratedInputs& in, const RunOptions& opt, double* ms) {
  DeviceBuffers dev(in, opt.device_id);
  size_t bytes = 0;
  gdn_forward_args a = dev.args(in, opt.backend, opt.stream);
  if (gdn_status s = gdn_forward_workspace_size(&a, &bytes); s != GDN_STATUS_SUCCESS) return s;
  a = dev.args(in, opt.backend, opt.stream, bytes);
  const auto start = Clock::now();
  const gdn_status s = gdn_forward(&a);
  dev.synchronize(opt.stream);
  *ms = ms_since(start);
  if (s == GDN_STATUS_SUCCESS) dev.download(in);
  return s;
}

}  // namespace

RunResult run_case(const Case& c, const RunOptions& opt) {
  RunResult result;
  const GeneratedInputs pristine = generate(c);
  GeneratedInputs in = pristine;
  const bool device = opt.backend == GDN_BACKEND_CUDA && DeviceBuffers::compiled() &&
                      gdn_backend_available(GDN_BACKEND_CUDA);
  result.status = device ? run_on_device(in, opt, &result.ms) : run_on_host(in, opt, &result.ms);
  if (result.status != GDN_STATUS_SUCCESS) {
    result.message = gdn_last_error();
    return result;
  }
  if (!opt.compare) return result;
  OracleOutputs oracle;
  result.status = run_oracle(pristine, opt.sample_heads, &oracle);
  if (result.status != GDN_STATUS_SUCCESS) {
    result.message = std::string("oracle: ") + gdn_last_error();
    return result;
  }
  result.errors = check_outputs(pristine, in, oracle);
  return result;
}

}  // namespace gdn::harness

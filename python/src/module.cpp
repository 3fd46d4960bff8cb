// gdn._gdn: the C API as seen from Python. Checks and forwarding only; the option strings,
// output allocation and exceptions live in the Python package (python/gdn).
#include <cstdint>
#include <string>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "gdn/gdn.h"
#include "tensor_view.h"

namespace nb = nanobind;
using gdn_py::Imported;

namespace {

// The arrays of one forward call, in the order gdn/_forward.py passes them.
enum Slot {
  Q, K, V, G, BETA, A, A_LOG, DT_BIAS, INITIAL_STATE, CU_SEQLENS, STATE_INDICES,
  SNAPSHOT_INDICES, O, FINAL_STATE, STATE_SNAPSHOTS, NUM_SLOTS
};
constexpr const char* kSlotName[NUM_SLOTS] = {
    "q", "k", "v", "g", "beta", "a", "A_log", "dt_bias", "initial_state", "cu_seqlens",
    "state_indices", "snapshot_indices", "out", "final_state", "state_snapshots"};
constexpr bool slot_is_output(int s) { return s >= O; }

gdn_tensor* slot_tensor(gdn_forward_args& a, int s) {
  switch (s) {
    case Q: return &a.q;
    case K: return &a.k;
    case V: return &a.v;
    case G: return &a.g;
    case BETA: return &a.beta;
    case A: return &a.a;
    case A_LOG: return &a.A_log;
    case DT_BIAS: return &a.dt_bias;
    case INITIAL_STATE: return &a.initial_state;
    case CU_SEQLENS: return &a.cu_seqlens;
    case STATE_INDICES: return &a.state_indices;
    case SNAPSHOT_INDICES: return &a.snapshot_indices;
    case O: return &a.o;
    case FINAL_STATE: return &a.final_state;
    default: return &a.state_snapshots;
  }
}

nb::object failure(gdn_status status, const std::string& message) {
  return nb::make_tuple(static_cast<int>(status), message);
}

nb::object library_failure(gdn_status status) {
  return failure(status, gdn_last_error());
}

// Runs gdn_forward. Returns None, or (status, message) for the package to raise.
// arrays: NUM_SLOTS objects (None when absent). bf16_bits: bit s set when slot s holds the
// uint16 bits of a bfloat16 array. stream: a cudaStream_t as an integer (0: the legacy default
// stream). alloc_workspace(nbytes) returns a writable byte array on the inputs' device; it is
// called only when the library asks for workspace.
nb::object forward(nb::tuple arrays, uint32_t bf16_bits, int gate, int beta_mode, int head_map,
                   int state_layout, bool qk_l2norm, float scale, int backend, int path,
                   bool host_check_indices, nb::handle error_flags, int num_threads,
                   uintptr_t stream, nb::handle alloc_workspace, int checkpoint_every) {
  if (nb::len(arrays) != NUM_SLOTS)
    return failure(GDN_STATUS_INTERNAL_ERROR, "gdn._gdn.forward: expected " +
                                                  std::to_string(NUM_SLOTS) + " arrays");
  gdn_forward_args args;
  gdn_forward_args_init(&args);
  Imported keep[NUM_SLOTS + 2];  // + error_flags, workspace
  for (int s = 0; s < NUM_SLOTS; ++s) {
    std::string error = gdn_py::view(arrays[s], kSlotName[s], slot_is_output(s),
                                     (bf16_bits >> s) & 1u, &keep[s], slot_tensor(args, s));
    if (!error.empty()) return failure(GDN_STATUS_INVALID_ARGUMENT, error);
  }
  std::string error = gdn_py::flag_word(error_flags, "error_flags", &keep[NUM_SLOTS],
                                        &args.error_flags);
  if (!error.empty()) return failure(GDN_STATUS_INVALID_ARGUMENT, error);

  args.gate = static_cast<gdn_gate_mode>(gate);
  args.beta_mode = static_cast<gdn_beta_mode>(beta_mode);
  args.head_map = static_cast<gdn_head_map>(head_map);
  args.state_layout = static_cast<gdn_state_layout>(state_layout);
  args.qk_l2norm = qk_l2norm ? 1 : 0;
  args.scale = scale;
  args.backend = static_cast<gdn_backend>(backend);
  args.path = static_cast<gdn_path>(path);
  args.host_check_indices = host_check_indices ? 1 : 0;
  args.num_threads = num_threads;
  args.chunk_checkpoint_every = checkpoint_every;
  args.stream = reinterpret_cast<void*>(stream);

  gdn_status status;
  {
    nb::gil_scoped_release unlocked;
    status = gdn_forward(&args);
  }
  // Most calls need no workspace: ask for its size only when the library says it is short.
  // A refused call wrote nothing, so running it again is safe.
  if (status == GDN_STATUS_WORKSPACE_TOO_SMALL) {
    size_t bytes = 0;
    status = gdn_forward_workspace_size(&args, &bytes);
    if (status != GDN_STATUS_SUCCESS) return library_failure(status);
    nb::object buffer = alloc_workspace(bytes);
    gdn_tensor workspace;
    error = gdn_py::view(buffer, "workspace", true, false, &keep[NUM_SLOTS + 1], &workspace);
    if (!error.empty()) return failure(GDN_STATUS_INTERNAL_ERROR, error);
    args.workspace = workspace.data;
    args.workspace_bytes = bytes;
    nb::gil_scoped_release unlocked;
    status = gdn_forward(&args);
  }
  if (status != GDN_STATUS_SUCCESS) return library_failure(status);
  return nb::none();
}

// (0, description) or (status, message).
nb::object cuda_device_info(int index) {
  char buf[512] = {0};
  gdn_status status = gdn_cuda_device_info(index, buf, sizeof buf);
  if (status != GDN_STATUS_SUCCESS) return library_failure(status);
  return nb::make_tuple(0, std::string(buf));
}

}  // namespace

NB_MODULE(_gdn, m) {
  m.doc() = "The gdn C API (gdn/gdn.h) for the gdn Python package; use gdn.forward instead.";

  m.def("forward", &forward, nb::arg("arrays"), nb::arg("bf16_bits"), nb::arg("gate"),
        nb::arg("beta_mode"), nb::arg("head_map"), nb::arg("state_layout"), nb::arg("qk_l2norm"),
        nb::arg("scale"), nb::arg("backend"), nb::arg("path"), nb::arg("host_check_indices"),
        nb::arg("error_flags").none(), nb::arg("num_threads"), nb::arg("stream"),
        nb::arg("alloc_workspace").none(), nb::arg("checkpoint_every") = 0);
  m.def("version", &gdn_version);
  m.def("version_string", &gdn_version_string);
  m.def("backend_available", [](int backend) {
    return gdn_backend_available(static_cast<gdn_backend>(backend)) != 0;
  });
  m.def("cuda_device_count", &gdn_cuda_device_count);
  m.def("cuda_device_info", &cuda_device_info);
  m.def("cpu_simd_target", &gdn_cpu_simd_target);
  m.def("status_string",
        [](int status) { return gdn_status_string(static_cast<gdn_status>(status)); });

  // Option values by the names SPEC.md gives them; the numbers are the C ABI's.
  nb::dict gate, beta_mode, head_map, state_layout, backend, path, status;
  gate["log_decay"] = int(GDN_GATE_LOG_DECAY);
  gate["decay_rate"] = int(GDN_GATE_DECAY_RATE);
  gate["raw"] = int(GDN_GATE_RAW);
  beta_mode["prob"] = int(GDN_BETA_PROB);
  beta_mode["logit"] = int(GDN_BETA_LOGIT);
  head_map["block"] = int(GDN_HEAD_MAP_BLOCK);
  head_map["tiled"] = int(GDN_HEAD_MAP_TILED);
  state_layout["vk"] = int(GDN_STATE_VK);
  state_layout["kv"] = int(GDN_STATE_KV);
  backend["auto"] = int(GDN_BACKEND_AUTO);
  backend["cpu"] = int(GDN_BACKEND_CPU);
  backend["cuda"] = int(GDN_BACKEND_CUDA);
  backend["reference"] = int(GDN_BACKEND_REFERENCE);
  path["auto"] = int(GDN_PATH_AUTO);
  path["recurrent"] = int(GDN_PATH_RECURRENT);
  path["chunked"] = int(GDN_PATH_CHUNKED);
  status["invalid_argument"] = int(GDN_STATUS_INVALID_ARGUMENT);
  status["unsupported"] = int(GDN_STATUS_UNSUPPORTED);
  status["backend_unavailable"] = int(GDN_STATUS_BACKEND_UNAVAILABLE);
  status["workspace_too_small"] = int(GDN_STATUS_WORKSPACE_TOO_SMALL);
  status["device_error"] = int(GDN_STATUS_DEVICE_ERROR);
  status["internal_error"] = int(GDN_STATUS_INTERNAL_ERROR);
  m.attr("GATE") = gate;
  m.attr("BETA_MODE") = beta_mode;
  m.attr("HEAD_MAP") = head_map;
  m.attr("STATE_LAYOUT") = state_layout;
  m.attr("BACKEND") = backend;
  m.attr("PATH") = path;
  m.attr("STATUS") = status;
  m.attr("ERROR_FLAG_CU_SEQLENS") = GDN_ERROR_FLAG_CU_SEQLENS;
  m.attr("ERROR_FLAG_STATE_INDICES") = GDN_ERROR_FLAG_STATE_INDICES;
  m.attr("ERROR_FLAG_SNAPSHOT_INDICES") = GDN_ERROR_FLAG_SNAPSHOT_INDICES;
  m.attr("CHECKPOINT_TOKENS") = GDN_CHECKPOINT_TOKENS;
}

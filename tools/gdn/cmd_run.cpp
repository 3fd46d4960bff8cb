// gdn run: one forward call on tensors read from a safetensors file; o, the final state and the
// snapshots written to another. Shapes and dtypes come from the file; the library validates
// them and its message is the error. The output file appears only when everything succeeded.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <stdexcept>

#include "commands.h"
#include "core/dtype.h"
#include "core/names.h"
#include "device.h"
#include "gdn/gdn.hpp"
#include "safetensors.h"
#include "text.h"

namespace gdn::tool {
namespace {

using harness::HostTensor;

// The input file's tensors, looked up by the names gdn run reads.
class Inputs {
 public:
  explicit Inputs(const std::string& path) : path_(path), file_(read_safetensors(path)) {}

  const std::string& path() const { return path_; }
  HostTensor* find(const std::string& name) {
    auto it = file_.tensors.find(name);
    return it == file_.tensors.end() ? nullptr : &it->second;
  }
  HostTensor& need(const std::string& name, const std::string& role) {
    if (HostTensor* t = find(name)) return *t;
    throw std::runtime_error(path_ + ": no tensor '" + name + "' (" + role + ")");
  }
  // An index tensor (int32 or int64) as int32; int64 values must fit.
  std::optional<HostTensor> indices(const std::string& name) {
    HostTensor* t = find(name);
    if (!t) return std::nullopt;
    if (t->dtype() != GDN_DTYPE_I64) return *t;  // int32, or a dtype the library names
    HostTensor narrowed(GDN_DTYPE_I32, t->shape());
    const int64_t* wide = static_cast<const int64_t*>(t->data());
    int32_t* narrow = static_cast<int32_t*>(narrowed.data());
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (wide[i] < std::numeric_limits<int32_t>::min() || wide[i] > std::numeric_limits<int32_t>::max())
        throw std::runtime_error(path_ + ": " + name + "[" + std::to_string(i) + "] = " +
                                 std::to_string(wide[i]) + " does not fit in int32");
      narrow[i] = int32_t(wide[i]);
    }
    return narrowed;
  }

 private:
  std::string path_;
  TensorFile file_;
};

// A contiguous copy of `t` in `dtype` (states: f32 <-> bf16, rounding to nearest even).
HostTensor converted(const HostTensor& t, gdn_dtype dtype) {
  if (t.dtype() == dtype) return t;
  HostTensor copy(dtype, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) copy.set(i, t.get(i));
  return copy;
}

// A zero-filled output tensor.
HostTensor zeros(gdn_dtype dtype, std::vector<int64_t> shape) {
  HostTensor t(dtype, std::move(shape));
  std::memset(t.data(), 0, t.bytes());
  return t;
}

// `t`'s dimensions but the last `inner` ones, and the i-th from the end (1 when `t` has too
// few: the library then rejects its shape with a message naming it).
std::vector<int64_t> leading_dims(const HostTensor& t, size_t inner) {
  const auto& s = t.shape();
  return s.size() > inner ? std::vector<int64_t>(s.begin(), s.end() - inner) : std::vector<int64_t>{};
}
int64_t dim_from_end(const HostTensor& t, size_t i) {
  const auto& s = t.shape();
  return s.size() > i ? s[s.size() - 1 - i] : 1;
}

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The call's inputs, in the input file (absent optional ones: null).
struct CallInputs {
  HostTensor *q, *k, *v, *beta;
  HostTensor *g = nullptr, *a = nullptr, *A_log = nullptr, *dt_bias = nullptr;  // by gate
  HostTensor *cu_seqlens, *initial_state;
  std::optional<HostTensor> state_indices, snapshot_indices;  // as int32
};

CallInputs read_inputs(Inputs& in, const RunCommand& cmd) {
  CallInputs x;
  x.q = &in.need("q", "queries [N, T, Hk, K] or [T_total, Hk, K]");
  x.k = &in.need("k", "keys, q's shape");
  x.v = &in.need("v", "values [N, T, Hv, V] or [T_total, Hv, V]");
  x.beta = &in.need("beta", "write strengths [N, T, Hv] or [T_total, Hv]");
  if (cmd.gate == GDN_GATE_RAW) {
    x.a = &in.need("a", "gate raw: [N, T, Hv] or [T_total, Hv]");
    x.A_log = &in.need("A_log", "gate raw: [Hv]");
    x.dt_bias = &in.need("dt_bias", "gate raw: [Hv]");
  } else {
    x.g = &in.need("g", "gates [N, T, Hv] or [T_total, Hv]; with --gate raw: a, A_log, dt_bias instead");
  }
  x.cu_seqlens = in.find("cu_seqlens");
  x.initial_state = in.find("initial_state");
  x.state_indices = in.indices("state_indices");
  x.snapshot_indices = in.indices("snapshot_indices");
  if (x.state_indices && !x.initial_state)
    throw std::runtime_error(in.path() + ": state_indices address a state pool, but there is no tensor "
                             "'initial_state' holding it");
  if (x.snapshot_indices && !cmd.snapshots)
    throw std::runtime_error(in.path() + ": snapshot_indices given: add --snapshots to write state_snapshots");
  return x;
}

// The output file's tensors (absent ones: null). A given initial state (or pool) is updated
// in place into final_state, a given snapshot pool into state_snapshots.
struct CallOutputs {
  HostTensor* o;
  HostTensor* final_state = nullptr;
  HostTensor* snapshots = nullptr;
};

CallOutputs make_outputs(const CallInputs& x, Inputs& in, const RunCommand& cmd, TensorFile& out) {
  const gdn_dtype state_dtype = cmd.state_dtype != GDN_DTYPE_NONE ? cmd.state_dtype
                                : x.initial_state                ? x.initial_state->dtype()
                                                                 : GDN_DTYPE_F32;
  const bool vk = cmd.state_layout == GDN_STATE_VK;
  const int64_t K = dim_from_end(*x.q, 0), Hv = dim_from_end(*x.v, 1), V = dim_from_end(*x.v, 0);
  const std::vector<int64_t> state_head = {Hv, vk ? V : K, vk ? K : V};  // [Hv, R, C]

  CallOutputs y;
  y.o = &(out.tensors["o"] = zeros(x.q->dtype(), x.v->shape()));
  if (x.initial_state) {
    y.final_state = &(out.tensors["final_state"] = converted(*x.initial_state, state_dtype));
  } else if (cmd.final_state) {
    // N as the library will read it; a malformed cu_seqlens or v is then rejected by name
    const int64_t N = x.cu_seqlens ? std::max<int64_t>(x.cu_seqlens->numel() - 1, 1)
                      : leading_dims(*x.v, 2).empty() ? 1 : x.v->shape()[0];
    y.final_state = &(out.tensors["final_state"] = zeros(state_dtype, concat({N}, state_head)));
  }
  if (x.snapshot_indices) {
    const HostTensor& pool = in.need("state_snapshots", "the snapshot pool [P2, Hv, V, K] that snapshot_indices address");
    y.snapshots = &(out.tensors["state_snapshots"] = converted(pool, state_dtype));
  } else if (cmd.snapshots) {
    y.snapshots = &(out.tensors["state_snapshots"] = zeros(state_dtype, concat(leading_dims(*x.v, 2), state_head)));
  }
  return y;
}

// The call's arguments, every tensor placed where `backend` runs.
ForwardArgs place_args(const CallInputs& x, const CallOutputs& y, const RunCommand& cmd, gdn_backend backend,
                       Placement& place) {
  ForwardArgs args;
  args.q = place.input(*x.q);
  args.k = place.input(*x.k);
  args.v = place.input(*x.v);
  args.beta = place.input(*x.beta);
  for (auto [tensor, field] : {std::pair{x.g, &args.g}, {x.a, &args.a}, {x.A_log, &args.A_log},
                               {x.dt_bias, &args.dt_bias}, {x.cu_seqlens, &args.cu_seqlens}})
    if (tensor) *field = place.input(*tensor);
  if (x.state_indices) args.state_indices = place.input(*x.state_indices);
  if (x.snapshot_indices) args.snapshot_indices = place.input(*x.snapshot_indices);
  args.o = place.output(*y.o);
  if (x.initial_state) args.initial_state = args.final_state = place.input(*y.final_state);
  else if (y.final_state) args.final_state = place.output(*y.final_state);
  if (y.snapshots) args.state_snapshots = x.snapshot_indices ? place.input(*y.snapshots) : place.output(*y.snapshots);
  args.gate = cmd.gate;
  args.beta_mode = cmd.beta;
  args.head_map = cmd.head_map;
  args.state_layout = cmd.state_layout;
  args.qk_l2norm = cmd.qk_l2norm;
  args.scale = cmd.scale;
  args.backend = backend;
  args.path = cmd.path;
  args.chunk_checkpoint_every = cmd.checkpoint_every;
  args.workspace_bytes = workspace_size(args);
  args.workspace = place.workspace(args.workspace_bytes);
  return args;
}

}  // namespace

int run_command(const RunCommand& cmd) {
  Inputs in(cmd.in);
  const CallInputs x = read_inputs(in, cmd);
  TensorFile out;
  const CallOutputs y = make_outputs(x, in, cmd, out);

  const gdn_backend backend = resolve_backend(cmd.backend);
  Placement place(backend);
  const ForwardArgs args = place_args(x, y, cmd, backend, place);
  const auto start = std::chrono::steady_clock::now();
  forward(args);
  place.synchronize();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  place.fetch(args.o, *y.o);
  if (y.final_state) place.fetch(args.final_state, *y.final_state);
  if (y.snapshots) place.fetch(args.state_snapshots, *y.snapshots);

  out.metadata["producer"] = std::string("gdn ") + gdn_version_string() + " run";
  out.metadata["backend"] = backend_name(backend);
  write_safetensors(cmd.out, out);

  std::cout << "gdn run: " << backend_name(backend) << " backend, " << fixed(ms, 2) << " ms; wrote";
  const char* separator = " ";
  for (const auto& [name, t] : out.tensors) {
    std::cout << separator << name << " " << shape_string(t.shape()) << " " << dtype_name(t.dtype());
    separator = ", ";
  }
  std::cout << " to " << cmd.out << "\n";
  return 0;
}

}  // namespace gdn::tool

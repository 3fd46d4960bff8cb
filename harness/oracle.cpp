// run_oracle(): the f64 reference backend, through the C API, on a case's rounded inputs.
#include <algorithm>

#include "harness.h"
#include "tensor_roles.h"

namespace gdn::harness {
namespace {

// `t` narrowed to its first `count` entries along dimension `dim` (same storage and strides).
gdn_tensor narrow(gdn_tensor t, int dim, int64_t count) {
  if (t.data != nullptr) t.shape[dim] = count;
  return t;
}

HostTensor f64_output(std::vector<int64_t> shape) {
  HostTensor t(GDN_DTYPE_F64, std::move(shape));
  t.fill_poison();  // an element the oracle skips stays NaN and fails every comparison
  return t;
}

}  // namespace

gdn_status run_oracle(const GeneratedInputs& pristine, int64_t sample_heads, OracleOutputs* out) {
  const Case& c = pristine.c;
  const int64_t r = c.Hv / c.Hk;
  // Value heads [0, Hv') fed by key heads [0, Hk'): block map: Hv' = m r, Hk' = m;
  // tiled map: Hv' = m Hk, Hk' = Hk (j = h % Hk still holds with m Hk heads).
  const int64_t unit = c.map == GDN_HEAD_MAP_BLOCK ? r : c.Hk;
  int64_t heads = c.Hv;
  if (sample_heads > 0) heads = std::min(c.Hv, (sample_heads + unit - 1) / unit * unit);
  const int64_t key_heads = c.map == GDN_HEAD_MAP_BLOCK ? heads / r : c.Hk;

  // the inputs are only read: the oracle writes its own f64 outputs, never the initial state
  gdn_forward_args a = build_args(const_cast<GeneratedInputs&>(pristine), GDN_BACKEND_REFERENCE,
                                  nullptr, GDN_DEVICE_CPU, 0);
  a.path = GDN_PATH_AUTO;
  a.q = narrow(a.q, a.q.ndim - 2, key_heads);
  a.k = narrow(a.k, a.k.ndim - 2, key_heads);
  a.v = narrow(a.v, a.v.ndim - 2, heads);
  a.g = narrow(a.g, a.g.ndim - 1, heads);
  a.beta = narrow(a.beta, a.beta.ndim - 1, heads);
  a.a = narrow(a.a, a.a.ndim - 1, heads);
  a.A_log = narrow(a.A_log, 0, heads);
  a.dt_bias = narrow(a.dt_bias, 0, heads);
  // all states share one dtype: the oracle's is f64, and the initial state converts exactly;
  // only the sampled heads are converted ([P, heads, R, C] of [P, Hv, R, C])
  HostTensor initial;
  if (pristine.initial_state.present()) {
    const std::vector<int64_t>& shape = pristine.initial_state.shape();
    const int64_t slots = shape[0], head_elems = shape[2] * shape[3];
    initial = HostTensor(GDN_DTYPE_F64, {slots, heads, shape[2], shape[3]});
#pragma omp parallel for schedule(static) if (slots * heads * head_elems > (int64_t{1} << 20))
    for (int64_t s = 0; s < slots; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < head_elems; ++i)
          initial.set((s * heads + h) * head_elems + i,
                      pristine.initial_state.get((s * c.Hv + h) * head_elems + i));
    a.initial_state = initial.view();
  }

  std::vector<int64_t> tokens =
      c.packed ? std::vector<int64_t>{pristine.T_total} : std::vector<int64_t>{c.N, c.T};
  auto with = [](std::vector<int64_t> lead, std::initializer_list<int64_t> inner) {
    lead.insert(lead.end(), inner.begin(), inner.end());
    return lead;
  };
  const bool vk = c.layout == GDN_STATE_VK;
  const int64_t R = vk ? c.V : c.K, C = vk ? c.K : c.V;

  out->heads = heads;
  out->o = f64_output(with(tokens, {heads, c.V}));
  a.o = out->o.view();
  out->final_state = HostTensor();
  a.final_state = gdn_tensor{};
  if (pristine.final_state_out() != nullptr) {
    out->final_state = f64_output({pristine.state_slots, heads, R, C});
    a.final_state = out->final_state.view();
  }
  out->snapshots = HostTensor();
  if (c.snapshots) out->snapshots = f64_output(with(tokens, {heads, R, C}));
  if (c.snapshot_pool) out->snapshots = f64_output({pristine.snapshot_slots, heads, R, C});
  a.state_snapshots = out->snapshots.view();
  return gdn_forward(&a);
}

}  // namespace gdn::harness

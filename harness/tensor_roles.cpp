// The fixed tensor order of GeneratedInputs, and gdn_forward_args built from it.
#include "tensor_roles.h"

#include <cstring>
#include <stdexcept>

namespace gdn::harness {
namespace {

gdn_tensor& field_of(gdn_forward_args& a, Role role) {
  switch (role) {
    case kQ: return a.q;
    case kK: return a.k;
    case kV: return a.v;
    case kG: return a.g;
    case kBeta: return a.beta;
    case kA: return a.a;
    case kALog: return a.A_log;
    case kDtBias: return a.dt_bias;
    case kInitialState: return a.initial_state;
    case kCuSeqlens: return a.cu_seqlens;
    case kStateIndices: return a.state_indices;
    case kSnapshotIndices: return a.snapshot_indices;
    case kO: return a.o;
    case kFinalState: return a.final_state;
    case kSnapshots: return a.state_snapshots;
    default: throw std::logic_error("field_of: no such role");
  }
}

}  // namespace

const HostTensor& tensor_of(const GeneratedInputs& in, Role role) {
  switch (role) {
    case kQ: return in.q;
    case kK: return in.k;
    case kV: return in.v;
    case kG: return in.g;
    case kBeta: return in.beta;
    case kA: return in.a;
    case kALog: return in.A_log;
    case kDtBias: return in.dt_bias;
    case kInitialState: return in.initial_state;
    case kCuSeqlens: return in.cu_seqlens;
    case kStateIndices: return in.state_indices;
    case kSnapshotIndices: return in.snapshot_indices;
    case kO: return in.o;
    case kFinalState: return in.final_state;
    case kSnapshots: return in.snapshots;
    default: throw std::logic_error("tensor_of: no such role");
  }
}

HostTensor& tensor_of(GeneratedInputs& in, Role role) {
  return const_cast<HostTensor&>(tensor_of(static_cast<const GeneratedInputs&>(in), role));
}

bool written_by_call(const GeneratedInputs& in, Role role) {
  return role == kO || role == kFinalState || role == kSnapshots ||
         (role == kInitialState && in.c.in_place);
}

gdn_forward_args build_args(GeneratedInputs& in, gdn_backend backend, void* const* where,
                            gdn_device_type device, int device_id) {
  gdn_forward_args a;
  gdn_forward_args_init(&a);
  for (int r = 0; r < kRoleCount; ++r) {
    const HostTensor& t = tensor_of(in, Role(r));
    if (t.present()) field_of(a, Role(r)) = t.view(where ? where[r] : nullptr, device, device_id);
  }
  if (in.c.in_place) a.final_state = a.initial_state;
  const Case& c = in.c;
  a.gate = c.gate;
  a.beta_mode = c.beta;
  a.head_map = c.map;
  a.state_layout = c.layout;
  a.qk_l2norm = c.l2norm ? 1 : 0;
  a.scale = c.scale;
  a.backend = backend;
  a.path = c.path;
  a.num_threads = int32_t(c.threads);
  a.chunk_checkpoint_every = int32_t(c.ckpt);
  return a;
}

}  // namespace gdn::harness

namespace gdn::harness {

HostTensor* GeneratedInputs::final_state_out() {
  return c.in_place ? &initial_state : final_state.present() ? &final_state : nullptr;
}

const HostTensor* GeneratedInputs::final_state_out() const {
  return const_cast<GeneratedInputs*>(this)->final_state_out();
}

gdn_forward_args GeneratedInputs::args(gdn_backend backend) {
  return build_args(*this, backend, nullptr, GDN_DEVICE_CPU, 0);
}

void GeneratedInputs::reset_outputs(const GeneratedInputs& pristine) {
  // copied into the existing storage, so that arguments built before stay valid
  for (int r = 0; r < kRoleCount; ++r) {
    HostTensor& t = tensor_of(*this, Role(r));
    const HostTensor& from = tensor_of(pristine, Role(r));
    if (!written_by_call(*this, Role(r)) || !t.present()) continue;
    if (t.bytes() != from.bytes()) throw std::invalid_argument("reset_outputs: another case");
    std::memcpy(t.data(), from.data(), t.bytes());
  }
}

}  // namespace gdn::harness

// Internal to the harness: the tensors of a GeneratedInputs in one fixed order, each with the
// gdn_forward_args field it fills. Host and device argument building share this list.
#pragma once

#include "harness.h"

namespace gdn::harness {

enum Role {
  kQ, kK, kV, kG, kBeta, kA, kALog, kDtBias, kInitialState, kCuSeqlens, kStateIndices,
  kSnapshotIndices, kO, kFinalState, kSnapshots, kRoleCount
};

HostTensor& tensor_of(GeneratedInputs& in, Role role);
const HostTensor& tensor_of(const GeneratedInputs& in, Role role);
// Whether a call may write the tensor of this role in `in` (in place: the initial state).
bool written_by_call(const GeneratedInputs& in, Role role);

// The arguments for `in`, with the storage of role r at where[r] (null: the host storage) on
// `device`. Options come from the case; the backend is given; no workspace, no stream.
gdn_forward_args build_args(GeneratedInputs& in, gdn_backend backend, void* const* where,
                            gdn_device_type device, int device_id);

}  // namespace gdn::harness

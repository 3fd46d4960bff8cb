// Validation of index contents (cu_seqlens, state_indices, snapshot_indices), of state aliasing,
// and of where tensors live.
#include <cstdint>
#include <string>
#include <vector>

#include "core/valid_call.h"

namespace {

using valid::Call;
using valid::Config;
using valid::with;
using valid::expect_invalid;

// ---- cu_seqlens (valid: [0, 1, 3], T_total = 3)

TEST(Validation, RejectsCuSeqlensNotStartingAtZero) {
  Call call(with([](Config& c) { c.packed = true; }));
  call.cu_seqlens() = {1, 1, 3};
  expect_invalid(call, {"cu_seqlens: cu_seqlens[0]=1", "expected 0"});
}

TEST(Validation, RejectsDecreasingCuSeqlens) {
  Call call(with([](Config& c) { c.packed = true; }));
  call.cu_seqlens() = {0, 2, 1};
  expect_invalid(call, {"cu_seqlens: decreases at [2]", "1 after 2"});
}

TEST(Validation, RejectsCuSeqlensNotEndingAtTTotal) {
  for (int32_t end : {2, 4}) {  // short of T_total, and past it
    Call call(with([](Config& c) { c.packed = true; }));
    call.cu_seqlens() = {0, 1, end};
    const std::string value = "cu_seqlens[2]=" + std::to_string(end);
    expect_invalid(call, {"cu_seqlens: ", value.c_str(), "T_total=3"});
  }
}

TEST(Validation, ChecksInt64CuSeqlens) {
  Call call(with([](Config& c) { c.packed = true; }));
  std::vector<int64_t> cu_seqlens = {0, 1, 3};
  call.args.cu_seqlens = gdn::tensor(cu_seqlens.data(), GDN_DTYPE_I64, {3});
  EXPECT_EQ(gdn_forward_can_implement(&call.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  cu_seqlens[2] = (int64_t(1) << 32) + 3;  // would pass if read as 32 bits
  expect_invalid(call, {"cu_seqlens[2]=4294967299", "T_total=3"});
}

// ---- state_indices (valid: [2, 0] into a pool of P = 3)

TEST(Validation, RejectsStateIndicesOutOfRange) {
  for (int32_t slot : {3, -2}) {
    Call call(with([](Config& c) { c.pooled = true; }));
    call.state_indices()[1] = slot;
    const std::string value = "state_indices[1]=" + std::to_string(slot);
    expect_invalid(call, {"state_indices: ", value.c_str(), "outside [-1, P=3)"});
  }
}

TEST(Validation, RejectsDuplicatedLiveStateSlots) {
  Call call(with([](Config& c) { c.pooled = true; }));
  call.state_indices() = {1, 1};
  expect_invalid(call,
                 {"state_indices: slot 1 is used twice", "state_indices[0]", "state_indices[1]"});
}

TEST(Validation, RejectsBadStateIndicesWithoutWritingInPlace) {
  Call call(with([](Config& c) {
    c.pooled = true;
    c.in_place = true;
  }));
  call.state_indices() = {0, 0};
  expect_invalid(call, {"state_indices: slot 0 is used twice"});  // checks every byte, the pool too
}

TEST(Validation, AcceptsSeveralPaddingSlots) {
  Call call(with([](Config& c) { c.pooled = true; }));
  call.state_indices() = {-1, -1};
  EXPECT_EQ(gdn_forward(&call.args), GDN_STATUS_SUCCESS) << gdn_last_error();
}

// ---- snapshot_indices (valid: [[0, 1, 2], [3, 4, 5]] into a pool of P2 = 6)

TEST(Validation, RejectsSnapshotIndicesOutOfRange) {
  Call call(with([](Config& c) { c.snapshots = valid::Snapshots::kPool; }));
  call.snapshot_indices()[5] = 6;
  expect_invalid(call, {"snapshot_indices: snapshot_indices[1, 2]=6", "outside [-1, P2=6)"});
  Call packed(with([](Config& c) {
    c.snapshots = valid::Snapshots::kPool;
    c.packed = true;
  }));
  packed.snapshot_indices()[0] = -3;
  expect_invalid(packed, {"snapshot_indices: snapshot_indices[0]=-3", "outside [-1, P2=6)"});
}

TEST(Validation, RejectsDuplicatedLiveSnapshotSlots) {
  Call call(with([](Config& c) { c.snapshots = valid::Snapshots::kPool; }));
  call.snapshot_indices() = {0, -1, 2, 3, -1, 0};
  expect_invalid(call, {"snapshot_indices: slot 0 is used twice", "[0, 0]", "[1, 2]"});
}

// ---- aliasing of the final state with the initial state

TEST(Validation, AcceptsTheVeryStateInPlace) {
  Call call(with([](Config& c) { c.in_place = true; }));
  EXPECT_EQ(gdn_forward(&call.args), GDN_STATUS_SUCCESS) << gdn_last_error();
}

TEST(Validation, RejectsPartialOverlapOfFinalAndInitialState) {
  Call shifted(with([](Config& c) { c.in_place = true; }));
  // final_state starts at initial_state's second sequence: the two views share half their bytes
  shifted.args.final_state.data =
      static_cast<float*>(shifted.args.initial_state.data) + Call::Hv * 4 * 4;
  expect_invalid(shifted, {"final_state: bytes", "overlap initial_state's", "same view"});
  Call restrided(with([](Config& c) { c.in_place = true; }));
  // the same start, other strides: the same bytes read another way
  restrided.args.final_state.strides[0] = 32;
  restrided.args.final_state.strides[1] = 16;
  restrided.args.final_state.strides[2] = 1;
  restrided.args.final_state.strides[3] = 1;
  expect_invalid(restrided, {"final_state: bytes", "overlap initial_state's"});
}

// ---- devices

TEST(Validation, RejectsTensorsOnDifferentDevices) {
  Call call;
  call.args.k.device_type = GDN_DEVICE_CUDA;
  expect_invalid(call, {"k: device_type cuda", "q has device_type cpu"});
  Config cuda;
  cuda.device = GDN_DEVICE_CUDA;
  cuda.backend = GDN_BACKEND_CUDA;
  cuda.K = cuda.V = 64;
  Call ids(cuda);
  ids.args.o.device_id = 1;
  expect_invalid(ids, {"o: device_id 1", "q has device_id 0"});
}

TEST(Validation, RejectsCudaTensorsOnHostBackends) {
  for (gdn_backend backend : {GDN_BACKEND_CPU, GDN_BACKEND_REFERENCE}) {
    Config c;
    c.device = GDN_DEVICE_CUDA;
    c.backend = backend;
    expect_invalid(Call(c), {"q: device_type cuda",
                             backend == GDN_BACKEND_CPU ? "cpu backend" : "reference backend"});
  }
}

TEST(Validation, RejectsHostTensorsOnTheCudaBackend) {
  Config c;
  c.backend = GDN_BACKEND_CUDA;
  c.K = c.V = 64;
  expect_invalid(Call(c), {"q: device_type cpu", "cuda backend"});
}

// Backend AUTO follows the tensors: the table's message names the backend it resolved to.
TEST(Validation, AutoBackendFollowsTheTensors) {
  Config host;
  host.backend = GDN_BACKEND_AUTO;
  host.K = 300;
  valid::expect_unsupported(Call(host), {"K: 300", "cpu recurrent path"});
  Config cuda = host;
  cuda.device = GDN_DEVICE_CUDA;
  valid::expect_unsupported(Call(cuda), {"K: 300", "cuda recurrent path"});
}

// Device-resident index contents are the kernel's to check (unless host_check_indices): validation
// must not read them, so a bad slot there is not an INVALID_ARGUMENT from validation.
TEST(Validation, LeavesDeviceIndexContentsToTheKernel) {
  if (gdn_backend_available(GDN_BACKEND_CUDA))
    GTEST_SKIP() << "needs a build or machine without CUDA";
  Config c;
  c.device = GDN_DEVICE_CUDA;
  c.backend = GDN_BACKEND_CUDA;
  c.K = c.V = 64;
  c.pooled = true;
  Call call(c);
  call.state_indices() = {7, 7};
  valid::expect_rejected(call, GDN_STATUS_BACKEND_UNAVAILABLE, {"cuda"});
}

}  // namespace

// Validation of shapes that must agree between tensors, and of dtypes.
#include <vector>

#include "core/valid_call.h"

namespace {

using valid::Call;
using valid::Config;
using valid::with;
using valid::expect_invalid;
using valid::expect_unsupported;

// One dimension of one tensor off by one: the message names the tensor, the dimension with its
// value, and the tensor it disagrees with with its value.
TEST(Validation, RejectsShapeMismatch) {
  struct Case {
    const char* what;
    void (*change)(Config&);  // the valid call to start from
    void (*breaks)(gdn_forward_args&);
    std::vector<const char*> parts;
  };
  const Case cases[] = {
      {"k's K",
       [](Config&) {},
       [](gdn_forward_args& a) { a.k.shape[3] = 3; },
       {"k: K=3", "q has K=4"}},
      {"v's N",
       [](Config&) {},
       [](gdn_forward_args& a) { a.v.shape[0] = 1; },
       {"v: N=1", "q has N=2"}},
      {"v's T",
       [](Config&) {},
       [](gdn_forward_args& a) { a.v.shape[1] = 2; },
       {"v: T=2", "q has T=3"}},
      {"o's V",
       [](Config&) {},
       [](gdn_forward_args& a) { a.o.shape[3] = 5; },
       {"o: V=5", "v has V=4"}},
      {"g's Hv",
       [](Config&) {},
       [](gdn_forward_args& a) { a.g.shape[2] = 1; },
       {"g: Hv=1", "v has Hv=2"}},
      {"beta's T",
       [](Config&) {},
       [](gdn_forward_args& a) { a.beta.shape[1] = 4; },
       {"beta: T=4", "q has T=3"}},
      {"a's Hv",
       [](Config& c) { c.raw = true; },
       [](gdn_forward_args& a) { a.a.shape[2] = 3; },
       {"a: Hv=3", "v has Hv=2"}},
      {"A_log's Hv",
       [](Config& c) { c.raw = true; },
       [](gdn_forward_args& a) { a.A_log.shape[0] = 1; },
       {"A_log: Hv=1", "v has Hv=2"}},
      {"dt_bias's Hv",
       [](Config& c) { c.raw = true; },
       [](gdn_forward_args& a) { a.dt_bias.shape[0] = 3; },
       {"dt_bias: Hv=3", "v has Hv=2"}},
      {"packed v's T_total",
       [](Config& c) { c.packed = true; },
       [](gdn_forward_args& a) { a.v.shape[0] = 4; },
       {"v: T_total=4", "q has T_total=3"}},
      {"initial_state's N",
       [](Config&) {},
       [](gdn_forward_args& a) { a.initial_state.shape[0] = 3; },
       {"initial_state: N=3", "q has N=2"}},
      {"packed final_state's N",
       [](Config& c) { c.packed = true; },
       [](gdn_forward_args& a) { a.final_state.shape[0] = 1; },
       {"final_state: N=1", "cu_seqlens has N=2"}},
      {"initial_state's K (vk)",
       [](Config&) {},
       [](gdn_forward_args& a) { a.initial_state.shape[3] = 5; },
       {"initial_state: K=5", "q has K=4"}},
      {"final_state's Hv",
       [](Config&) {},
       [](gdn_forward_args& a) { a.final_state.shape[1] = 1; },
       {"final_state: Hv=1", "v has Hv=2"}},
      {"state_indices' N",
       [](Config& c) { c.pooled = true; },
       [](gdn_forward_args& a) { a.state_indices.shape[0] = 3; },
       {"state_indices: N=3", "q has N=2"}},
      {"dense snapshots' T",
       [](Config& c) { c.snapshots = valid::Snapshots::kDense; },
       [](gdn_forward_args& a) { a.state_snapshots.shape[1] = 2; },
       {"state_snapshots: T=2", "q has T=3"}},
      {"pooled snapshots' V",
       [](Config& c) { c.snapshots = valid::Snapshots::kPool; },
       [](gdn_forward_args& a) { a.state_snapshots.shape[2] = 3; },
       {"state_snapshots: V=3", "v has V=4"}},
      {"snapshot_indices' T",
       [](Config& c) { c.snapshots = valid::Snapshots::kPool; },
       [](gdn_forward_args& a) { a.snapshot_indices.shape[1] = 2; },
       {"snapshot_indices: T=2", "q has T=3"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Call call(with(c.change));
    c.breaks(call.args);
    expect_invalid(call, c.parts);
  }
}

// In the kv layout the state's last two dimensions are [K, V].
TEST(Validation, RejectsStateShapeOfTheOtherLayout) {
  Config c;
  c.K = 4;
  c.V = 8;  // the valid call's states are [N, Hv, V=8, K=4]: right for vk only
  Call call(c);
  call.args.state_layout = GDN_STATE_KV;
  expect_invalid(call, {"initial_state: K=8", "q has K=4"});
}

TEST(Validation, RejectsFinalStateShapeDifferentFromInitial) {
  Call call(with([](Config& c) { c.pooled = true; }));
  call.args.final_state.shape[0] = 2;  // a pool of 2 slots, initial_state's has 3
  expect_invalid(call, {"final_state: P=2", "initial_state has P=3"});
}

TEST(Validation, RejectsHvNotMultipleOfHk) {
  Call call;
  call.args.q.shape[2] = 3;  // Hk = 3, Hv = 2
  call.args.k.shape[2] = 3;
  expect_invalid(call, {"v: Hv=2 is not a multiple of Hk=3"});
}

TEST(Validation, RejectsCuSeqlensWithoutASequence) {
  Call call(with([](Config& c) { c.packed = true; }));
  call.args.cu_seqlens.shape[0] = 1;
  expect_invalid(call, {"cu_seqlens: N+1=1", "at least 2"});
}

// ---- dtypes

TEST(Validation, RejectsNonFloatInputs) {
  Call call;
  call.args.q.dtype = GDN_DTYPE_I32;
  call.args.k.dtype = GDN_DTYPE_I32;
  call.args.v.dtype = GDN_DTYPE_I32;
  call.args.o.dtype = GDN_DTYPE_I32;
  expect_invalid(call, {"q: dtype i32", "floating-point"});
}

TEST(Validation, RejectsInputDtypeMismatch) {
  Call k;
  k.args.k.dtype = GDN_DTYPE_BF16;
  expect_invalid(k, {"k: dtype bf16", "q has dtype f32"});
  Call v(with([](Config& c) { c.dtype = GDN_DTYPE_BF16; }));
  v.args.v.dtype = GDN_DTYPE_F16;
  expect_invalid(v, {"v: dtype f16", "q has dtype bf16"});
}

TEST(Validation, RejectsOutputDtypeMismatch) {
  Call f32_for_bf16(with([](Config& c) { c.dtype = GDN_DTYPE_BF16; }));
  f32_for_bf16.args.o.dtype = GDN_DTYPE_F32;
  expect_invalid(f32_for_bf16, {"o: dtype f32", "q has dtype bf16"});
  Call f64_on_cpu(with([](Config& c) { c.backend = GDN_BACKEND_CPU; }));
  f64_on_cpu.args.o.dtype = GDN_DTYPE_F64;  // only the reference writes f64
  expect_invalid(f64_on_cpu, {"o: dtype f64", "q has dtype f32", "reference"});
}

TEST(Validation, AcceptsF64OutputsOnTheReference) {
  Config c;
  c.dtype = GDN_DTYPE_BF16;
  Call call(c);
  std::vector<double> o(size_t(Call::N * Call::T * Call::Hv * c.V));
  call.args.o = gdn::tensor(o.data(), GDN_DTYPE_F64, {Call::N, Call::T, Call::Hv, c.V});
  EXPECT_EQ(gdn_forward(&call.args), GDN_STATUS_SUCCESS) << gdn_last_error();
}

TEST(Validation, RejectsPerHeadInputDtype) {
  Call g;
  g.args.g.dtype = GDN_DTYPE_F16;  // neither f32 nor q's f32
  expect_invalid(g, {"g: dtype f16", "f32 or q's dtype f32"});
  Call beta(with([](Config& c) { c.dtype = GDN_DTYPE_BF16; }));
  beta.args.beta.dtype = GDN_DTYPE_F16;
  expect_invalid(beta, {"beta: dtype f16", "f32 or q's dtype bf16"});
  Call A_log(with([](Config& c) { c.raw = true; }));
  A_log.args.A_log.dtype = GDN_DTYPE_I32;
  expect_invalid(A_log, {"A_log: dtype i32"});
}

TEST(Validation, AcceptsPerHeadInputsInQsDtype) {
  Call call(with([](Config& c) { c.dtype = GDN_DTYPE_BF16; }));
  call.args.g.dtype = GDN_DTYPE_BF16;  // reinterprets zero bytes: still zeros
  call.args.beta.dtype = GDN_DTYPE_BF16;
  EXPECT_EQ(gdn_forward(&call.args), GDN_STATUS_SUCCESS) << gdn_last_error();
}

TEST(Validation, RejectsStateDtype) {
  Call integer;
  integer.args.initial_state.dtype = GDN_DTYPE_I32;
  expect_invalid(integer, {"initial_state: dtype i32", "floating-point"});
  Call mixed;
  mixed.args.final_state.dtype = GDN_DTYPE_BF16;
  expect_invalid(mixed, {"final_state: dtype bf16", "initial_state has dtype f32"});
  Call snapshots(with([](Config& c) { c.snapshots = valid::Snapshots::kDense; }));
  snapshots.args.state_snapshots.dtype = GDN_DTYPE_F64;
  expect_invalid(snapshots, {"state_snapshots: dtype f64", "initial_state has dtype f32"});
}

TEST(Validation, RejectsIndexDtypes) {
  Call cu(with([](Config& c) { c.packed = true; }));
  cu.args.cu_seqlens.dtype = GDN_DTYPE_F32;
  expect_invalid(cu, {"cu_seqlens: dtype f32", "i32 or i64"});
  Call state(with([](Config& c) { c.pooled = true; }));
  state.args.state_indices.dtype = GDN_DTYPE_I64;
  expect_invalid(state, {"state_indices: dtype i64", "expected i32"});
  Call snapshot(with([](Config& c) { c.snapshots = valid::Snapshots::kPool; }));
  snapshot.args.snapshot_indices.dtype = GDN_DTYPE_F32;
  expect_invalid(snapshot, {"snapshot_indices: dtype f32", "expected i32"});
}

// ---- the configuration table: valid, but no kernel

TEST(Validation, RejectsHeadDimensionsOutsideTheTable) {
  Config big_K;
  big_K.K = 300;
  expect_unsupported(Call(big_K), {"K: 300", "reference recurrent path", "1..256"});
  Config big_V;
  big_V.V = 257;
  big_V.backend = GDN_BACKEND_CPU;
  expect_unsupported(Call(big_V), {"V: 257", "cpu recurrent path", "1..256"});
  Config cuda;  // host memory labelled CUDA: validation never reads it
  cuda.K = 200;
  cuda.V = 64;
  cuda.device = GDN_DEVICE_CUDA;
  cuda.backend = GDN_BACKEND_CUDA;
  expect_unsupported(Call(cuda),
                     {"K: 200 is not supported by the cuda recurrent path (supported: 64, 128)"});
}

TEST(Validation, RejectsDtypesOutsideTheTable) {
  Config f64_inputs;
  f64_inputs.dtype = GDN_DTYPE_F64;
  f64_inputs.backend = GDN_BACKEND_CPU;
  expect_unsupported(Call(f64_inputs), {"q: dtype f64", "cpu recurrent path", "f32, f16, bf16"});
  Config f16_state;
  f16_state.state_dtype = GDN_DTYPE_F16;
  expect_unsupported(Call(f16_state),
                     {"initial_state: dtype f16", "reference recurrent path", "f32, bf16, f64"});
  Config f64_state;
  f64_state.state_dtype = GDN_DTYPE_F64;
  f64_state.backend = GDN_BACKEND_CPU;
  expect_unsupported(Call(f64_state), {"initial_state: dtype f64", "cpu recurrent path"});
}

}  // namespace

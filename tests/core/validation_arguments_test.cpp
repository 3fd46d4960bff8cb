// Validation of options, required and gate-specific tensors, and what every tensor must be
// (dtype, rank, sizes, strides, 64-bit extent, alignment, device type).
#include <cmath>
#include <limits>
#include <utility>

#include "core/valid_call.h"

namespace {

using valid::Call;
using valid::Config;
using valid::with;
using valid::expect_invalid;
using valid::expect_unsupported;

TEST(Validation, AcceptsEveryBaselineVariant) {
  for (bool packed : {false, true})
    for (bool pooled : {false, true})
      for (bool in_place : {false, true})
        for (bool raw : {false, true})
          for (valid::Snapshots snapshots :
               {valid::Snapshots::kNone, valid::Snapshots::kDense, valid::Snapshots::kPool}) {
            Config c;
            c.packed = packed;
            c.pooled = pooled;
            c.in_place = in_place;
            c.raw = raw;
            c.snapshots = snapshots;
            Call call(c);
            SCOPED_TRACE(testing::Message()
                         << "packed " << packed << " pooled " << pooled << " in_place " << in_place
                         << " raw " << raw << " snapshots " << int(snapshots));
            EXPECT_EQ(gdn_forward_can_implement(&call.args), GDN_STATUS_SUCCESS)
                << gdn_last_error();
            EXPECT_EQ(gdn_forward(&call.args), GDN_STATUS_SUCCESS) << gdn_last_error();
          }
}

TEST(Validation, RejectsNullArgs) {
  EXPECT_EQ(gdn_forward(nullptr), GDN_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(valid::contains(gdn_last_error(), "args"));
  EXPECT_EQ(gdn_forward_can_implement(nullptr), GDN_STATUS_INVALID_ARGUMENT);
  size_t bytes = 1;
  EXPECT_EQ(gdn_forward_workspace_size(nullptr, &bytes), GDN_STATUS_INVALID_ARGUMENT);
  Call call;
  EXPECT_EQ(gdn_forward_workspace_size(&call.args, nullptr), GDN_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(valid::contains(gdn_last_error(), "bytes"));
}

TEST(Validation, RejectsEnumOutOfRange) {
  struct Case {
    void (*set)(gdn_forward_args&);
    const char* name;
    const char* value;
  };
  const Case cases[] = {
      {[](gdn_forward_args& a) { valid::store_int(a.gate, 7); }, "gate", "7"},
      {[](gdn_forward_args& a) { valid::store_int(a.beta_mode, 2); }, "beta_mode", "2"},
      {[](gdn_forward_args& a) { valid::store_int(a.head_map, -1); }, "head_map", "-1"},
      {[](gdn_forward_args& a) { valid::store_int(a.state_layout, 5); }, "state_layout", "5"},
      {[](gdn_forward_args& a) { valid::store_int(a.backend, 9); }, "backend", "9"},
      {[](gdn_forward_args& a) { valid::store_int(a.path, 3); }, "path", "3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Call call;
    c.set(call.args);
    expect_invalid(call, {c.name, c.value});
  }
}

TEST(Validation, RejectsNonFiniteScale) {
  for (float scale :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Call call;
    call.args.scale = scale;
    expect_invalid(call, {"scale", std::isnan(scale) ? "nan" : "inf"});
  }
}

TEST(Validation, RejectsNegativeNumThreads) {
  Call call;
  call.args.num_threads = -2;
  expect_invalid(call, {"num_threads", "-2"});
}

TEST(Validation, RejectsBadChunkCheckpoints) {
  Call without_snapshots;
  without_snapshots.args.chunk_checkpoint_every = 2;
  expect_invalid(without_snapshots, {"chunk_checkpoint_every", "2", "128 tokens", "state_snapshots"});
  Call negative;
  negative.args.chunk_checkpoint_every = -1;
  expect_invalid(negative, {"chunk_checkpoint_every", "-1"});
}

TEST(Validation, RejectsMisalignedErrorFlags) {
  Call call;
  alignas(8) unsigned char word[8] = {};
  call.args.error_flags = reinterpret_cast<uint32_t*>(word + 2);
  expect_invalid(call, {"error_flags", "aligned"});
}

using Member = gdn_tensor gdn_forward_args::*;

TEST(Validation, RejectsNullRequiredTensor) {
  const std::pair<const char*, Member> required[] = {{"q: ", &gdn_forward_args::q},
                                                     {"k: ", &gdn_forward_args::k},
                                                     {"v: ", &gdn_forward_args::v},
                                                     {"beta: ", &gdn_forward_args::beta},
                                                     {"o: ", &gdn_forward_args::o}};
  for (const auto& [name, member] : required) {
    SCOPED_TRACE(name);
    Call call;
    (call.args.*member).data = nullptr;
    expect_invalid(call, {name, "null"});
  }
}

TEST(Validation, RejectsMissingG) {
  Call call;
  call.args.g.data = nullptr;
  expect_invalid(call, {"g: ", "null", "log_decay"});
}

TEST(Validation, RejectsGWithRawGate) {
  Call log_decay;
  Call call(with([](Config& c) { c.raw = true; }));
  call.args.g = log_decay.args.g;
  expect_invalid(call, {"g: ", "raw"});
}

TEST(Validation, RejectsRawGateWithoutItsTensors) {
  const std::pair<const char*, Member> raw_only[] = {{"a: ", &gdn_forward_args::a},
                                                     {"A_log: ", &gdn_forward_args::A_log},
                                                     {"dt_bias: ", &gdn_forward_args::dt_bias}};
  for (const auto& [name, member] : raw_only) {
    SCOPED_TRACE(name);
    Call call(with([](Config& c) { c.raw = true; }));
    (call.args.*member).data = nullptr;
    expect_invalid(call, {name, "null", "raw"});
  }
}

TEST(Validation, RejectsRawTensorsWithOtherGates) {
  for (gdn_gate_mode gate : {GDN_GATE_LOG_DECAY, GDN_GATE_DECAY_RATE}) {
    Call a, A_log, dt_bias;
    a.args.gate = A_log.args.gate = dt_bias.args.gate = gate;
    a.args.a = a.a();
    A_log.args.A_log = A_log.A_log();
    dt_bias.args.dt_bias = dt_bias.dt_bias();
    const char* gate_name = gate == GDN_GATE_LOG_DECAY ? "log_decay" : "decay_rate";
    expect_invalid(a, {"a: ", "only gate raw", gate_name});
    expect_invalid(A_log, {"A_log", "only gate raw", gate_name});
    expect_invalid(dt_bias, {"dt_bias", "only gate raw", gate_name});
  }
}

TEST(Validation, RejectsStateIndicesWithoutStates) {
  Call call(with([](Config& c) { c.pooled = true; }));
  call.args.initial_state = gdn_tensor{};
  call.args.final_state = gdn_tensor{};
  expect_invalid(call, {"state_indices", "without initial_state or final_state"});
}

TEST(Validation, RejectsSnapshotIndicesWithoutSnapshots) {
  Call call(with([](Config& c) { c.snapshots = valid::Snapshots::kPool; }));
  call.args.state_snapshots = gdn_tensor{};
  expect_invalid(call, {"snapshot_indices", "without state_snapshots"});
}

TEST(Validation, RejectsUnknownDtype) {
  Call call;
  valid::store_int(call.args.v.dtype, 42);
  expect_invalid(call, {"v: ", "dtype 42", "not a tensor dtype"});
}

TEST(Validation, RejectsWrongNdim) {
  Call dense;
  dense.args.q.ndim = 3;  // a packed shape without cu_seqlens
  expect_invalid(dense, {"q: ", "ndim=3", "expected 4", "[N, T, Hk, K]"});
  Call packed(with([](Config& c) { c.packed = true; }));
  packed.args.beta.ndim = 3;
  expect_invalid(packed, {"beta", "ndim=3", "expected 2", "[T_total, Hv]"});
  Call snapshots(with([](Config& c) { c.snapshots = valid::Snapshots::kDense; }));
  snapshots.args.state_snapshots.ndim = 4;
  expect_invalid(snapshots, {"state_snapshots", "ndim=4", "[N, T, Hv, V, K]"});
}

TEST(Validation, RejectsZeroOrNegativeSize) {
  Call zero;
  zero.args.v.shape[1] = 0;
  expect_invalid(zero, {"v: ", "T=0", "not positive"});
  Call negative;
  negative.args.k.shape[3] = -1;
  expect_invalid(negative, {"k: ", "K=-1"});
  Call no_sequences(with([](Config& c) { c.pooled = true; }));
  no_sequences.args.initial_state.shape[0] = 0;
  expect_invalid(no_sequences, {"initial_state", "P=0"});
}

TEST(Validation, RejectsUnknownDeviceType) {
  Call call;
  valid::store_int(call.args.beta.device_type, 0);
  expect_invalid(call, {"beta", "device_type 0"});
}

TEST(Validation, RejectsLastStrideOtherThanOne) {
  Call call;
  // o [N, T, Hv, V] with every element two apart
  call.args.o.strides[0] = 48;
  call.args.o.strides[1] = 16;
  call.args.o.strides[2] = 8;
  call.args.o.strides[3] = 2;
  expect_invalid(call, {"o: ", "stride of V is 2", "expected 1"});
}

TEST(Validation, RejectsNonPositiveStride) {
  Call call;
  call.args.q.strides[0] = 12;
  call.args.q.strides[1] = 0;  // a broadcast over T is not a layout gdn reads
  call.args.q.strides[2] = 4;
  call.args.q.strides[3] = 1;
  expect_invalid(call, {"q: ", "stride of T is 0"});
}

TEST(Validation, RejectsMisalignedPointer) {
  Call f32;
  f32.args.k.data = static_cast<unsigned char*>(f32.args.k.data) + 2;
  expect_invalid(f32, {"k: ", "aligned to 4 bytes", "f32"});
  Call bf16(with([](Config& c) { c.state_dtype = GDN_DTYPE_BF16; }));
  bf16.args.final_state.data = static_cast<unsigned char*>(bf16.args.final_state.data) + 1;
  expect_invalid(bf16, {"final_state", "aligned to 2 bytes", "bf16"});
  Call indices(with([](Config& c) { c.pooled = true; }));
  indices.args.state_indices.data =
      static_cast<unsigned char*>(indices.args.state_indices.data) + 1;
  expect_invalid(indices, {"state_indices", "aligned to 4 bytes"});
}

TEST(Validation, RejectsSizesOverflowing64Bits) {
  Call shape;
  shape.args.q.shape[0] = int64_t(1) << 40;  // N T Hk K = 2^40 * 2^40 * ...
  shape.args.q.shape[1] = int64_t(1) << 40;
  expect_invalid(shape, {"q: ", "overflows 64 bits", "1099511627776"});
  Call strides;
  const int64_t huge = int64_t(1) << 62;
  strides.args.v.strides[0] = huge;  // (N - 1) * 2^62 * 4 bytes
  strides.args.v.strides[1] = 8;
  strides.args.v.strides[2] = 4;
  strides.args.v.strides[3] = 1;
  expect_invalid(strides, {"v: ", "overflows 64 bits", "4611686018427387904"});
}

TEST(Validation, RejectsChunkedPathOnHostBackends) {
  Call cpu(with([](Config& c) { c.backend = GDN_BACKEND_CPU; }));
  cpu.args.path = GDN_PATH_CHUNKED;
  expect_unsupported(cpu, {"path: chunked", "cpu backend", "recurrent"});
  Call reference;
  reference.args.path = GDN_PATH_CHUNKED;
  expect_unsupported(reference, {"path: chunked", "reference backend"});
}

}  // namespace

// The cuda backend's device-side contract, beyond numerics:
//   - invalid index contents in device memory (cu_seqlens, state_indices, snapshot_indices):
//     the sequence writes nothing, the others are right, the flag is raised;
//   - one kernel per call, capturable in a CUDA graph, replayed to the same result;
//   - two streams running different problems concurrently both match;
//   - host memory or misaligned tensors given to the cuda backend, and device memory given to
//     the cpu backend, are rejected, nothing written;
//   - host_check_indices reports bad device-resident indices before launch, nothing written;
//   - the decode kernel with plain bf16 inputs fixed at compile time gives the generic
//     kernel's bits;
//   - back-to-back decode steps launched early (programmatic dependent launch) chain their
//     state as steps launched one after the other do, plain and captured in a graph;
//   - the host cost of a plain launch (reported).
// Every test skips without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace gdn::cuda_test {
namespace {

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(expr)

// A case's buffers on the device, the pristine host copy, and the oracle of the pristine inputs.
struct DeviceCase {
  GeneratedInputs pristine, out;
  std::unique_ptr<DeviceBuffers> dev;
  OracleOutputs oracle;
  gdn_forward_args args{};

  explicit DeviceCase(Case c, void* stream = nullptr) {
    c.seed = fresh_seed();
    c.path = GDN_PATH_RECURRENT;
    pristine = generate(c);
    out = pristine;
    dev = std::make_unique<DeviceBuffers>(out, 0);
    args = dev->args(out, GDN_BACKEND_CUDA, stream);
    EXPECT_EQ(run_oracle(pristine, 0, &oracle), GDN_STATUS_SUCCESS) << gdn_last_error();
  }
  void download() { dev->download(out); }
  Errors check() const { return check_outputs(pristine, out, oracle); }
};

// Element offset of token `p` (dense: n * T + t) and value head h in o, V elements from there.
int64_t o_index(const Case& c, int64_t p, int64_t h) { return (p * c.Hv + h) * c.V; }

// Writes `value` over element `index` of an int32 / int64 index tensor on the device.
void poke(const gdn_tensor& t, int64_t index, int64_t value) {
  const size_t size = t.dtype == GDN_DTYPE_I64 ? 8 : 4;
  const int32_t v32 = int32_t(value);
  const void* src = size == 8 ? static_cast<const void*>(&value) : static_cast<const void*>(&v32);
  ASSERT_EQ(cudaMemcpy(static_cast<char*>(t.data) + index * int64_t(size), src, size, cudaMemcpyHostToDevice),
            cudaSuccess);
}

// After a call in which sequence `bad` had an invalid index entry: its outputs still hold
// poison, its state slot (if any) is unchanged, and every other sequence matches the oracle.
void expect_only_sequence_skipped(const DeviceCase& d, int64_t bad) {
  const Case& c = d.pristine.c;
  const int64_t tokens = d.pristine.bos[size_t(bad) + 1] - d.pristine.bos[size_t(bad)];
  ASSERT_GT(tokens, 0);
  // its o rows: untouched poison
  for (int64_t p = d.pristine.bos[size_t(bad)]; p < d.pristine.bos[size_t(bad) + 1]; ++p)
    for (int64_t i = o_index(c, p, 0); i < o_index(c, p + 1, 0); ++i)
      ASSERT_TRUE(same_bits(d.pristine.o, d.out.o, i)) << "o element " << i << " of the skipped sequence changed";
  // its state slot: unchanged
  const HostTensor* before = d.pristine.final_state_out();
  const HostTensor* after = d.out.final_state_out();
  if (before && d.pristine.slot[size_t(bad)] >= 0) {
    const int64_t per_slot = c.Hv * c.K * c.V, s = d.pristine.slot[size_t(bad)];
    for (int64_t i = s * per_slot; i < (s + 1) * per_slot; ++i)
      ASSERT_TRUE(same_bits(*before, *after, i)) << "state element " << i << " of the skipped sequence changed";
  }
  // the other sequences' o: as the oracle's
  double diff = 0, ref = 0;
  for (int64_t n = 0; n < int64_t(d.pristine.slot.size()); ++n) {
    if (n == bad) continue;
    for (int64_t p = d.pristine.bos[size_t(n)]; p < d.pristine.bos[size_t(n) + 1]; ++p)
      for (int64_t i = o_index(c, p, 0); i < o_index(c, p + 1, 0); ++i) {
        const double x = d.out.o.get(i), r = d.oracle.o.get(i);
        diff += (x - r) * (x - r);
        ref += r * r;
      }
  }
  EXPECT_LE(std::sqrt(diff / ref), cuda_tolerance(c).o);
}

TEST(InvalidIndices, CuSeqlensPastTheEnd) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("seqlens=3:5:2:4,Hk=2,Hv=4,K=64,V=64,layout=kv"));
  const ErrorWord flags;
  d.args.error_flags = flags.ptr;
  // cu_seqlens[N] = T_total + 5: the last sequence ends past the batch
  poke(d.args.cu_seqlens, 4, d.pristine.T_total + 5);
  ASSERT_EQ(gdn_forward(&d.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  d.download();
  EXPECT_EQ(flags.read(), GDN_ERROR_FLAG_CU_SEQLENS);
  expect_only_sequence_skipped(d, 3);
}

TEST(InvalidIndices, CuSeqlensNotStartingAtZero) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("seqlens=3:5:2,Hk=2,Hv=4,K=128,V=128,cu64=1"));
  const ErrorWord flags;
  d.args.error_flags = flags.ptr;
  poke(d.args.cu_seqlens, 0, 1);  // sequence 0 would start at token 1
  ASSERT_EQ(gdn_forward(&d.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  d.download();
  EXPECT_EQ(flags.read(), GDN_ERROR_FLAG_CU_SEQLENS);
  expect_only_sequence_skipped(d, 0);
}

TEST(InvalidIndices, StateIndexOutOfPool) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("N=4,T=2,Hk=2,Hv=4,K=128,V=128,dtype=bf16,pool=6,inplace=1"));
  const ErrorWord flags;
  d.args.error_flags = flags.ptr;
  poke(d.args.state_indices, 2, 6);  // P = 6: out of [-1, P)
  ASSERT_EQ(gdn_forward(&d.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  d.download();
  EXPECT_EQ(flags.read(), GDN_ERROR_FLAG_STATE_INDICES);
  expect_only_sequence_skipped(d, 2);
}

TEST(InvalidIndices, StateIndexBelowMinusOne) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("N=3,T=1,Hk=2,Hv=4,K=64,V=64,pool=5,layout=kv"));
  const ErrorWord flags;
  d.args.error_flags = flags.ptr;
  poke(d.args.state_indices, 0, -2);
  ASSERT_EQ(gdn_forward(&d.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  d.download();
  EXPECT_EQ(flags.read(), GDN_ERROR_FLAG_STATE_INDICES);
  expect_only_sequence_skipped(d, 0);
}

TEST(InvalidIndices, SnapshotIndexOutOfPool) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("N=3,T=4,Hk=2,Hv=4,K=128,V=128,snap=pool"));
  const ErrorWord flags;
  d.args.error_flags = flags.ptr;
  const int64_t P2 = d.pristine.snapshot_slots;
  poke(d.args.snapshot_indices, 1 * 4 + 3, P2);  // sequence 1, token 3
  ASSERT_EQ(gdn_forward(&d.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  d.download();
  EXPECT_EQ(flags.read(), GDN_ERROR_FLAG_SNAPSHOT_INDICES);
  expect_only_sequence_skipped(d, 1);
  // none of its valid snapshot slots was written either
  const int64_t per_slot = d.pristine.c.Hv * d.pristine.c.K * d.pristine.c.V;
  for (int64_t t = 0; t < 3; ++t) {
    const int64_t s = int64_t(d.pristine.snapshot_indices.get(1 * 4 + t));
    if (s < 0) continue;
    for (int64_t i = s * per_slot; i < (s + 1) * per_slot; ++i)
      ASSERT_TRUE(same_bits(d.pristine.snapshots, d.out.snapshots, i)) << "snapshot slot " << s << " written";
  }
}

TEST(InvalidIndices, ValidCallLeavesFlagsClear) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("seqlens=2:0:3,Hk=2,Hv=4,K=64,V=64,pool=5,pad=1,snap=pool"));
  const ErrorWord flags;
  d.args.error_flags = flags.ptr;
  ASSERT_EQ(gdn_forward(&d.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  d.download();
  EXPECT_EQ(flags.read(), 0u);
  const Errors e = d.check();
  EXPECT_TRUE(e.pass(cuda_tolerance(d.pristine.c))) << report(d.pristine.c, e);
}

TEST(Graph, CapturedDecodeStepReplaysToTheOracle) {
  GDN_SKIP_WITHOUT_GPU();
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceCase d(parse_case("N=6,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16,gate=raw,beta=logit,l2norm=1,"
                          "pool=8,pad=1"),
               stream);
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const gdn_status status = gdn_forward(&d.args);
  const std::string message = gdn_last_error();
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_EQ(status, GDN_STATUS_SUCCESS) << message;
  size_t nodes = 0;
  CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
  EXPECT_EQ(nodes, 1u) << "one kernel per call";
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    d.out.reset_outputs(d.pristine);
    d.dev->upload(d.out);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    d.download();
    const Errors e = d.check();
    EXPECT_TRUE(e.pass(cuda_tolerance(d.pristine.c))) << "replay " << replay << ": " << report(d.pristine.c, e);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(Streams, TwoProblemsConcurrently) {
  GDN_SKIP_WITHOUT_GPU();
  cudaStream_t s1, s2;
  CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  DeviceCase a(parse_case("N=64,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16"), s1);
  DeviceCase b(parse_case("seqlens=40:1:0:77,Hk=2,Hv=6,K=64,V=128,layout=kv,sdtype=bf16,l2norm=1"), s2);
  // b first on its stream, then a: both in flight together (nothing synchronises in between)
  ASSERT_EQ(gdn_forward(&b.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  ASSERT_EQ(gdn_forward(&a.args), GDN_STATUS_SUCCESS) << gdn_last_error();
  CUDA_OK(cudaStreamSynchronize(s1));
  CUDA_OK(cudaStreamSynchronize(s2));
  a.download();
  b.download();
  const Errors ea = a.check(), eb = b.check();
  EXPECT_TRUE(ea.pass(cuda_tolerance(a.pristine.c))) << report(a.pristine.c, ea);
  EXPECT_TRUE(eb.pass(cuda_tolerance(b.pristine.c))) << report(b.pristine.c, eb);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
}

// Runs each recurrent case twice, the second time with environment variable `name` set to
// `value` (a library switch between kernels that must agree), and asserts that o, the final
// state and the snapshots of the two runs have the same bits. `first` (or null: unset) is the
// variable's value for the first run.
void expect_same_bits_when_switched(const char* name, const char* first, const char* value,
                                    std::initializer_list<const char*> cases) {
  for (const char* text : cases) {
    Case c = parse_case(text);
    c.seed = fresh_seed();
    c.path = GDN_PATH_RECURRENT;
    const GeneratedInputs pristine = generate(c);
    GeneratedInputs runs[2] = {pristine, pristine};
    for (int r = 0; r < 2; ++r) {
      if (const char* v = r == 0 ? first : value) setenv(name, v, 1);
      DeviceBuffers dev(runs[r], 0);
      gdn_forward_args a = dev.args(runs[r], GDN_BACKEND_CUDA, nullptr);
      const gdn_status s = gdn_forward(&a);
      unsetenv(name);
      ASSERT_EQ(s, GDN_STATUS_SUCCESS) << text << ": " << gdn_last_error();
      dev.synchronize(nullptr);
      dev.download(runs[r]);
    }
    for (int64_t i = 0; i < runs[0].o.numel(); ++i)
      ASSERT_TRUE(same_bits(runs[0].o, runs[1].o, i)) << text << ": o at " << i;
    const HostTensor &s0 = *runs[0].final_state_out(), &s1 = *runs[1].final_state_out();
    for (int64_t i = 0; i < s0.numel(); ++i) ASSERT_TRUE(same_bits(s0, s1, i)) << text << ": state at " << i;
    if (runs[0].snapshots.present())
      for (int64_t i = 0; i < runs[0].snapshots.numel(); ++i)
        ASSERT_TRUE(same_bits(runs[0].snapshots, runs[1].snapshots, i)) << text << ": snapshot at " << i;
  }
}

// The kernels specialised for plain and for serving bf16 inputs (decode_launch.h, chosen by
// default for such calls: one token; several tokens, plain) compute what the generic ones do,
// in the same order: the same bits, with a pool, padding, in place, snapshots and packed
// batches, for an f32 and a bf16 state, both head dims, f32 and bf16 gate inputs.
// GDN_DECODE_FORM=generic runs the generic kernels.
TEST(DecodeForms, SpecialisedFormsMatchGeneric) {
  GDN_SKIP_WITHOUT_GPU();
  expect_same_bits_when_switched(
      "GDN_DECODE_FORM", nullptr, "generic",
      {"N=5,T=1,Hk=2,Hv=6,K=128,V=128,dtype=bf16,pool=8,pad=1,inplace=1,scale=0.3",
       "N=4,T=1,Hk=2,Hv=4,K=64,V=128,dtype=bf16,sdtype=bf16,pool=6,pad=1,map=tiled",
       "N=5,T=1,Hk=2,Hv=6,K=128,V=128,dtype=bf16,gate=raw,beta=logit,l2norm=1,pool=8,pad=1,inplace=1,scale=0.3",
       "N=4,T=1,Hk=2,Hv=4,K=64,V=128,dtype=bf16,gdtype=bf16,sdtype=bf16,gate=raw,beta=logit,l2norm=1,pool=6,pad=1,"
       "map=tiled",
       // several tokens, the plain inputs: snapshots, pools, packed, a bf16 state
       "N=3,T=5,Hk=2,Hv=6,K=128,V=128,dtype=bf16,snap=1,pool=6,pad=1,inplace=1,scale=0.3",
       "seqlens=3:0:1:7,Hk=2,Hv=4,K=64,V=128,dtype=bf16,sdtype=bf16,snap=pool,pool=8,pad=1,map=tiled"});
}

// The state's cache hints (streaming or plain: decode_streams_state chooses by the call's size
// between the two instances of the plain and serving one-token forms, K = 128, f32 state;
// GDN_DECODE_STATE_HINTS forces either) change where lines live in the caches, never the bits.
// The other calls (several tokens, kv, a bf16 state) stream either way.
TEST(DecodeForms, StateCacheHintsGiveTheSameBits) {
  GDN_SKIP_WITHOUT_GPU();
  expect_same_bits_when_switched(
      "GDN_DECODE_STATE_HINTS", "stream", "plain",
      {"N=5,T=1,Hk=2,Hv=6,K=128,V=128,dtype=bf16,pool=8,pad=1,inplace=1",
       "N=5,T=1,Hk=2,Hv=6,K=128,V=128,dtype=bf16,gate=raw,beta=logit,l2norm=1,pool=8,pad=1,inplace=1,scale=0.3",
       "N=3,T=3,Hk=2,Hv=4,K=128,V=128,dtype=bf16,snap=1",
       "N=3,T=2,Hk=2,Hv=4,K=128,V=128,dtype=bf16,layout=kv,snap=pool,pool=6,pad=1",
       "N=4,T=1,Hk=2,Hv=4,K=64,V=128,dtype=bf16,sdtype=bf16,layout=kv,pool=6,pad=1,inplace=1"});
}

// The plain one-token form's instance with the first token's input addresses formed before the
// wait (chosen for dense grids of more than one wave; GDN_DECODE_FIRST_INPUTS forces either)
// changes when the loads go out, never the bits.
TEST(DecodeForms, FirstInputsEarlyGivesTheSameBits) {
  GDN_SKIP_WITHOUT_GPU();
  expect_same_bits_when_switched(
      "GDN_DECODE_FIRST_INPUTS", "late", "early",
      {"N=5,T=1,Hk=2,Hv=6,K=128,V=128,dtype=bf16,pool=8,pad=1,inplace=1,scale=0.3",
       "N=3,T=1,Hk=1,Hv=3,K=128,V=128,dtype=bf16,map=tiled",
       "seqlens=1:0:1,Hk=2,Hv=4,K=128,V=128,dtype=bf16,pool=6,pad=1"});
}

// Eight in-place decode steps back to back on one stream, each reading the state the previous
// one wrote: launched early (the default on sm_90) they give the bits of steps launched one
// after the other (GDN_DECODE_EARLY_LAUNCH=0), issued plainly and replayed from a graph. A step
// that read before its predecessor finished would read a stale state and differ.
TEST(EarlyLaunch, BackToBackStepsChainTheirState) {
  GDN_SKIP_WITHOUT_GPU();
  constexpr int kSteps = 8;
  Case c = parse_case("N=3,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16,pool=5,pad=1,inplace=1");
  c.seed = fresh_seed();
  c.path = GDN_PATH_RECURRENT;
  const GeneratedInputs pristine = generate(c);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<GeneratedInputs> runs;
  for (const bool early : {false, true})
    for (const bool graph : {false, true}) {
      GeneratedInputs in = pristine;
      if (!early) setenv("GDN_DECODE_EARLY_LAUNCH", "0", 1);
      DeviceBuffers dev(in, 0);
      gdn_forward_args a = dev.args(in, GDN_BACKEND_CUDA, stream);
      cudaGraph_t g = nullptr;
      if (graph) CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      gdn_status s = GDN_STATUS_SUCCESS;
      for (int step = 0; step < kSteps && s == GDN_STATUS_SUCCESS; ++step) s = gdn_forward(&a);
      const std::string message = gdn_last_error();
      if (graph) CUDA_OK(cudaStreamEndCapture(stream, &g));
      unsetenv("GDN_DECODE_EARLY_LAUNCH");
      ASSERT_EQ(s, GDN_STATUS_SUCCESS) << message;
      if (graph) {
        cudaGraphExec_t exec;
        CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(g);
      }
      dev.synchronize(stream);
      dev.download(in);
      runs.push_back(std::move(in));
    }
  const GeneratedInputs& ref = runs[0];  // plain launches, not early
  for (size_t r = 1; r < runs.size(); ++r) {
    for (int64_t i = 0; i < ref.o.numel(); ++i)
      ASSERT_TRUE(same_bits(ref.o, runs[r].o, i)) << "run " << r << ": o at " << i;
    const HostTensor &a = *ref.final_state_out(), &b = *runs[r].final_state_out();
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_TRUE(same_bits(a, b, i)) << "run " << r << ": state at " << i;
  }
  cudaStreamDestroy(stream);
}

TEST(Rejects, HostMemoryLabelledCuda) {
  GDN_SKIP_WITHOUT_GPU();
  GeneratedInputs pristine = generate(parse_case("N=2,T=1,Hk=2,Hv=4,K=64,V=64"));
  GeneratedInputs in = pristine;
  gdn_forward_args a = in.args(GDN_BACKEND_CUDA);
  for (gdn_tensor* t : {&a.q, &a.k, &a.v, &a.g, &a.beta, &a.initial_state, &a.o, &a.final_state})
    t->device_type = GDN_DEVICE_CUDA;
  EXPECT_EQ(gdn_forward(&a), GDN_STATUS_INVALID_ARGUMENT);
  const std::string message = gdn_last_error();
  EXPECT_NE(message.find("host memory"), std::string::npos) << message;
  EXPECT_EQ(message.rfind("q:", 0), 0u) << message;
  for (int64_t i = 0; i < in.o.numel(); ++i) ASSERT_TRUE(same_bits(pristine.o, in.o, i)) << "o written";
}

TEST(Rejects, DeviceMemoryLabelledCpu) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("N=2,T=1,Hk=2,Hv=4,K=64,V=64"));
  gdn_forward_args a = d.args;  // device pointers, described as host memory for the cpu backend
  a.backend = GDN_BACKEND_CPU;
  for (gdn_tensor* t : {&a.q, &a.k, &a.v, &a.g, &a.beta, &a.initial_state, &a.o, &a.final_state})
    t->device_type = GDN_DEVICE_CPU;
  EXPECT_EQ(gdn_forward(&a), GDN_STATUS_INVALID_ARGUMENT);
  const std::string message = gdn_last_error();
  EXPECT_EQ(message.rfind("q:", 0), 0u) << message;
  EXPECT_NE(message.find("CUDA device memory"), std::string::npos) << message;
  d.download();
  for (int64_t i = 0; i < d.out.o.numel(); ++i) ASSERT_TRUE(same_bits(d.pristine.o, d.out.o, i)) << "o written";
}

TEST(HostCheckIndices, BadStateIndexRejectedBeforeLaunch) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("N=4,T=2,Hk=2,Hv=4,K=128,V=128,dtype=bf16,pool=6,inplace=1"));
  poke(d.args.state_indices, 1, 9);  // P = 6: out of [-1, P)
  d.args.host_check_indices = 1;
  EXPECT_EQ(gdn_forward(&d.args), GDN_STATUS_INVALID_ARGUMENT);
  const std::string message = gdn_last_error();
  EXPECT_EQ(message.rfind("state_indices:", 0), 0u) << message;
  EXPECT_NE(message.find("9"), std::string::npos) << message;
  d.download();  // nothing written: every output and every pool slot as before
  for (int64_t i = 0; i < d.out.o.numel(); ++i) ASSERT_TRUE(same_bits(d.pristine.o, d.out.o, i)) << "o written";
  const HostTensor* before = d.pristine.final_state_out();
  const HostTensor* after = d.out.final_state_out();
  for (int64_t i = 0; i < before->numel(); ++i) ASSERT_TRUE(same_bits(*before, *after, i)) << "state written";
}

TEST(Rejects, MisalignedVectorAccess) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("N=2,T=1,Hk=2,Hv=4,K=64,V=64,dtype=bf16"));
  d.args.q.data = static_cast<char*>(d.args.q.data) + 2;  // bf16-aligned, not 16-byte aligned
  EXPECT_EQ(gdn_forward_can_implement(&d.args), GDN_STATUS_INVALID_ARGUMENT);
  const std::string message = gdn_last_error();
  EXPECT_EQ(message.rfind("q:", 0), 0u) << message;
  EXPECT_NE(message.find("16-byte"), std::string::npos) << message;
}

// The host side of one plain call (validation, pointer checks, the launch), at decode B = 1:
// reported, not asserted (a timed test is at the mercy of the machine's other load); the
// budget is shown against the figure by `gdn bench --backend cuda` (decode-B1-vk-plain).
TEST(HostCost, PlainLaunch) {
  GDN_SKIP_WITHOUT_GPU();
  DeviceCase d(parse_case("N=1,T=1,Hk=16,Hv=32,K=128,V=128,dtype=bf16,inplace=1"));
  using Clock = std::chrono::steady_clock;
  constexpr int kCalls = 2000;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(gdn_forward(&d.args), GDN_STATUS_SUCCESS);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<double> us;
  for (int i = 0; i < kCalls; ++i) {
    const auto start = Clock::now();
    const gdn_status s = gdn_forward(&d.args);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    ASSERT_EQ(s, GDN_STATUS_SUCCESS);
    if (i % 100 == 99) CUDA_OK(cudaDeviceSynchronize());  // keep the launch queue short
  }
  cudaPointerAttributes attr;
  const auto start = Clock::now();
  for (int i = 0; i < kCalls; ++i) cudaPointerGetAttributes(&attr, d.args.q.data);
  const double pga = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kCalls;
  std::sort(us.begin(), us.end());
  const double median = us[us.size() / 2];
  double mean = 0;
  for (double x : us) mean += x / kCalls;
  std::printf("[ host cost ] gdn_forward plain launch: median %.2f us, mean %.2f us per call; "
              "cudaPointerGetAttributes: %.3f us\n",
              median, mean, pga);
  RecordProperty("gdn_forward_median_us", std::to_string(median));
  RecordProperty("gdn_forward_mean_us", std::to_string(mean));
  RecordProperty("cudaPointerGetAttributes_us", std::to_string(pga));
}

}  // namespace
}  // namespace gdn::cuda_test

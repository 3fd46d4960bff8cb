// `gdn run` end to end: safetensors files built here from the harness's generated inputs, the
// binary run on them, and what it wrote compared with the oracle run through the C API (the
// harness's run_oracle and check_outputs: errors, padding zeros, untouched pool slots). Bad
// files, missing tensors and wrong shapes fail with a message and leave no output file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "harness/harness.h"
#include "safetensors.h"
#include "tool/tool_process.h"

namespace fs = std::filesystem;
using gdn::harness::Case;
using gdn::harness::GeneratedInputs;
using gdn::harness::HostTensor;
using gdn::tool::read_safetensors;
using gdn::tool::TensorFile;
using gdn::tool::write_safetensors;
using gdn::tool::test::slurp;
using gdn::tool::test::ToolResult;

namespace {

// The inputs `gdn run` reads, under the names it reads them by.
TensorFile input_file(const GeneratedInputs& in) {
  TensorFile f;
  auto put = [&](const char* name, const HostTensor& t) {
    if (t.present()) f.tensors[name] = t;
  };
  put("q", in.q);
  put("k", in.k);
  put("v", in.v);
  put("g", in.g);
  put("beta", in.beta);
  put("a", in.a);
  put("A_log", in.A_log);
  put("dt_bias", in.dt_bias);
  put("initial_state", in.initial_state);
  put("cu_seqlens", in.cu_seqlens);
  put("state_indices", in.state_indices);
  put("snapshot_indices", in.snapshot_indices);
  if (in.c.snapshot_pool) put("state_snapshots", in.snapshots);
  return f;
}

// The options that say what the case's fields say.
std::string options(const Case& c) {
  std::string s;
  if (c.gate == GDN_GATE_DECAY_RATE) s += " --gate decay_rate";
  if (c.gate == GDN_GATE_RAW) s += " --gate raw";
  if (c.beta == GDN_BETA_LOGIT) s += " --beta logit";
  if (c.map == GDN_HEAD_MAP_TILED) s += " --head-map tiled";
  if (c.layout == GDN_STATE_KV) s += " --state-layout kv";
  if (c.l2norm) s += " --qk-l2norm";
  if (c.scale != 0) s += " --scale " + std::to_string(c.scale);
  if (c.snapshots || c.snapshot_pool) s += " --snapshots";
  if (c.ckpt) s += " --checkpoint-every " + std::to_string(c.ckpt);
  if (!c.initial_state && c.final_state) s += " --final-state";
  return s;
}

HostTensor to_dtype(const HostTensor& t, gdn_dtype dtype) {
  HostTensor copy(dtype, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) copy.set(i, t.get(i));
  return copy;
}

void copy_into(const TensorFile& result, const char* name, HostTensor& to) {
  ASSERT_TRUE(result.tensors.count(name)) << "no " << name << " in the output";
  const HostTensor& from = result.tensors.at(name);
  ASSERT_EQ(from.shape(), to.shape()) << name;
  ASSERT_EQ(from.dtype(), to.dtype()) << name;
  ASSERT_EQ(from.bytes(), to.bytes()) << name;
  std::memcpy(to.data(), from.data(), from.bytes());
}

// What the tool wrote, put where a backend would have written it, checked like a backend.
void expect_matches_oracle(const GeneratedInputs& pristine, const TensorFile& result) {
  GeneratedInputs after = pristine;
  copy_into(result, "o", after.o);
  if (HostTensor* state = after.final_state_out())
    copy_into(result, "final_state", *state);
  else
    EXPECT_FALSE(result.tensors.count("final_state"));
  if (after.snapshots.present())
    copy_into(result, "state_snapshots", after.snapshots);
  else
    EXPECT_FALSE(result.tensors.count("state_snapshots"));

  gdn::harness::OracleOutputs oracle;
  ASSERT_EQ(gdn::harness::run_oracle(pristine, 0, &oracle), GDN_STATUS_SUCCESS) << gdn_last_error();
  const gdn::harness::Errors e = gdn::harness::check_outputs(pristine, after, oracle);
  const gdn::harness::Tolerance tol = gdn::harness::tolerance(pristine.c, GDN_BACKEND_CPU, pristine.c.path);
  EXPECT_TRUE(e.pass(tol)) << e.detail << "; o " << e.o << ", state " << e.final_state << ", snapshots "
                           << e.snapshots;
}

class ToolRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gdn_run_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  ToolResult tool(const std::string& args) const { return gdn::tool::test::run_tool(args, dir_.string()); }

  ToolResult run_on(const TensorFile& in, const std::string& options) const {
    write_safetensors(path("in.safetensors"), in);
    return tool("run --in " + path("in.safetensors") + " --out " + path("out.safetensors") + options);
  }

  // The case's inputs through `gdn run` (its file optionally edited first), against the oracle.
  void round_trip(const std::string& case_text, const std::function<void(TensorFile&)>& edit = {},
                  const std::string& extra_options = "", const std::string& backend = "cpu") {
    const GeneratedInputs in = gdn::harness::generate(gdn::harness::parse_case(case_text));
    TensorFile file = input_file(in);
    if (edit) edit(file);
    const ToolResult r = run_on(file, " --backend " + backend + options(in.c) + extra_options);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("gdn run: " + backend + " backend"), std::string::npos) << r.out;
    expect_matches_oracle(in, read_safetensors(path("out.safetensors")));
  }

  // A failing run: nonzero status, the message on stderr, no output file and no temporary one.
  void expect_rejected(const TensorFile& in, const std::string& options, const std::string& message) {
    const ToolResult r = run_on(in, options);
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("gdn run: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("out.safetensors")));
    for (const auto& entry : fs::directory_iterator(dir_))
      EXPECT_EQ(entry.path().filename().string().find(".partial"), std::string::npos) << entry.path();
  }

  fs::path dir_;
};

const char* const kSmall = "Hk=2,Hv=4,K=32,V=32";

}  // namespace

TEST_F(ToolRun, Dense) { round_trip(std::string("N=2,T=9,inplace=1,") + kSmall); }

TEST_F(ToolRun, DenseWithoutInitialStateWritesTheFinalState) {
  round_trip(std::string("N=2,T=9,h0=0,") + kSmall);
}

TEST_F(ToolRun, OutputsOnly) { round_trip(std::string("N=2,T=5,h0=0,ht=0,") + kSmall); }

TEST_F(ToolRun, PackedBf16) { round_trip(std::string("N=3,T=10,packed=1,inplace=1,dtype=bf16,") + kSmall); }

TEST_F(ToolRun, PackedInt64CuSeqlens) { round_trip(std::string("N=4,T=6,packed=1,cu64=1,inplace=1,") + kSmall); }

TEST_F(ToolRun, PoolWithPaddingUpdatedInPlace) {
  round_trip(std::string("N=4,T=5,pool=7,pad=1,inplace=1,") + kSmall);
}

TEST_F(ToolRun, PoolWithInt64StateIndices) {
  round_trip(std::string("N=4,T=3,pool=6,pad=1,inplace=1,packed=1,layout=kv,") + kSmall, [](TensorFile& f) {
    f.tensors["state_indices"] = to_dtype(f.tensors.at("state_indices"), GDN_DTYPE_I64);
  });
}

TEST_F(ToolRun, DenseSnapshots) { round_trip(std::string("N=2,T=4,snap=1,inplace=1,") + kSmall); }

TEST_F(ToolRun, SnapshotPool) { round_trip(std::string("N=3,T=4,snap=pool,pool=8,pad=1,inplace=1,") + kSmall); }

// State checkpoints into the pool the file gives (its other slots come back as they were).
TEST_F(ToolRun, CheckpointPool) {
  round_trip(std::string("N=2,T=150,snap=pool,pool=3,pad=1,inplace=1,ckpt=1,") + kSmall);
}

TEST_F(ToolRun, GateRawLogitBetaTiledMap) {
  round_trip("N=2,T=7,Hk=2,Hv=6,K=32,V=32,gate=raw,beta=logit,map=tiled,inplace=1");
}

TEST_F(ToolRun, DecayRateL2NormScale) {
  round_trip(std::string("N=2,T=7,gate=decay_rate,l2norm=1,scale=0.5,inplace=1,") + kSmall);
}

TEST_F(ToolRun, KvLayout) { round_trip("N=2,T=7,Hk=2,Hv=4,K=32,V=48,layout=kv,inplace=1"); }

TEST_F(ToolRun, StateConvertedToTheRequestedDtype) {
  // the file's initial state in f32 (bf16 values, exactly); written back in bf16
  round_trip(std::string("N=2,T=6,sdtype=bf16,inplace=1,") + kSmall,
             [](TensorFile& f) { f.tensors["initial_state"] = to_dtype(f.tensors.at("initial_state"), GDN_DTYPE_F32); },
             " --state-dtype bf16");
}

TEST_F(ToolRun, StateKeepsTheFileDtype) { round_trip(std::string("N=2,T=6,sdtype=bf16,inplace=1,") + kSmall); }

TEST_F(ToolRun, ReferenceBackend) {
  round_trip(std::string("N=2,T=5,inplace=1,") + kSmall, {}, "", "reference");
}

TEST_F(ToolRun, RejectsAFileThatIsNotSafetensors) {
  std::ofstream(path("in.safetensors")) << "this is not a safetensors file";
  const ToolResult r = tool("run --in " + path("in.safetensors") + " --out " + path("out.safetensors"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find(path("in.safetensors") + ": "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out.safetensors")));
}

TEST_F(ToolRun, RejectsAMissingFile) {
  const ToolResult r = tool("run --in " + path("absent.safetensors") + " --out " + path("out.safetensors"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("cannot open"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(path("out.safetensors")));
}

TEST_F(ToolRun, RejectsMissingTensorsNamingThem) {
  const GeneratedInputs in = gdn::harness::generate(gdn::harness::parse_case(std::string("N=2,T=3,") + kSmall));
  TensorFile no_v = input_file(in);
  no_v.tensors.erase("v");
  expect_rejected(no_v, " --backend cpu", "no tensor 'v'");
  // gate raw needs a, A_log and dt_bias, which a log_decay file lacks
  expect_rejected(input_file(in), " --backend cpu --gate raw", "no tensor 'a'");
}

TEST_F(ToolRun, RejectsWrongShapesWithTheLibrarysMessage) {
  const GeneratedInputs in = gdn::harness::generate(gdn::harness::parse_case(std::string("N=2,T=3,") + kSmall));
  TensorFile f = input_file(in);
  f.tensors["v"] = HostTensor(GDN_DTYPE_F32, {2, 3, 3, 32});  // Hv = 3, not a multiple of Hk = 2
  std::memset(f.tensors["v"].data(), 0, f.tensors["v"].bytes());
  expect_rejected(f, " --backend cpu", "v: ");
}

TEST_F(ToolRun, RejectsAPoolWithoutItsStates) {
  const GeneratedInputs in =
      gdn::harness::generate(gdn::harness::parse_case(std::string("N=3,T=2,pool=5,pad=1,inplace=1,") + kSmall));
  TensorFile f = input_file(in);
  f.tensors.erase("initial_state");
  expect_rejected(f, " --backend cpu", "no tensor 'initial_state'");
}

TEST_F(ToolRun, RejectsIndicesThatDoNotFitInt32) {
  const GeneratedInputs in =
      gdn::harness::generate(gdn::harness::parse_case(std::string("N=3,T=2,pool=5,inplace=1,") + kSmall));
  TensorFile f = input_file(in);
  HostTensor wide = to_dtype(f.tensors.at("state_indices"), GDN_DTYPE_I64);
  static_cast<int64_t*>(wide.data())[1] = int64_t(1) << 40;
  f.tensors["state_indices"] = wide;
  expect_rejected(f, " --backend cpu", "state_indices[1] = 1099511627776 does not fit in int32");
}

TEST_F(ToolRun, AFailedRunLeavesAnExistingOutputAlone) {
  const GeneratedInputs in = gdn::harness::generate(gdn::harness::parse_case(std::string("N=2,T=3,") + kSmall));
  TensorFile f = input_file(in);
  f.tensors.erase("q");
  std::ofstream(path("out.safetensors")) << "previous result";
  const ToolResult r = run_on(f, " --backend cpu");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(slurp(path("out.safetensors")), "previous result");
}

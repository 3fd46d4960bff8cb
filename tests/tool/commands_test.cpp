// `gdn check`, `gdn bench`, `gdn demo` and `gdn info` as a user runs them: exit status, what
// they print, and the JSON files they write (bench: BENCH.md's results-file fields).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/harness.h"
#include "tool/tool_process.h"

namespace fs = std::filesystem;
using gdn::tool::test::ToolResult;
using nlohmann::json;

namespace {

class ToolCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gdn_commands_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  ToolResult tool(const std::string& args) const { return gdn::tool::test::run_tool(args, dir_.string()); }
  json read_json(const std::string& name) const { return json::parse(std::ifstream(path(name))); }

  fs::path dir_;
};

}  // namespace

TEST_F(ToolCommands, CheckPassesTwoCasesAndWritesJson) {
  const ToolResult r = tool("check N=2,T=9,Hk=1,Hv=2,K=16,V=16 N=3,T=1,Hk=2,Hv=4,K=32,V=32,layout=kv,dtype=bf16 "
                            "--json " + path("check.json"));
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 passed, 0 failed"), std::string::npos) << r.out;
  const json results = read_json("check.json");
  EXPECT_EQ(results["backend"], "cpu");
  ASSERT_EQ(results["cases"].size(), 2u);
  for (const json& c : results["cases"]) {
    EXPECT_TRUE(c["pass"].get<bool>()) << c.dump();
    EXPECT_LE(c["rel_err_o"].get<double>(), c["tol_o"].get<double>());
  }
}

TEST_F(ToolCommands, CheckRejectsABadCaseString) {
  const ToolResult r = tool("check N=2,T=9,Hk=2,Hv=3");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("Hv=3"), std::string::npos) << r.err;
}

TEST_F(ToolCommands, CheckListsTheBuiltInCases) {
  const ToolResult r = tool("check --list");
  ASSERT_EQ(r.status, 0) << r.err;
  const size_t lines = size_t(std::count(r.out.begin(), r.out.end(), '\n'));
  EXPECT_EQ(lines, gdn::harness::builtin_cases().size());
}

// --random N: N cases drawn from the seed, the same ones for the same seed, all passing; with
// case strings it is refused.
TEST_F(ToolCommands, CheckRandomCasesRepeatFromTheirSeed) {
  const ToolResult listed = tool("check --random 6 --seed 11 --list");
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_EQ(std::count(listed.out.begin(), listed.out.end(), '\n'), 6) << listed.out;
  EXPECT_EQ(tool("check --random 6 --seed 11 --list").out, listed.out);
  EXPECT_NE(tool("check --random 6 --seed 12 --list").out, listed.out);
  const ToolResult r = tool("check --random 6 --seed 11");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("--random 6 --seed 11"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("6 passed, 0 failed"), std::string::npos) << r.out;
  EXPECT_NE(tool("check N=2,T=9,Hk=1,Hv=2,K=16,V=16 --random 2").status, 0);
}

TEST_F(ToolCommands, BenchWritesBenchMdResults) {
  const ToolResult r = tool("bench --backend cpu --repeat 2 --commit abc123 --json " + path("bench.json") +
                            " --cases N=2,T=1,Hk=2,Hv=4,K=64,V=64 name=tiny-prefill,N=1,T=40,Hk=1,Hv=2,K=32,V=32");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const json results = read_json("bench.json");
  for (const char* field : {"date", "gpu", "driver", "commit", "peer", "cases"})
    EXPECT_TRUE(results.contains(field)) << field;
  EXPECT_EQ(results["commit"], "abc123");
  EXPECT_TRUE(results["gpu"].is_null());
  ASSERT_EQ(results["cases"].size(), 2u);
  const json& decode = results["cases"][0];
  const json& prefill = results["cases"][1];
  EXPECT_EQ(prefill["name"], "tiny-prefill");
  for (const json& c : {decode, prefill}) {
    EXPECT_GT(c["ours_ms"].get<double>(), 0);
    EXPECT_TRUE(c["peer_ms"].is_null());
    EXPECT_TRUE(c["ratio"].is_null());
    EXPECT_EQ(c["timing"], "wall");
    EXPECT_GT(c["tokens_per_s"].get<double>(), 0);
    EXPECT_GT(c["reference_ms"].get<double>(), 0);
    EXPECT_TRUE(c["accurate"].get<bool>());
    EXPECT_LT(c["rel_err_o"].get<double>(), 4e-3);  // bf16 outputs, BENCH.md's dtype
  }
  EXPECT_GT(decode["state_gbps"].get<double>(), 0);
  EXPECT_FALSE(prefill.contains("state_gbps"));
}

TEST_F(ToolCommands, BenchRejectsAnUnknownCase) {
  const ToolResult r = tool("bench --cases no-such-case");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--cases no-such-case"), std::string::npos) << r.err;
}

TEST_F(ToolCommands, DemoPassesOnTheCpu) {
  const ToolResult r = tool("demo --backend cpu --quick");
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("demo PASS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("prefill"), std::string::npos);
  EXPECT_NE(r.out.find("decode"), std::string::npos);
}

TEST_F(ToolCommands, InfoNamesVersionAndBackends) {
  const ToolResult r = tool("info");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find(std::string("gdn ") + gdn_version_string()), std::string::npos) << r.out;
  for (const char* line : {"reference", "cpu", "cuda", "SIMD target", "cores"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line;
}

// The harness's own checks: case strings, the generated inputs' distributions and structure,
// and that check_outputs() catches each kind of wrong output.
#include "harness/harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

namespace gdn::harness {
namespace {

TEST(CaseString, RoundTripsEveryBuiltinCase) {
  for (const Case& c : builtin_cases())
    EXPECT_EQ(to_string(parse_case(to_string(c))), to_string(c));
}

TEST(CaseString, RejectionsNameTheKey) {
  auto message = [](const char* text) {
    try {
      parse_case(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("N=2,bogus=1").find("bogus"), std::string::npos);
  EXPECT_NE(message("dtype=f8").find("dtype"), std::string::npos);
  EXPECT_NE(message("sdtype=f16").find("sdtype"), std::string::npos);
  EXPECT_NE(message("Hk=3,Hv=4").find("Hv=4"), std::string::npos);
  EXPECT_NE(message("N=2,pad=1").find("pool"), std::string::npos);
  EXPECT_NE(message("T=0").find("T"), std::string::npos);
  EXPECT_NE(message("h0=0,inplace=1").find("inplace"), std::string::npos);
}

TEST(Generate, DistributionsOfSpec) {
  const GeneratedInputs in = generate(parse_case("N=2,T=50,Hk=2,Hv=4,K=64,V=64,dtype=bf16"));
  for (int64_t row = 0; row < in.k.numel() / 64; ++row) {  // k: unit L2 norm per head
    double sum = 0;
    for (int64_t i = 0; i < 64; ++i) sum += in.k.get(row * 64 + i) * in.k.get(row * 64 + i);
    EXPECT_NEAR(std::sqrt(sum), 1.0, 1e-2);
  }
  for (int64_t i = 0; i < in.g.numel(); ++i) {  // g = logsigmoid(N(0, 1)) <= 0
    EXPECT_LE(in.g.get(i), 0.0);
    EXPECT_GT(in.beta.get(i), 0.0);  // beta = sigmoid(N(0, 1)) in (0, 1)
    EXPECT_LT(in.beta.get(i), 1.0);
  }
  double q2 = 0;
  for (int64_t i = 0; i < in.q.numel(); ++i) q2 += in.q.get(i) * in.q.get(i);
  EXPECT_NEAR(q2 / double(in.q.numel()), 1.0, 0.05);  // q ~ N(0, 1)
  bool nonzero_state = false;
  for (int64_t i = 0; i < in.initial_state.numel(); ++i)
    nonzero_state |= in.initial_state.get(i) != 0;
  EXPECT_TRUE(nonzero_state);
}

TEST(Generate, DecayRegimes) {
  const GeneratedInputs none = generate(parse_case("N=1,T=20,Hk=1,Hv=2,decay=none"));
  const GeneratedInputs fast = generate(parse_case("N=1,T=20,Hk=1,Hv=2,decay=fast"));
  const GeneratedInputs rate = generate(parse_case("N=1,T=20,Hk=1,Hv=2,gate=decay_rate"));
  for (int64_t i = 0; i < none.g.numel(); ++i) {
    EXPECT_EQ(none.g.get(i), 0.0);
    EXPECT_LT(fast.g.get(i), -15.0);
    EXPECT_GE(rate.g.get(i), 0.0);
  }
  const GeneratedInputs raw = generate(parse_case("N=1,T=20,Hk=1,Hv=3,gate=raw,decay=mixed"));
  EXPECT_FALSE(raw.g.present());
  EXPECT_TRUE(raw.a.present() && raw.A_log.present() && raw.dt_bias.present());
  EXPECT_GT(raw.a.get(2), 20.0);  // head 2 fast: softplus's linear branch
}

TEST(Generate, BatchStructure) {
  const GeneratedInputs in =
      generate(parse_case("N=6,T=9,Hk=1,Hv=2,packed=1,pool=10,pad=2,snap=pool,seed=7"));
  EXPECT_EQ(std::count(in.c.seqlens.begin(), in.c.seqlens.end(), 0), 1);  // one empty sequence
  EXPECT_EQ(in.bos.back(), in.T_total);
  for (int64_t n = 0; n <= 6; ++n) EXPECT_EQ(in.cu_seqlens.get(n), double(in.bos[size_t(n)]));
  std::set<int32_t> live;
  int pads = 0;
  for (int32_t s : in.slot) s < 0 ? ++pads : (live.insert(s), 0);
  EXPECT_EQ(pads, 2);
  EXPECT_EQ(live.size(), 4u);  // distinct live slots
  std::set<int64_t> snaps;
  int64_t stored = 0;
  for (int64_t p = 0; p < in.T_total; ++p) {
    const int64_t s = int64_t(in.snapshot_indices.get(p));
    if (s >= 0) ++stored, snaps.insert(s);
  }
  EXPECT_EQ(int64_t(snaps.size()), stored);  // distinct snapshot slots
  uint32_t first = 0;
  std::memcpy(&first, in.o.data(), 4);
  EXPECT_EQ(first, poison_bits(GDN_DTYPE_F32));  // outputs start poisoned
}

TEST(Generate, StridedViewsKeepTheirGaps) {
  const GeneratedInputs in = generate(parse_case("N=2,T=3,Hk=1,Hv=2,K=16,V=16,strided=1"));
  EXPECT_GT(in.q.storage_elements(), in.q.numel());
  EXPECT_EQ(in.q.strides().back(), 1);
  EXPECT_EQ(in.q.strides()[2], 16 + 8);
}

TEST(Tolerance, FollowsSpec) {
  Case c;
  EXPECT_EQ(tolerance(c, GDN_BACKEND_CPU, GDN_PATH_AUTO).o, 1e-5);
  c.dtype = GDN_DTYPE_BF16;
  EXPECT_EQ(tolerance(c, GDN_BACKEND_CPU, GDN_PATH_RECURRENT).o, 4e-3);
  EXPECT_EQ(tolerance(c, GDN_BACKEND_CUDA, GDN_PATH_CHUNKED).state, 2.5e-3);
  c.state_dtype = GDN_DTYPE_BF16;
  EXPECT_NEAR(tolerance(c, GDN_BACKEND_CPU, GDN_PATH_RECURRENT).state, 1e-5 + 1.0 / 256, 1e-12);
}

TEST(RelL2, Definition) {
  const double ref[] = {3, 4}, x[] = {3, 4.5}, zeros[] = {0, 0};
  EXPECT_DOUBLE_EQ(rel_l2(x, ref, 2), 0.1);
  EXPECT_DOUBLE_EQ(rel_l2(x, zeros, 2), std::sqrt(9 + 4.5 * 4.5));
}

// A correct cpu run, then one deliberate fault at a time: check_outputs must see each.
class Faults : public ::testing::Test {
 protected:
  void SetUp() override {
    pristine = generate(parse_case("N=4,T=3,Hk=1,Hv=2,K=16,V=16,pool=7,pad=1,snap=1,seed=3"));
    good = pristine;
    gdn_forward_args a = good.args(GDN_BACKEND_CPU);
    ASSERT_EQ(gdn_forward(&a), GDN_STATUS_SUCCESS) << gdn_last_error();
    ASSERT_EQ(run_oracle(pristine, 0, &oracle), GDN_STATUS_SUCCESS) << gdn_last_error();
    const Errors e = check_outputs(pristine, good, oracle);
    ASSERT_TRUE(e.pass(tolerance(pristine.c, GDN_BACKEND_CPU, GDN_PATH_AUTO))) << e.detail;
  }
  int64_t live_sequence() const {
    return std::find_if(pristine.slot.begin(), pristine.slot.end(),
                        [](int32_t s) { return s >= 0; }) -
           pristine.slot.begin();
  }
  GeneratedInputs pristine, good;
  OracleOutputs oracle;
};

TEST_F(Faults, UnwrittenOutput) {
  GeneratedInputs bad = good;
  const int64_t row = live_sequence() * pristine.c.T * 2;  // token 0, head 0 of a live sequence
  bad.o.set(row * 16, 0);
  const uint64_t poison = poison_bits(GDN_DTYPE_F32);
  std::memcpy(static_cast<char*>(bad.o.data()) + bad.o.offset(row * 16) * 4, &poison, 4);
  EXPECT_FALSE(check_outputs(pristine, bad, oracle).all_written);
}

TEST_F(Faults, WrongValue) {
  GeneratedInputs bad = good;
  const int64_t i = live_sequence() * pristine.c.T * 2 * 16;
  bad.o.set(i, bad.o.get(i) + 0.5);
  EXPECT_GT(check_outputs(pristine, bad, oracle).o, 1e-3);
}

TEST_F(Faults, PaddingOutputNotZero) {
  GeneratedInputs bad = good;
  const int64_t pad =
      std::find(pristine.slot.begin(), pristine.slot.end(), -1) - pristine.slot.begin();
  bad.o.set(pad * pristine.c.T * 2 * 16, 1.0);
  EXPECT_FALSE(check_outputs(pristine, bad, oracle).untouched_ok);
}

TEST_F(Faults, PaddingSnapshotWritten) {  // a padding sequence writes no state, snapshots included
  GeneratedInputs bad = good;
  const int64_t pad =
      std::find(pristine.slot.begin(), pristine.slot.end(), -1) - pristine.slot.begin();
  bad.snapshots.set(pad * pristine.c.T * 2 * 16 * 16, 0.0);
  EXPECT_FALSE(check_outputs(pristine, bad, oracle).untouched_ok);
}

TEST_F(Faults, UnaddressedPoolSlotWritten) {
  GeneratedInputs bad = good;
  int32_t free_slot = 0;
  while (std::count(pristine.slot.begin(), pristine.slot.end(), free_slot)) ++free_slot;
  bad.final_state.set(free_slot * 2 * 16 * 16, 0.25);
  EXPECT_FALSE(check_outputs(pristine, bad, oracle).untouched_ok);
}

TEST_F(Faults, NotFinite) {
  GeneratedInputs bad = good;
  bad.snapshots.set(live_sequence() * pristine.c.T * 2 * 16 * 16, INFINITY);
  EXPECT_FALSE(check_outputs(pristine, bad, oracle).finite);
}

// The oracle on a few heads: block map keeps whole key-head groups, tiled map whole cycles.
TEST(Oracle, SampledHeads) {
  for (const char* text :
       {"N=1,T=5,Hk=2,Hv=6,K=16,V=16", "N=1,T=5,Hk=2,Hv=6,K=16,V=16,map=tiled"}) {
    const GeneratedInputs pristine = generate(parse_case(text));
    GeneratedInputs out = pristine;
    gdn_forward_args a = out.args(GDN_BACKEND_CPU);
    ASSERT_EQ(gdn_forward(&a), GDN_STATUS_SUCCESS) << gdn_last_error();
    OracleOutputs oracle;
    ASSERT_EQ(run_oracle(pristine, 1, &oracle), GDN_STATUS_SUCCESS) << gdn_last_error();
    EXPECT_EQ(oracle.heads, pristine.c.map == GDN_HEAD_MAP_BLOCK ? 3 : 2) << text;
    const Errors e = check_outputs(pristine, out, oracle);
    EXPECT_TRUE(e.pass(tolerance(pristine.c, GDN_BACKEND_CPU, GDN_PATH_AUTO))) << text << e.detail;
    EXPECT_GT(e.o, 0.0) << text;  // something was compared
  }
}

}  // namespace
}  // namespace gdn::harness

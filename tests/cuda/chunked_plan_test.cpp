// The chunked path's host-side plans (cuda/chunked_tile.h), no GPU needed: the workspace's
// chunk slots (packed sequences never share one), the choice between the fused and the split
// form, the exact sequence split's segment plan and the window plan on the benchmark shapes
// (132 SMs).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cuda/chunked_tile.h"

namespace gdn::cuda::chunked {
namespace {

constexpr int kSms = 132;  // H200

TEST(ChunkSlots, PackedSequencesNeverShareASlot) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int N = 1 + int(rng() % 40);
    std::vector<int64_t> len(static_cast<size_t>(N));
    for (auto& l : len) l = rng() % 4 == 0 ? 0 : int64_t(rng() % 700);  // zeros and partial chunks
    int64_t bos = 0, last_end = 0, T_total = 0;
    for (int64_t l : len) T_total += l;
    const int64_t slots = chunk_slots(true, N, T_total, T_total);
    for (int n = 0; n < N; ++n) {
      const int64_t base = bos / kC + n, chunks = (len[size_t(n)] + kC - 1) / kC;
      if (chunks > 0) {
        EXPECT_GE(base, last_end) << "trial " << trial << ", sequence " << n;  // after the previous one's
        last_end = base + chunks;
        EXPECT_LE(last_end, slots) << "trial " << trial << ", sequence " << n;
      }
      bos += len[size_t(n)];
    }
  }
}

TEST(ChunkSlots, DenseSequencesTakeWholeChunks) {
  EXPECT_EQ(chunk_slots(false, 3, 130, 390), 9);
  EXPECT_EQ(chunk_slots(false, 2, 64, 128), 2);
  EXPECT_EQ(chunk_slots(false, 1, 1, 1), 1);
}

// The benchmark shapes (docs/NOTES.md has the measured figures behind the model's constants),
// with the wgmma chain (sm_90a) and with the key-half chain (other GPUs, GDN_CHUNKED_CHAIN=mma).
TEST(FormChoice, BenchmarkShapes) {
  const auto chain = [](const FormChoice& f) { return f.split ? f.chain_split : 0; };  // 0: fused
  const auto overlap = [](int) { return true; };
  const auto in_turn = [](int) { return false; };
  for (bool wgmma : {true, false}) {
    EXPECT_EQ(chain(choose_form(4 * 32, kSms, wgmma, overlap)), 0);   // 4 x 8192, Hv 32: fused
    EXPECT_EQ(chain(choose_form(16 * 32, kSms, wgmma, overlap)), 0);  // 16 x 4096
    EXPECT_EQ(chain(choose_form(16 * 32, kSms, wgmma, in_turn)), 0);  // packed 16 sequences
    EXPECT_EQ(chain(choose_form(32, kSms, wgmma, overlap)), 2);       // 1 x T, Hv 32: two-CTA chains beside the preparation
    EXPECT_EQ(chain(choose_form(64, kSms, wgmma, in_turn)), 2);       // Hv 64 without overlap: one wave of two-CTA chains
    EXPECT_EQ(chain(choose_form(8, kSms, wgmma, overlap)), 2);        // Hk/Hv 2/8
    EXPECT_EQ(chain(choose_form(8, 0, wgmma, overlap)), 0);           // no SM count: fused
    for (int64_t pairs : {1, 8, 32, 64, 128, 512, 4096}) {            // never dearer than the fused kernel
      const FormChoice f = choose_form(pairs, kSms, wgmma, overlap);
      EXPECT_LE(f.us_per_chunk, double((pairs + kSms - 1) / kSms) * fused_step_us(wgmma)) << pairs;
    }
  }
  // 1 x 32768, Hv 64: the wgmma chain's one wave after the preparation (4.0 us a chunk) against
  // the full chain beside it (5.6); the key-half chain would take 6.3, so without wgmma the full
  // chain, and key halves when nothing overlaps
  EXPECT_EQ(chain(choose_form(64, kSms, true, overlap)), 2);
  const FormChoice hv64 = choose_form(64, kSms, false, overlap);
  EXPECT_EQ(chain(hv64), 1);
  EXPECT_EQ(hv64.serial_chain_split, 2);
}

// The boundary measured with the wgmma chain (twenty-fourth session, 8192 tokens a sequence, Hk/Hv
// 4/8, each form forced): the split form faster at 48 and 64 pairs, the fused kernel at 72, 96 and
// 128 (bench/results/2026-12-01-session24/form-boundary.json).
TEST(FormChoice, MeasuredBoundary) {
  const auto overlap = [](int) { return true; };
  for (int64_t pairs : {48, 64}) EXPECT_TRUE(choose_form(pairs, kSms, true, overlap).split) << pairs;
  for (int64_t pairs : {72, 96, 128}) EXPECT_FALSE(choose_form(pairs, kSms, true, overlap).split) << pairs;
}

// Calls with state checkpoints take the two-CTA chain or the fused kernel (the full chain
// stores none): never the full chain, and both chains' serial choice two-CTA.
TEST(FormChoice, CheckpointsTakeTheTwoCtaChain) {
  const auto overlap = [](int) { return true; };
  for (bool wgmma : {true, false})
    for (int64_t pairs : {1, 8, 32, 64, 128, 512, 4096}) {
      const FormChoice f = choose_form(pairs, kSms, wgmma, overlap, false);
      EXPECT_EQ(f.chain_split, kVSplit) << pairs;
      EXPECT_EQ(f.serial_chain_split, kVSplit) << pairs;
    }
  EXPECT_TRUE(choose_form(64, kSms, false, overlap, false).split);  // Hv 64: the key-half chain still pays
}

// The overlap the model counts on is the window plan's own: 2^20 tokens at Hv 64 would need
// windows of 256 chunks for at most kMaxOverlapWindows of them, but only 125 fit the bound, so
// the windows run in turn and the key-half chain is chosen.
TEST(FormChoice, OverlapAsTheWindowPlanDecides) {
  const size_t chunk = sizeof(PreparedChunk), state = size_t(kV) * kK * 4;
  const auto overlaps = [&](int64_t chunks, int64_t heads) {
    return [=](int split) { return plan_windows(chunks, heads * split, kSms, heads * chunk, heads * state).overlap; };
  };
  EXPECT_EQ(choose_form(64, kSms, false, overlaps(512, 64)).chain_split, 1);    // 1 x 32768, Hv 64
  EXPECT_EQ(choose_form(64, kSms, false, overlaps(16384, 64)).chain_split, 2);  // 1 x 2^20, Hv 64
}

TEST(SegmentPlan, BenchmarkShapes) {
  const SegmentPlan hk2hv8 = plan_segments(512, 1 * 8 * kVSplit, kSms, 0);  // 1 x 32768, Hv 8
  EXPECT_EQ(hk2hv8.segments, 9);
  EXPECT_EQ(hk2hv8.seg_chunks, 57);
  EXPECT_EQ(plan_segments(1024, 1 * 32 * kVSplit, kSms, 0).segments, 1);  // 1 x 65536, Hv 32
  EXPECT_EQ(plan_segments(512, 1 * 64 * kVSplit, kSms, 0).segments, 1);   // 1 x 32768, Hv 64
  EXPECT_EQ(plan_segments(1, 2, kSms, 0).segments, 1);                    // one chunk
}

TEST(F32ValueSplit, ExtraCtasOnlyOnIdleSms) {
  EXPECT_EQ(f32_value_split(1 * 32, kSms, 0), 4);   // 1 x T, Hv 32: 128 CTAs
  EXPECT_EQ(f32_value_split(2 * 32, kSms, 0), 2);   // 2 x T: 128
  EXPECT_EQ(f32_value_split(1 * 64, kSms, 0), 2);   // Hv 64
  EXPECT_EQ(f32_value_split(4 * 32, kSms, 0), 1);   // 4 x 8192: one CTA a pair fills the SMs
  EXPECT_EQ(f32_value_split(34, kSms, 0), 2);       // 136 CTAs at 4 would need a second wave
  EXPECT_EQ(f32_value_split(67, kSms, 0), 1);
  EXPECT_EQ(f32_value_split(8, 0, 0), 1);           // SM count unknown
  EXPECT_EQ(f32_value_split(512, kSms, 4), 4);      // forced
  EXPECT_EQ(f32_value_split(8, kSms, 1), 1);
  EXPECT_EQ(f32_value_split(8, kSms, 3), 4);        // not a split: the library's choice
}

TEST(F32SplitForm, FromTheMeasuredChunkCounts) {
  EXPECT_TRUE(f32_split_form(f32_value_split(1 * 32, kSms, 0), 64));    // 1 x 4096, Hv 32
  EXPECT_TRUE(f32_split_form(f32_value_split(1 * 64, kSms, 0), 512));   // 1 x 32768, Hv 64
  EXPECT_TRUE(f32_split_form(f32_value_split(4 * 32, kSms, 0), 128));   // 4 x 8192: one CTA a pair
  EXPECT_FALSE(f32_split_form(4, 3));  // four CTAs a pair: from 4 chunks
  EXPECT_TRUE(f32_split_form(4, 4));
  EXPECT_FALSE(f32_split_form(2, 5));  // two: from 6
  EXPECT_TRUE(f32_split_form(2, 6));
  EXPECT_FALSE(f32_split_form(1, 1));  // one: from 2
  EXPECT_TRUE(f32_split_form(1, 2));
}

TEST(WindowPlan, BenchmarkShapes) {
  const size_t chunk = sizeof(PreparedChunk), state = size_t(kV) * kK * 4;  // one head's
  // 1 x 65536, Hv 32: 64 chain CTAs, under half the SMs: overlapped windows of 96 chunks (the
  // measured best: chunked_tile.h)
  const WindowPlan long32 = plan_windows(1024, 1 * 32 * kVSplit, kSms, 1 * 32 * chunk, 32 * state);
  EXPECT_TRUE(long32.overlap);
  EXPECT_EQ(long32.window_chunks, 96);
  EXPECT_EQ(long32.windows, 11);
  const WindowPlan mid32 = plan_windows(256, 1 * 32 * kVSplit, kSms, 1 * 32 * chunk, 32 * state);  // 1 x 16384
  EXPECT_EQ(mid32.window_chunks, 64);
  EXPECT_EQ(mid32.windows, 4);
  // 1 x 4096: two overlapped windows of 32; 1 x 2048: too few chunks to overlap, and the call fits
  const WindowPlan short32 = plan_windows(64, 1 * 32 * kVSplit, kSms, 1 * 32 * chunk, 32 * state);
  EXPECT_EQ(short32.windows, 2);
  EXPECT_EQ(short32.window_chunks, 32);
  EXPECT_EQ(plan_windows(65, 1 * 32 * kVSplit, kSms, 1 * 32 * chunk, 32 * state).windows, 2);
  EXPECT_EQ(plan_windows(32, 1 * 32 * kVSplit, kSms, 1 * 32 * chunk, 32 * state).window_chunks, 0);
  // 1 x 32768, Hv 64: the chain fills the SMs (no overlap), but 2.2 GB of chunks do not fit:
  // windows one after the other, two of them within the bound
  const WindowPlan hv64 = plan_windows(512, 1 * 64 * kVSplit, kSms, 1 * 64 * chunk, 64 * state);
  EXPECT_FALSE(hv64.overlap);
  EXPECT_GT(hv64.window_chunks, 0);
  EXPECT_LE(kWindowBuffers * size_t(hv64.window_chunks) * 64 * chunk + 64 * state, kMaxSplitWorkspaceBytes);
  EXPECT_EQ(hv64.windows, (512 + hv64.window_chunks - 1) / hv64.window_chunks);
  // 2^20 tokens at Hv 2: long windows, at most kMaxOverlapWindows of them
  const WindowPlan million = plan_windows(16384, 1 * 2 * kVSplit, kSms, 1 * 2 * chunk, 2 * state);
  EXPECT_TRUE(million.overlap);
  EXPECT_LE(million.windows, kMaxOverlapWindows);
  EXPECT_GE(million.window_chunks * million.windows, 16384);
  // no SM count: no overlap, windows only when the whole call does not fit
  EXPECT_EQ(plan_windows(64, 64, 0, 32 * chunk, 32 * state).window_chunks, 0);
  const WindowPlan blind = plan_windows(1024, 64, 0, 32 * chunk, 32 * state);
  EXPECT_FALSE(blind.overlap);
  EXPECT_EQ(blind.window_chunks, int64_t((kMaxSplitWorkspaceBytes - 32 * state) / (kWindowBuffers * 32 * chunk)));
  // one chunk of every head does not fit two buffers: no windows (the caller runs fused)
  EXPECT_EQ(plan_windows(100, 1 << 20, kSms, kMaxSplitWorkspaceBytes, 0).window_chunks, 0);
}

TEST(SegmentPlan, ForcedCountsAndNoEmptySegment) {
  EXPECT_EQ(plan_segments(100, 16, kSms, 1).segments, 1);
  EXPECT_EQ(plan_segments(2, 16, kSms, 3).segments, 2);  // at most one segment a chunk
  EXPECT_EQ(plan_segments(100, 16, kSms, 5).segments, 5);
  EXPECT_EQ(plan_segments(100, 16, kSms, 1000).segments, 50);  // capped at kMaxSegments = 64: 2 chunks each
  for (int64_t chunks = 1; chunks < 700; chunks += 7)
    for (int64_t units : {2, 16, 64, 200})
      for (int forced : {0, 2, 3, 9, 40}) {
        const SegmentPlan s = plan_segments(chunks, units, kSms, forced);
        ASSERT_GE(s.segments, 1);
        ASSERT_LE(s.segments, kMaxSegments);
        if (s.segments > 1) {  // every segment has a chunk; together they cover the sequence
          EXPECT_LT((s.segments - 1) * s.seg_chunks, chunks) << chunks << " " << units << " " << forced;
          EXPECT_GE(s.segments * s.seg_chunks, chunks) << chunks << " " << units << " " << forced;
        }
      }
  EXPECT_EQ(pass1_runs(2), 1);
  EXPECT_EQ(pass1_runs(3), 3);
  EXPECT_EQ(pass1_runs(9), 15);
}

// The f32 sequence split on the benchmark shapes (one sequence; the unsplit value split as the
// library picks it): 2/8 in 16 segments at one CTA a run, the rest unsplit.
TEST(F32SegmentPlan, BenchmarkShapes) {
  const auto plan = [](int64_t chunks, int64_t pairs) {
    return plan_f32_segments(chunks, pairs, kSms, f32_value_split(pairs, kSms, 0), 0, 0, 0);
  };
  const F32SegmentPlan hk2hv8 = plan(512, 8);  // 1 x 32768, Hk / Hv 2 / 8
  EXPECT_EQ(hk2hv8.seg.segments, 16);
  EXPECT_EQ(hk2hv8.seg.seg_chunks, 32);
  EXPECT_EQ(hk2hv8.pass1_split, 1);
  EXPECT_EQ(hk2hv8.value_split, 1);
  EXPECT_EQ(plan(64, 32).seg.segments, 1);    // 1 x 4096, Hv 32
  EXPECT_EQ(plan(256, 32).seg.segments, 1);   // 1 x 16384
  EXPECT_EQ(plan(1024, 32).seg.segments, 1);  // 1 x 65536
  EXPECT_EQ(plan(512, 64).seg.segments, 1);   // 1 x 32768, Hv 64
  EXPECT_EQ(plan(128, 128).seg.segments, 1);  // 4 x 8192
  EXPECT_EQ(plan(64, 512).seg.segments, 1);   // 16 x 4096
  EXPECT_EQ(plan(64, 512).value_split, 1);
}

// The f32 sequence split: forced counts honoured (1: none), every segment has a chunk, the
// forced CTAs a run kept, and the passes' CTAs within the splits the kernel has.
TEST(F32SegmentPlan, ForcedCountsAndNoEmptySegment) {
  EXPECT_EQ(plan_f32_segments(100, 8, kSms, 4, 1, 0, 0).seg.segments, 1);
  EXPECT_EQ(plan_f32_segments(1, 8, kSms, 4, 3, 0, 0).seg.segments, 1);  // one chunk
  EXPECT_EQ(plan_f32_segments(2, 8, kSms, 4, 3, 0, 0).seg.segments, 2);  // at most one segment a chunk
  const F32SegmentPlan forced = plan_f32_segments(100, 8, kSms, 4, 5, 2, 1);
  EXPECT_EQ(forced.seg.segments, 5);
  EXPECT_EQ(forced.pass1_split, 2);
  EXPECT_EQ(forced.value_split, 1);
  for (int64_t chunks = 1; chunks < 700; chunks += 7)
    for (int64_t pairs : {1, 8, 32, 128})
      for (int segments : {0, 2, 3, 9, 40}) {
        const F32SegmentPlan f = plan_f32_segments(chunks, pairs, kSms, f32_value_split(pairs, kSms, 0), segments, 0, 0);
        ASSERT_GE(f.seg.segments, 1);
        ASSERT_LE(f.seg.segments, kMaxSegments);
        ASSERT_TRUE(f.pass1_split == 1 || f.pass1_split == 2 || f.pass1_split == 4);
        ASSERT_TRUE(f.value_split == 1 || f.value_split == 2 || f.value_split == 4);
        if (f.seg.segments > 1) {
          EXPECT_LT((f.seg.segments - 1) * f.seg.seg_chunks, chunks) << chunks << " " << pairs << " " << segments;
          EXPECT_GE(f.seg.segments * f.seg.seg_chunks, chunks) << chunks << " " << pairs << " " << segments;
        }
      }
}

// The wgmma prepare kernel's head groups: a divisor of the ratio (the group shares a key head),
// at most kMaxPrepHeads, or at most the forced count.
TEST(PrepGroups, DivideTheRatio) {
  EXPECT_EQ(prep_group_heads(1, 0), 1);
  EXPECT_EQ(prep_group_heads(2, 0), 2);
  EXPECT_EQ(prep_group_heads(3, 0), 3);
  EXPECT_EQ(prep_group_heads(4, 0), 4);
  EXPECT_EQ(prep_group_heads(6, 0), 3);
  EXPECT_EQ(prep_group_heads(8, 0), 4);
  EXPECT_EQ(prep_group_heads(5, 0), 1);
  EXPECT_EQ(prep_group_heads(4, 1), 1);
  EXPECT_EQ(prep_group_heads(4, 3), 2);
  EXPECT_EQ(prep_group_heads(8, 8), 8);
}

}  // namespace
}  // namespace gdn::cuda::chunked

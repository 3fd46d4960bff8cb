// How the cpu backend cuts its work: value indices per kernel task.
#pragma once

#include <cstdint>

#include "cpu/kernel.h"

namespace gdn::cpu {

// Value indices per task: as many as make an f32 state block of kBlockCapacity (64 KiB: all
// of a head at K = V = 128). The block is loaded once, carried through all of a sequence's
// tokens, and stored once. The vk width also fits the block as K rows of pad(width, kStrip)
// columns, the form the token-block path holds it in (kernel_impl.h; the same width for K = 64,
// 128 and 256). Measured on Zen 4 (1 thread, Hk/Hv = 16/32, K = V = 128, bf16):
// 16 KiB blocks (in L1) ran prefill no faster than 64 KiB ones (in L2): vk 18.8 vs 18.6 ms,
// kv 14.7 vs 14.7 ms for 256 tokens; but decode of the kv layout reads a 16 KiB block as
// 128 pieces of 128 bytes, 6.1 GB/s against 9.7 GB/s for whole contiguous heads.
//   vk: the block is rows of S, each pad(K, kLanes) floats.
//   kv: the block is K rows of S^T, cut to a multiple of kStrip columns.
constexpr int64_t block_width(int64_t K, int64_t V, gdn_state_layout layout) {
  const int64_t padded_K = (K + kLanes - 1) / kLanes * kLanes;
  const int64_t transposed = kBlockCapacity / K / kStrip * kStrip;  // K rows of S^T, kStrip columns
  const int64_t rows = kBlockCapacity / padded_K;
  const int64_t width = layout == GDN_STATE_VK && rows < transposed ? rows : transposed;
  return width < V ? width : V;
}

// The width of the tasks of a call with `pairs` (sequence, value head) pairs on `threads`
// threads: block_width, halved (in whole kStrip columns, down to kStrip) while the pairs' blocks
// leave threads without a task (few sequences and heads: a 2 / 8 shard, one long prompt). The
// rows of S evolve independently, so the cut changes no bit (every cut falls on a multiple of
// kStrip: the kernels group rows and columns within such multiples); each block repeats its
// tokens' preparation (about a fifth of a token's work in token blocks).
constexpr int64_t task_width(int64_t K, int64_t V, gdn_state_layout layout, int64_t pairs,
                             int64_t threads) {
  int64_t width = block_width(K, V, layout);
  while (width > kStrip && pairs * ((V + width - 1) / width) < threads)
    width = ((width + 1) / 2 + kStrip - 1) / kStrip * kStrip;
  return width;
}

static_assert(task_width(128, 128, GDN_STATE_VK, 1, 2) == 64 && task_width(128, 128, GDN_STATE_KV, 8, 32) == 32 &&
              task_width(128, 128, GDN_STATE_VK, 8, 8) == 128 && task_width(64, 40, GDN_STATE_VK, 1, 4) == 32);

static_assert(block_width(kMaxHeadDim, kMaxHeadDim, GDN_STATE_VK) * kMaxHeadDim <= kBlockCapacity);
static_assert(block_width(kMaxHeadDim, kMaxHeadDim, GDN_STATE_KV) >= kStrip);
static_assert(block_width(kMaxHeadDim, kMaxHeadDim, GDN_STATE_VK) >= kStrip);
static_assert(block_width(128, 128, GDN_STATE_VK) == 128 && block_width(64, 64, GDN_STATE_VK) == 64);

}  // namespace gdn::cpu

// The fused chunked kernel's products on wgmma (sm_90a), in the same precision plan as
// chunked_steps.cuh's mma.sync functions:
//   - the chain (key_products, finish_outputs, advance_state there), with the state as the
//     m64n128 f32 accumulators of a warpgroup (warpgroup w / 4 holds state rows [64 (w / 4),
//     +64); warp w's registers are the rows [16 w, +16) the mma.sync chain gives it, in the same
//     fragment layout, so the rest of the kernel is unchanged): m64n64k16 (the state update
//     m64n128k16) with A from registers (S, D, as hi + lo halves) and B from the chunk's tiles;
//   - the preparation's products: Kc Kc^T and Qc Kc^T (m64n32k16, both operands from shared
//     memory), -W and U (A from registers by ldmatrix, B from shared memory).
// The tiles are in CoreTiles' layouts (chunked_tile.h).
//
// Measured first in bench/chain_lab.cu (H200, 128 CTAs x 128 chunk steps, the chain alone on
// tiles in shared memory): 2.80 us a step against 4.01 for the same sums on mma.sync, and the
// same bits (the same k order into the same f32 accumulators). In the fused kernel, each
// against the build before it in the same run, 4 x 8192: the chain 1.234 -> 1.202 ms (eleventh
// session), -W and U 1.145 -> 1.091, the key products 1.091 -> 1.073 (twelfth; docs/NOTES.md).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/chunked_mma.cuh"
#include "cuda/chunked_range.cuh"
#include "cuda/chunked_steps.cuh"
#include "cuda/chunked_tile.h"

// A lab build's timing probe (cmake -DGDN_LAB_SINGLE_PRODUCTS=ON; wrong results): U = T Vc and the
// state update take only the hi half of T and of D, one product each where the kernels take a
// hi + lo pair (two), so a run shows what one product each (T or D in f16 with a range
// exponent, behind an opt-in precision setting) could save. Off: the same SASS.
#ifndef GDN_LAB_SINGLE_PRODUCTS
#define GDN_LAB_SINGLE_PRODUCTS 0
#endif

namespace gdn::cuda::chunked {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GDN_CHUNKED_WGMMA 1  // this compilation pass has wgmma (sm_90a)
#else
#define GDN_CHUNKED_WGMMA 0
#endif

#if GDN_CHUNKED_WGMMA

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Generic-proxy writes to shared memory (stores, completed cp.async) made visible to wgmma's
// reads (the async proxy); each writing thread, before the barrier that precedes the reads.
__device__ __forceinline__ void fence_shared_for_wgmma() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// A warpgroup's registers per thread raised or lowered to kRegs (setmaxnreg: every warp of the
// warpgroup executes it; a raise waits until lowered registers of other warpgroups free the room).
template <int kRegs>
__device__ __forceinline__ void registers_up() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void registers_down() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Shared-memory matrix descriptors: start address, LBO and SBO in 16-byte units, the layout
// type in bits 62..63. A k-step's descriptor is its tile's plus the step's byte offset / 16 in
// the 14-bit start field (shared addresses stay below 256 KB, so nothing carries out of it):
// the tile's part is then formed once and each step adds a constant.
__device__ __forceinline__ uint64_t tile_desc(const uint16_t* tile, uint32_t lbo, uint32_t sbo, uint32_t layout) {
  return uint64_t((smem_addr(tile) >> 4) & 0x3FFFu) | (uint64_t(lbo >> 4) << 16) | (uint64_t(sbo >> 4) << 32) |
         (uint64_t(layout) << 62);
}
// No swizzle: the k-step at k0 of a K-major KMajorAt tile of kCols columns (core matrices 128
// bytes apart along k, 8-row groups kCols * 16 bytes apart).
template <int kCols>
__device__ __forceinline__ uint64_t k_major_desc(const uint16_t* tile, int k0) {
  return tile_desc(tile, 128u, kCols * 16u, 0u) + uint64_t((k0 >> 3) * 128 / 16);
}
// A Swizzle128At tile (two column halves of [kRows, 64], 128-byte rows, the tile at a 1024-byte
// boundary) read K-major with its columns as k: the k-step k0 starts (k0 mod 64) * 2 bytes into
// its half's swizzle atoms (the hardware XORs address bits 4..6 with 7..9, as the layout does);
// SBO 1024 bytes between 8-row groups, LBO unused; layout type 1 (128-byte swizzle).
template <int kRows>
__device__ __forceinline__ uint64_t swizzle128_desc_k(const uint16_t* tile, int k0) {
  return tile_desc(tile, 16u, 1024u, 1u) + uint64_t(((k0 >> 6) * kRows * 128 + (k0 & 63) * 2) / 16);
}

// A Swizzle128At tile of kRows rows (1024-byte boundary) read MN-major with its rows as k, N =
// 128 columns: the k-step k0 starts k0 * 128 bytes in (two 8-row groups of swizzle atoms); LBO
// strides the two 64-column halves (kRows * 128 bytes apart), SBO the 8-row k groups (1024 bytes
// apart). Checked by bench/wgmma_lab.cu's swizzled candidates (the other reading fails there).
template <int kRows>
__device__ __forceinline__ uint64_t swizzle128_desc_mn(const uint16_t* tile, int k0) {
  return tile_desc(tile, kRows * 128u, 1024u, 1u) + uint64_t(k0 * 128 / 16);
}

// d (m64n64, f32) += a (registers) b (K-major in shared memory; kTransB: MN-major); kAccumulate
// false: d = a b (d's values not read, so it needs no initialisation).
template <class M, bool kAccumulate = true, bool kTransB = false>
__device__ __forceinline__ void wgmma_64(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
#define GDN_WGMMA_64(TYPE)                                                                                    \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                  \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                 \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                      \
               "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, "                           \
               "{%32,%33,%34,%35}, %36, p, 1, 1, %38;\n}\n"                                                  \
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
                 "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),     \
                 "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),     \
                 "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),     \
                 "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),     \
                 "+f"(d[7][2]), "+f"(d[7][3])                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(kAccumulate ? 1 : 0),         \
                 "n"(kTransB ? 1 : 0))
  if constexpr (std::is_same_v<M, MmaBf16>)
    GDN_WGMMA_64("bf16");
  else
    GDN_WGMMA_64("f16");
#undef GDN_WGMMA_64
}

// d's first N = 8 kGroups columns (its 8-column groups [0, kGroups)) += a b, b's first N rows
// (K-major in shared memory, m64nNk16): the product with T, whose rows past the first 64 - 16 ks
// are zeros at k-step ks in the wgmma chain's token order (kTokenRowXor, chunked_tile.h). Only a
// prefix of the accumulators: with a suffix, ptxas serialises every wgmma of the kernel (C7511).
template <class M, int kGroups>
__device__ __forceinline__ void wgmma_64_first(float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
  static_assert(kGroups == 2 || kGroups == 4 || kGroups == 6 || kGroups == 8, "k-steps of 16 tokens");
#define GDN_ACC4(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
  if constexpr (kGroups == 8) {
    wgmma_64<M>(d, a, desc_b);
  } else if constexpr (kGroups == 6) {
#define GDN_WGMMA_FIRST(TYPE)                                                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %29, 0;\n"                                                          \
               "wgmma.mma_async.sync.aligned.m64n48k16.f32." TYPE "." TYPE " "                                       \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23}, "           \
               "{%24,%25,%26,%27}, %28, p, 1, 1, 0;\n}\n"                                                            \
               : GDN_ACC4(0), GDN_ACC4(1), GDN_ACC4(2), GDN_ACC4(3), GDN_ACC4(4), GDN_ACC4(5)                        \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))
    if constexpr (std::is_same_v<M, MmaBf16>) GDN_WGMMA_FIRST("bf16"); else GDN_WGMMA_FIRST("f16");
#undef GDN_WGMMA_FIRST
  } else if constexpr (kGroups == 4) {
#define GDN_WGMMA_FIRST(TYPE)                                                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"                                                          \
               "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                                       \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, "                                           \
               "{%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n"                                                            \
               : GDN_ACC4(0), GDN_ACC4(1), GDN_ACC4(2), GDN_ACC4(3)                                                  \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))
    if constexpr (std::is_same_v<M, MmaBf16>) GDN_WGMMA_FIRST("bf16"); else GDN_WGMMA_FIRST("f16");
#undef GDN_WGMMA_FIRST
  } else {
#define GDN_WGMMA_FIRST(TYPE)                                                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"                                                          \
               "wgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE "." TYPE " "                                       \
               "{%0,%1,%2,%3,%4,%5,%6,%7}, "                                                                         \
               "{%8,%9,%10,%11}, %12, p, 1, 1, 0;\n}\n"                                                              \
               : GDN_ACC4(0), GDN_ACC4(1)                                                                            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))
    if constexpr (std::is_same_v<M, MmaBf16>) GDN_WGMMA_FIRST("bf16"); else GDN_WGMMA_FIRST("f16");
#undef GDN_WGMMA_FIRST
  }
#undef GDN_ACC4
}
// U^T's product with T at k-step ks (tokens [16 ks, +16) of Vc): T's rows of the token blocks
// ks..3, the first 64 - 16 ks in the chain's order (unrolled loops: the switch folds).
template <class M>
__device__ __forceinline__ void wgmma_64_lower_t(int ks, float (&d)[8][4], const uint32_t (&a)[4], uint64_t desc_b) {
  static_assert(kTokenRowXor == 48, "T's token blocks in reverse order");
  switch (ks) {
    case 0: wgmma_64_first<M, 8>(d, a, desc_b); break;
    case 1: wgmma_64_first<M, 6>(d, a, desc_b); break;
    case 2: wgmma_64_first<M, 4>(d, a, desc_b); break;
    default: wgmma_64_first<M, 2>(d, a, desc_b); break;
  }
}
// The token offset of D^T's k-step ks (its columns [16 ks, +16)): the Kc and P k-steps it meets.
__device__ __forceinline__ constexpr int chain_token_block(int ks) { return (16 * ks) ^ kTokenRowXor; }

// d (m64n128, f32) += a (registers) b (MN-major in shared memory: the state update's Kc).
template <class M>
__device__ __forceinline__ void wgmma_128_mn(float (&d)[16][4], const uint32_t (&a)[4], uint64_t desc_b) {
#define GDN_WGMMA_128(TYPE)                                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                  \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "                                \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                      \
               "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"                             \
               "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"                             \
               "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "                           \
               "{%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"                                                    \
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
                 "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),     \
                 "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]),     \
                 "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),     \
                 "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]),     \
                 "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),     \
                 "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),   \
                 "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]),              \
                 "+f"(d[11][3]), "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),              \
                 "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]), "+f"(d[14][0]),              \
                 "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]),              \
                 "+f"(d[15][2]), "+f"(d[15][3])                                                               \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1))
  if constexpr (std::is_same_v<M, MmaBf16>)
    GDN_WGMMA_128("bf16");
  else
    GDN_WGMMA_128("f16");
#undef GDN_WGMMA_128
}

// d (m64n32, f32) += a b, both from shared memory, K-major (descriptors); kAccumulate false: d = a b.
template <class M, bool kAccumulate = true>
__device__ __forceinline__ void wgmma_32_ss(float (&d)[4][4], uint64_t desc_a, uint64_t desc_b) {
#define GDN_WGMMA_32(TYPE)                                                                                    \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                                  \
               "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                                 \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}\n"      \
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]),     \
                 "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),     \
                 "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])                                   \
               : "l"(desc_a), "l"(desc_b), "r"(kAccumulate ? 1 : 0))
  if constexpr (std::is_same_v<M, MmaBf16>)
    GDN_WGMMA_32("bf16");
  else
    GDN_WGMMA_32("f16");
#undef GDN_WGMMA_32
}

// d (m64n64, f32) += a b, both from shared memory, K-major (descriptors); kAccumulate false: d = a
// b. (The warp-specialised kernel's Kc Kc^T and Qc Kc^T: its registers are two m64n32 products'
// in a row.)
template <class M, bool kAccumulate = true>
__device__ __forceinline__ void wgmma_64_ss(float (&d)[8][4], uint64_t desc_a, uint64_t desc_b) {
#define GDN_ACC4(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define GDN_WGMMA_64_SS(TYPE)                                                                                 \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                  \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                 \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                                      \
               "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
               : GDN_ACC4(0), GDN_ACC4(1), GDN_ACC4(2), GDN_ACC4(3), GDN_ACC4(4), GDN_ACC4(5), GDN_ACC4(6),      \
                 GDN_ACC4(7)                                                                                  \
               : "l"(desc_a), "l"(desc_b), "r"(kAccumulate ? 1 : 0))
  if constexpr (std::is_same_v<M, MmaBf16>)
    GDN_WGMMA_64_SS("bf16");
  else
    GDN_WGMMA_64_SS("f16");
#undef GDN_WGMMA_64_SS
#undef GDN_ACC4
}

// key_products on wgmma, in two parts so that other products can run between them (all 8 warps
// call both; Sm: the fused kernel's Smem or the prepare kernel's PrepSmem): warpgroup wg computes Kc Kc^T and Qc Kc^T for the token columns [32 wg, +32),
// warp w their rows [16 (w % 4), +16), both operands read from the swizzled tiles in shared
// memory (Kc, Qc must be visible to wgmma: fenced, then a barrier). The issue commits the 16
// products as one group; once it has completed (a wgmma_wait), the store forms m and P as
// key_products does (store_key_products, with the chunk's gates G and beta), zeros above the
// diagonal.
template <class M, class Sm>
__device__ __forceinline__ void wgmma_key_products_issue(const Sm& s, int buf, int warp, float (&kk)[4][4],
                                                         float (&qk)[4][4]) {
  const int j0 = 32 * (warp >> 2);
  const uint16_t* q_tile = &s.q[buf][0][0];
  const uint16_t* k_tile = &s.k[buf][0][0];
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    const uint64_t kd = swizzle128_desc_k<kC>(k_tile, 16 * ks), qd = swizzle128_desc_k<kC>(q_tile, 16 * ks);
    const uint64_t bd = swizzle128_desc_k<kC>(k_tile + j0 * 64, 16 * ks);  // Kc's rows [j0, +32) as N
    if (ks == 0) {
      wgmma_32_ss<M, false>(kk, kd, bd);
      wgmma_32_ss<M, false>(qk, qd, bd);
    } else {
      wgmma_32_ss<M>(kk, kd, bd);
      wgmma_32_ss<M>(qk, qd, bd);
    }
  }
  wgmma_commit();
}
// P goes to p_hi, p_lo in CoreTiles::P's layout (the fused kernel's tiles, or the prepared chunk);
// kPHalf, p_absmax: store_key_block's; kLoZeros: its zero blocks above the diagonal also to p_lo
// (with kPHalf nothing reads them: the head-group prepare instance skips them; the one-head
// instance writes them, as ptxas serialised its wgmma without those stores, C7511).
template <class M, bool kPHalf = false, bool kLoZeros = true, class Sm>
__device__ __forceinline__ void wgmma_key_products_store(Sm& s, int warp, int lane, const float (&kk)[4][4],
                                                         const float (&qk)[4][4], uint16_t* p_hi, uint16_t* p_lo,
                                                         const float* G, const float* beta, float p_scale = 1.f,
                                                         float* p_absmax = nullptr) {
  const int i0 = 16 * (warp & 3), j0 = 32 * (warp >> 2);
  if (j0 > i0 + 15)
    store_zero_p<CoreTiles, kLoZeros>(i0, j0, lane, p_hi, p_lo);
  else
    store_key_products<M, CoreTiles, kPHalf>(s, i0, j0, lane, kk, qk, p_hi, p_lo, G, beta, p_scale, p_absmax);
}

// The preparation's two products after the inverse, on wgmma (all 8 warps call it; warp w =
// row block w % 4 of warpgroup w / 4), the sums of minus_w and new_values in the same precision:
//   -W  = -diag(gamma) Xw Kc                  warpgroup wg: tokens [0, C), keys [64 wg, +64)
//   D^T = Vc^T (T hi + T lo)^T                warpgroup wg: value rows [64 wg, +64), tokens [0, C)
// A from registers: Xw by ldmatrix from its padded rows (zero where the warp's token block lies
// above the k-step's: Xw is lower triangular), Vc^T by transposing ldmatrix. B from shared
// memory: Kc MN-major (its 64-column half wg), T K-major in CoreTiles::T (rows in the chain's
// token order, kTokenRowXor; kU: each k-step reads only the rows that can be nonzero, or all,
// its blocks above the diagonal written as zeros). -W goes to w_neg in CoreTiles::W's
// layout (rows in the same order); D^T stays in the accumulators the chain takes, its token
// columns in that order. Kc, Vc and T must be visible to wgmma (fenced by
// their writers, then a barrier). WM: -W's type (the warp-specialised kernel's is f16, for its
// f16 S (-W)^T).
enum class UProducts {
  kNone,               // -W alone (the wgmma chain forms U itself: wgmma_u_products)
  kFull,               // every row of T, -W's and U's products interleaved k-step by k-step
  kTriangular,         // T's rows that can be nonzero (wgmma_64_lower_t), interleaved
};
template <class M, class Sm, class WM = M, UProducts kU = UProducts::kTriangular>
__device__ __forceinline__ void wgmma_minus_w_new_values(Sm& s, int buf, int warp, int lane, float (&D)[8][4]) {
  const int g = lane >> 2, q = lane & 3, wg = warp >> 2, wr = warp & 3;
  const uint16_t* k_half = &s.k[buf][0][0] + wg * (kC * 64);  // Kc's key columns [64 wg, +64)
  const uint16_t* v_tile = &s.v[buf][0][0];
  float W[8][4];  // Xw Kc: tokens [16 wr, +16), keys [64 wg, +64), m64n64 accumulators
  float ng[2];    // -gamma_i of the lane's two token rows, formed before the products
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) ng[hr] = -expf(s.G[16 * wr + g + 8 * hr]);
  uint32_t xa[2][4], va[2][4];
  constexpr bool kWAlone = kU == UProducts::kNone;
  constexpr bool kTriangularT = kU != UProducts::kFull;
  const auto load_xw = [&](int ks) {  // Xw's A fragment of k-step ks (zeros above the diagonal)
    if (ks <= wr) {
      ldsm_x4(xa[ks & 1], a_rows(&s.xw[0][0], kLdCC, 16 * wr, 16 * ks, lane));
    } else {
#pragma unroll
      for (int r = 0; r < 4; ++r) xa[ks & 1][r] = 0u;
    }
  };
  if constexpr (kWAlone) {  // -W's products in a loop of their own (none of U's below)
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      if (ks >= 2) wgmma_wait<1>();  // k-step ks - 2's product has read xa[ks & 1]
      load_xw(ks);
      wgmma_fence();
      const uint64_t kd = swizzle128_desc_mn<kC>(k_half, 16 * ks);
      if (ks == 0)
        wgmma_64<M, false, true>(W, xa[0], kd);
      else
        wgmma_64<M, true, true>(W, xa[ks & 1], kd);
      wgmma_commit();
    }
  }
#pragma unroll
  for (int ks = 0; ks < (kWAlone ? 0 : kC / 16); ++ks) {
    if (ks >= 2) wgmma_wait<1>();  // k-step ks - 2's products have read xa, va [ks & 1]
    load_xw(ks);
    ldsm_x4_trans(va[ks & 1], a_cols<CoreTiles::V>(v_tile, 16 * warp, 16 * ks, lane));  // A[v][t'] = Vc[t'][v]
    wgmma_fence();
    const uint64_t kd = swizzle128_desc_mn<kC>(k_half, 16 * ks);
    const uint64_t th = k_major_desc<kC>(&s.t.hi[0][0], 16 * ks), tl = k_major_desc<kC>(&s.t.lo[0][0], 16 * ks);
    if (ks == 0) {
      wgmma_64<M, false, true>(W, xa[0], kd);
      wgmma_64<M, false>(D, va[0], th);
    } else {
      wgmma_64<M, true, true>(W, xa[ks & 1], kd);
      if constexpr (kTriangularT)
        wgmma_64_lower_t<M>(ks, D, va[ks & 1], th);  // T's rows that can be nonzero
      else
        wgmma_64<M>(D, va[ks & 1], th);
    }
#if !GDN_LAB_SINGLE_PRODUCTS
    if constexpr (kTriangularT)
      wgmma_64_lower_t<M>(ks, D, va[ks & 1], tl);
    else
      wgmma_64<M>(D, va[ks & 1], tl);
#endif
    wgmma_commit();
  }
  wgmma_wait<0>();
  uint16_t* w_tile = &s.w_neg[0][0];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int i = 16 * wr + g + 8 * hr;
#pragma unroll
    for (int t = 0; t < 8; ++t)
      *reinterpret_cast<uint32_t*>(w_tile + at_split<CoreTiles::W>(g, 2 * q, i - g, 64 * wg + 8 * t)) =
          WM::pack(ng[hr] * W[t][2 * hr], ng[hr] * W[t][2 * hr + 1]);
  }
}

// The wgmma chain's U^T = Vc^T (T hi + T lo)^T for a warpgroup's 64 value rows, into D (D's
// values not read): A = Vc^T from registers, by transposing ldmatrix of the stage's [C, 64]
// value columns (CoreTiles::V's first half); B = T's halves, K-major (CoreTiles::T, zeros above
// the diagonal). The products and their order are the prepare kernels' (UProducts::kFull): the
// same bits. One commit group, not waited for: D, the stage's Vc and T stay in use until a wait.
template <class M>
__device__ __forceinline__ void wgmma_u_products(const uint16_t* v_tile, const uint16_t* t_hi, const uint16_t* t_lo,
                                                 int warp, int lane, float (&D)[8][4]) {
  uint32_t va[kC / 16][4];  // Vc^T's A fragments, k-step ks: tokens [16 ks, +16)
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) ldsm_x4_trans(va[ks], a_cols<CoreTiles::V>(v_tile, 16 * warp, 16 * ks, lane));
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) {
    const uint64_t th = k_major_desc<kC>(t_hi, 16 * ks), tl = k_major_desc<kC>(t_lo, 16 * ks);
    if (ks == 0)
      wgmma_64<M, false>(D, va[0], th);
    else
      wgmma_64<M>(D, va[ks], th);
#if !GDN_LAB_SINGLE_PRODUCTS
    wgmma_64<M>(D, va[ks], tl);
#endif
  }
  wgmma_commit();
}

// One chunk of the chain for the warpgroup's 64 state rows (all 8 warps of the CTA call it), in
// two parts:
//   wgmma_chain_outputs   D^T += S (-W)^T   (S hi + lo)      O^T = S Qc^T (S hi)
//                         O^T  = O^T diag(q_f) + D^T P^T     (dh ph + dl ph + dh pl)
//   wgmma_state_update    S    = gamma_C S + (D^T diag(k_f)) Kc   (D scaled, hi + lo;
//                         gamma_C = chunk_decay(ct), formed by the caller)
// with q_f, k_f the chain's per-token factors already formed (kFactors), as the fused kernel's
// mma.sync chain takes them. The tiles must be visible to wgmma (fence_shared_for_wgmma by
// their writers, then a barrier). The outputs' part waits for its products (-W, Qc and P may
// change after it); two of its k-steps' A fragments are in flight: each k-step's products are
// committed as a group, and the next-but-one k-step reuses its registers after waiting for that
// group. The state update issues its four k-steps as four groups, each with its own A
// fragments (a), and returns without waiting: S and a stay in use, and Kc unchanged, until a
// wgmma_wait<0> (the caller's work in between overlaps them; a group committed before them
// completes first: wgmma_wait<4>).
// (wgmma_chain_outputs is the one-role fused kernel's; wgmma_chain_outputs_half below, the
// warp-specialised kernel's and the split form's, also takes the state update: see there.)
struct NoWork {
  __device__ __forceinline__ void operator()() const {}
};
// The output factors q_f of the lane's token columns (8 t + 2 q, + 1), and O^T diag(q_f).
__device__ __forceinline__ void load_output_factors(const ChainTiles& ct, int q, float2 (&qf)[8]) {
#pragma unroll
  for (int t = 0; t < 8; ++t) qf[t] = *reinterpret_cast<const float2*>(&ct.q_f[8 * t + 2 * q]);
}
__device__ __forceinline__ void scale_token_columns(float (&O)[8][4], const float2 (&qf)[8]) {
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    O[t][0] *= qf[t].x, O[t][2] *= qf[t].x;
    O[t][1] *= qf[t].y, O[t][3] *= qf[t].y;
  }
}
template <class M>
__device__ __forceinline__ void wgmma_chain_outputs(const ChainTiles& ct, int lane, const float (&S)[16][4],
                                                    float (&D)[8][4], float (&O)[8][4]) {
  const int q = lane & 3;
  uint32_t a[2][2][4];
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    if (ks >= 2) wgmma_wait<1>();
    acc_to_a_split<M>(S, ks, a[ks & 1][0], a[ks & 1][1]);
    wgmma_fence();
    const uint64_t wd = k_major_desc<kK>(ct.w_neg, 16 * ks);
    wgmma_64<M>(D, a[ks & 1][0], wd);
    wgmma_64<M>(D, a[ks & 1][1], wd);
    const uint64_t qd = swizzle128_desc_k<kC>(ct.q, 16 * ks);
    if (ks == 0)
      wgmma_64<M, false>(O, a[ks & 1][0], qd);  // O^T's first sums: no zeroing moves
    else
      wgmma_64<M>(O, a[ks & 1][0], qd);
    wgmma_commit();
  }
  float2 qf[8];  // the output factors of the lane's token columns, read while the products run
                 // (after the wait, whose memory clobber holds loads back, their latency showed)
  load_output_factors(ct, q, qf);
  wgmma_wait<0>();
  scale_token_columns(O, qf);  // O^T diag(q_f) + D^T P^T
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) {  // P's zero blocks above the diagonal multiplied too
    if (ks >= 2) wgmma_wait<1>();
    acc_to_a_split<M>(D, ks, a[ks & 1][0], a[ks & 1][1]);
    wgmma_fence();
    const uint64_t hd = k_major_desc<kC>(ct.p_hi, chain_token_block(ks)),
                   ld = k_major_desc<kC>(ct.p_lo, chain_token_block(ks));
    wgmma_64<M>(O, a[ks & 1][0], hd);
    wgmma_64<M>(O, a[ks & 1][1], hd);
    wgmma_64<M>(O, a[ks & 1][0], ld);
    wgmma_commit();
  }
  wgmma_wait<0>();
}

// wgmma_chain_outputs in the warp-specialised kernel's precision (chunked_range.cuh): the
// products of two computed operands in f16, one product each,
//   D^T += S (-W)^T     S and -W in f16            O^T = S Qc^T   (S in M's type, as before)
//   O^T  = O^T diag(q_f) + D^T P^T                 D and P in f16
// with the warp's S, D and O at 2^-sigma times their values: D brought below f16's limit before
// its product (keep_values_in_range), so sigma may grow here. -W and P in f16 (as the
// preparations store them for these kernels). Otherwise as wgmma_chain_outputs, and:
// kOutputs false (the sequence split's runs that write no o): D alone, O untouched.
// then_issue(): the caller's next products, issued once D is complete (with kOutputs, behind
// D^T P^T, so that the tensor pipe goes on without a gap); the function returns with its
// kLeftInFlight groups still in flight (wgmma_state_update's 4) and O complete.
// kDecayEarly: S scaled by s_decay (the state update's gamma_C, which then skips it) once S's
// last fragments are formed, while the first products run (in the state update its multiplies
// stood between D^T P^T's issue and the update's, where the pipe ran dry). The fused kernel's
// chain keeps the late form: at its 176 registers ptxas serialised its wgmma with the early one.
template <class M, bool kOutputs = true, int kLeftInFlight = 0, int kFragDepth = 2, bool kDecayEarly = false,
          class ThenIssue = NoWork, class DComplete = NoWork>
__device__ __forceinline__ void wgmma_chain_outputs_half(const ChainTiles& ct, int lane, float (&S)[16][4],
                                                         float (&D)[8][4], float (&O)[8][4], int& sigma,
                                                         float s_decay, ThenIssue&& then_issue = NoWork{},
                                                         DComplete&& d_complete = NoWork{}) {
  constexpr bool kSame = std::is_same_v<M, MmaF16>;  // f16 inputs: one fragment serves both
  const int q = lane & 3;
  constexpr int kF = kFragDepth;  // fragment sets in flight: a k step reuses set ks % kF once
                                  // the products that read it (k step ks - kF) are done
  static_assert(kF >= 2 && kF <= 8 && (kF & (kF - 1)) == 0, "fragment depth");
  uint32_t a[kF][2][4];  // S in f16, S in M's type
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    if (ks >= kF) wgmma_wait<kF - 1>();
    acc_to_a<MmaF16>(S, ks, a[ks % kF][0]);
    if constexpr (kOutputs && !kSame) acc_to_a<M>(S, ks, a[ks % kF][1]);
    wgmma_fence();
    wgmma_64<MmaF16>(D, a[ks % kF][0], k_major_desc<kK>(ct.w_neg, 16 * ks));
    if constexpr (kOutputs) {
      const uint64_t qd = swizzle128_desc_k<kC>(ct.q, 16 * ks);
      if (ks == 0)
        wgmma_64<M, false>(O, a[ks % kF][kSame ? 0 : 1], qd);  // O^T's first sums: no zeroing moves
      else
        wgmma_64<M>(O, a[ks % kF][kSame ? 0 : 1], qd);
    }
    wgmma_commit();
  }
  if constexpr (kDecayEarly) scale_tiles(S, s_decay);  // (S is no product's operand now: its fragments are)
  if constexpr (kOutputs) {
    float2 qf[8];  // read while the products run
    load_output_factors(ct, q, qf);
    wgmma_wait<0>();
    d_complete();  // (the caller's signal: the tensor pipe has nothing of this warpgroup's now)
    keep_values_in_range(S, D, O, sigma);
    scale_token_columns(O, qf);
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {  // P's zero blocks above the diagonal multiplied too
      constexpr int kF2 = kF < 4 ? kF : 4;
      if (ks >= kF2) wgmma_wait<kF2 - 1>();
      acc_to_a<MmaF16>(D, ks, a[ks % kF2][0]);
      wgmma_fence();
      wgmma_64<MmaF16>(O, a[ks % kF2][0], k_major_desc<kC>(ct.p_hi, chain_token_block(ks)));
      wgmma_commit();
    }
    then_issue();
    wgmma_wait<kLeftInFlight>();
  } else {  // D alone: its range for the state update only (bf16 pairs there: no limit), then on
    wgmma_wait<0>();
    then_issue();
  }
}

// gamma_C, the chunk's decay of the state: formed by the caller before wgmma_chain_outputs, so
// that its load and exp run beside those products (formed at the state update's top, the
// scaling of S waited on them: Nsight Compute, the fused kernel).
__device__ __forceinline__ float chunk_decay(const ChainTiles& ct) { return expf(ct.G[kC - 1]); }

// The state factors k_f of the lane's token columns (in the chain's token order).
__device__ __forceinline__ void load_state_factors(const ChainTiles& ct, int q, float2 (&kf)[8]) {
#pragma unroll
  for (int t = 0; t < 8; ++t) kf[t] = *reinterpret_cast<const float2*>(&ct.k_f[((8 * t) ^ kTokenRowXor) + 2 * q]);
}
// D^T's tiles 2 ks, 2 ks + 1 with their token columns scaled by the state factors: the state
// update's A operand at k-step ks, before its rounding.
__device__ __forceinline__ void state_factor_tiles(const float (&D)[8][4], const float2 (&kf)[8], int ks,
                                                   float (&dd)[2][4]) {
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const float2 f = kf[2 * ks + u];
    dd[u][0] = D[2 * ks + u][0] * f.x, dd[u][2] = D[2 * ks + u][2] * f.x;
    dd[u][1] = D[2 * ks + u][1] * f.y, dd[u][3] = D[2 * ks + u][3] * f.y;
  }
}

// kScaleState false: S already holds gamma_C S (wgmma_chain_outputs_half's s_decay).
template <class M, bool kScaleState = true>
__device__ __forceinline__ void wgmma_state_update(const ChainTiles& ct, int lane, float decay, float (&S)[16][4],
                                                   const float (&D)[8][4], uint32_t (&a)[4][2][4]) {
  float2 kf[8];  // the state factors of the lane's token columns, all read before the first wgmma
  load_state_factors(ct, lane & 3, kf);
  if constexpr (kScaleState) scale_tiles(S, decay);
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) {
    float dd[2][4];  // D^T tiles 2 ks, 2 ks + 1, columns scaled by the state factors
    state_factor_tiles(D, kf, ks, dd);
    acc_to_a_split<M>(dd, 0, a[ks][0], a[ks][1]);
    wgmma_fence();
    const uint64_t kd = swizzle128_desc_mn<kC>(ct.k, chain_token_block(ks));
    wgmma_128_mn<M>(S, a[ks][0], kd);
#if !GDN_LAB_SINGLE_PRODUCTS
    wgmma_128_mn<M>(S, a[ks][1], kd);
#endif
    wgmma_commit();
  }
}

// o of the warp's 16 value rows into a token-major staging tile in CoreTiles::Q's layout (the
// warp's values at columns [16 warp, +16)), scaled: O^T's 8 x 8 blocks (values, tokens) stored
// transposed by stmatrix, lane l giving the row of token 8 (2 u + (l >> 4)) + (l & 7), values
// [16 warp + 8 ((l >> 3) & 1), +8) (16 bytes, swizzled by the token's low bits alone): one
// address a lane, 2048 bytes a step of u. The fused kernel's and the wgmma chain's o.
template <class M>
__device__ __forceinline__ void stage_o_stmatrix(uint16_t* o_stage, const float (&O)[8][4], float scale, int warp,
                                                 int lane) {
  const int i = lane >> 3;
  const uint32_t row = smem_addr(o_stage + CoreTiles::Q::at(8 * (i >> 1) + (lane & 7), 16 * warp + 8 * (i & 1)));
#pragma unroll
  for (int u = 0; u < 4; ++u) {
    const uint32_t r[4] = {M::pack(scale * O[2 * u][0], scale * O[2 * u][1]),
                           M::pack(scale * O[2 * u][2], scale * O[2 * u][3]),
                           M::pack(scale * O[2 * u + 1][0], scale * O[2 * u + 1][1]),
                           M::pack(scale * O[2 * u + 1][2], scale * O[2 * u + 1][3])};
    stsm_x4_trans(row + u * 16 * 128, r);  // 16 tokens of 128-byte rows
  }
}

#endif  // GDN_CHUNKED_WGMMA

}  // namespace gdn::cuda::chunked

// The chunked prefill kernels for f32 q, k, v (path chunked with f32 inputs). The fused form: one
// CTA of 8 warps per (sequence, value head) walking the sequence chunk by chunk, the V x K f32
// state in registers as m16n8 accumulator tiles (warp w: rows [16 w, +16), every key column:
// chunked_steps.cuh's load_state / store_state / store_checkpoint layout); or, where a batch has
// few (sequence, value head) pairs, two or four CTAs a pair, each with V / 2 or V / 4 of the
// state's rows over its 8 warps (F32Split below; f32_value_split in chunked_tile.h picks).
// The split form (f32_split_form in chunked_tile.h: from 2, 4 or 6 chunks a sequence by the value
// split): every chunk's key side (A's inverse X, and P) formed at once over all SMs, two CTAs an
// SM, by a prepare kernel into the workspace (F32PreparedChunk), then the same kernel as a chain
// that copies X and P in instead of forming them, so the CTAs of a pair no longer each form the
// key side in their turn. Where even that leaves most SMs idle (few pairs, long sequences), the
// split form's chain runs as the exact sequence split (plan_f32_segments in chunked_tile.h):
// pass 1 without o (each segment's end from the initial state, zeros or I), the combine
// (chunked_combine.cuh), pass 2 over every segment with o (f32_chain_run below).
// Every product that touches the state runs on tensor cores in 3xTF32 (each operand x = hi + lo, hi
// its top 19 bits, lo the f32 remainder truncated to tf32 by the hardware; a b ~ a_lo b_hi + a_hi
// b_lo + a_hi b_hi, about 2^-20 relative a product), and so do the chunk's key products and the
// inverse's block merges; q and k are split once a chunk (every warp reads both parts: split at
// each use, the kernel was 21% slower), the inverse's 16 x 16 diagonal blocks by forward
// substitution in f32. So the result is an f32 computation of the chunked form (SPEC.md's chunked
// f32 tolerance, 1e-4; measured on the H200: o about 1e-6, the state 5e-7 to 2.5e-6); both forms
// compute the same bits. docs/NOTES.md, fifty-fourth to fifty-seventh sessions, have the figures
// and profiles.
//
// The maths, SPEC.md letters (ALGORITHMS.md; Kn, Qn the rows after the optional L2 norm, G the
// in-chunk cumulative log-decay, gamma_t = exp(G_t)):
//   A   = strictly_lower(diag(beta) (Mask o Kn Kn^T)),   Mask_ij = exp(G_i - G_j) (j <= i)
//   T   = (I + A)^-1 diag(beta)
//   Y   = Vc - diag(gamma) Kn S^T                 [C, V]   (S: the chunk's start state, V x K)
//   D   = T Y                                             (= U - W S^T)
//   O   = scale (diag(gamma) Qn S^T + (Mask o Qn Kn^T) D)
//   S'  = gamma_C S + D^T diag(exp(G_C - G)) Kn
// computed transposed (Y^T, D^T, O^T: [V, C]) so that S, Y and D are the A operands straight
// from their accumulators: a k-step's A fragment from accumulator tile t takes slot q as column
// 2q and slot q + 4 as column 2q + 1 of the tile (a permutation of the k order, which the B
// fragment follows: b0 from row 2q, b1 from row 2q + 1).
//
// Shared memory: F32Smem (chunked_tile.h), about 225 KB, one CTA an SM: q, k, v of one chunk
// (not double buffered: the copies, all in flight at once, land at each chunk's top, from the
// L2 where the chunk before prefetched them; v only the CTA's columns), q and k as tf32 high
// parts and remainders (split once, after they land), A, X, P; Qn's tiles take the partial sums
// once they are read (F32Partials).
#include "cuda/chunked_combine.cuh"
#include "cuda/chunked_launch.h"
#include "cuda/chunked_runs.cuh"
#include "cuda/chunked_slots.cuh"
#include "cuda/chunked_steps.cuh"

namespace gdn::cuda::chunked {
namespace {

inline constexpr size_t kF32SmemBytes = sizeof(F32Smem);
static_assert(sizeof(F32Smem::a) >= (kMaxRanked + 1) * sizeof(int64_t), "A's tile holds longest_first's scratch");
static_assert(kThreads == 256 && kC == 64 && kK == 128 && kV == 128, "written for 8 warps, C = 64, K = V = 128");

// ---- 3xTF32 products

struct Tf32Pair {
  uint32_t hi, lo;
};
__device__ __forceinline__ Tf32Pair split_tf32(float x) {
  const uint32_t hi = __float_as_uint(x) & 0xffffe000u;  // sign, exponent, 10 mantissa bits
  return {hi, __float_as_uint(x - __uint_as_float(hi))};  // exact remainder (the mma reads its top 19 bits)
}

__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A k-step's A operand (16 rows x 8 k) from an accumulator tile, as hi and lo parts, in the
// permuted k order above.
struct Tf32Frag {
  uint32_t hi[4], lo[4];
};
__device__ __forceinline__ Tf32Frag a_fragment(const float (&acc)[4]) {
  const float x[4] = {acc[0], acc[2], acc[1], acc[3]};  // (g, 2q), (g + 8, 2q), (g, 2q + 1), (g + 8, 2q + 1)
  Tf32Frag f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const Tf32Pair s = split_tf32(x[e]);
    f.hi[e] = s.hi;
    f.lo[e] = s.lo;
  }
  return f;
}

// d += a b for B's k rows 2q (b0) and 2q + 1 (b1) of column g, in 3xTF32 (the small terms first).
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Tf32Frag& a, float b0, float b1) {
  const Tf32Pair s0 = split_tf32(b0), s1 = split_tf32(b1);
  mma_tf32(d, a.lo, s0.hi, s1.hi);
  mma_tf32(d, a.hi, s0.lo, s1.lo);
  mma_tf32(d, a.hi, s0.hi, s1.hi);
}

// B's k rows 2q and 2q + 1 of column g, as hi and lo parts (split once a chunk, in shared memory).
struct Tf32B {
  uint32_t hi0, hi1, lo0, lo1;
};
// From a tile whose k index is its column: row `row`, columns col, col + 1 (one float2 each).
__device__ __forceinline__ Tf32B b_from_row(const float (*hi)[kLdF32Tok], const float (*lo)[kLdF32Tok], int row,
                                            int col) {
  const float2 h = *reinterpret_cast<const float2*>(&hi[row][col]);
  const float2 l = *reinterpret_cast<const float2*>(&lo[row][col]);
  return {__float_as_uint(h.x), __float_as_uint(h.y), __float_as_uint(l.x), __float_as_uint(l.y)};
}
// From a tile whose k index is its row: rows k0, k0 + 1 of column `col`.
__device__ __forceinline__ Tf32B b_from_column(const float (*hi)[kLdF32Tok], const float (*lo)[kLdF32Tok], int k0,
                                               int col) {
  return {__float_as_uint(hi[k0][col]), __float_as_uint(hi[k0 + 1][col]), __float_as_uint(lo[k0][col]),
          __float_as_uint(lo[k0 + 1][col])};
}
__device__ __forceinline__ void mma_3xtf32(float (&d)[4], const Tf32Frag& a, const Tf32B& b) {
  mma_tf32(d, a.lo, b.hi0, b.hi1);
  mma_tf32(d, a.hi, b.lo0, b.lo1);
  mma_tf32(d, a.hi, b.hi0, b.hi1);
}
// A k-step's A operand (rows r0 + g, r0 + g + 8; columns col, col + 1) from split tiles, in the
// permuted k order of a_fragment.
__device__ __forceinline__ Tf32Frag a_from_rows(const float (*hi)[kLdF32Tok], const float (*lo)[kLdF32Tok], int r0,
                                                int g, int col) {
  const float2 h0 = *reinterpret_cast<const float2*>(&hi[r0 + g][col]);
  const float2 h8 = *reinterpret_cast<const float2*>(&hi[r0 + g + 8][col]);
  const float2 l0 = *reinterpret_cast<const float2*>(&lo[r0 + g][col]);
  const float2 l8 = *reinterpret_cast<const float2*>(&lo[r0 + g + 8][col]);
  return {{__float_as_uint(h0.x), __float_as_uint(h8.x), __float_as_uint(h0.y), __float_as_uint(h8.y)},
          {__float_as_uint(l0.x), __float_as_uint(l8.x), __float_as_uint(l0.y), __float_as_uint(l8.y)}};
}

// ---- tiles in and out (f32 rows of 128 elements; 16-byte pieces where the view allows)

__device__ __forceinline__ bool rows_aligned16(const TokenView& view) {
  return ((reinterpret_cast<uintptr_t>(view.p) | uintptr_t(view.seq * 4) | uintptr_t(view.tok * 4) |
           uintptr_t(view.head * 4)) & 15u) == 0;
}

// Token rows [tok0, tok0 + rows), columns [col0, col0 + kCols) of head `head` into tile's
// columns [0, kCols) (zeros past rows): a warp takes 32 / (kCols / 4) rows at once, each lane
// 4 columns (kCols = 128: warp w rows w, w + 8, ..., lane l columns [4 l, +4)). By cp.async
// where the view's rows are 16-byte aligned (all of a chunk's copies in flight at once: the
// caller commits and waits), else by loads. A whole chunk of aligned rows, the common case, is
// straight-line code (one address, then a fixed stride: Nsight Compute had the copies' address
// arithmetic and branches at 14% of the split form's chain).
template <int kCols = kK>
__device__ __forceinline__ void load_rows_f32(const TokenView& view, int64_t n, int64_t tok0, int rows, int head,
                                              float (*tile)[kLdF32Tok], int warp, int lane, int col0 = 0) {
  constexpr int kLanesRow = kCols / 4, kRowsAtOnce = 32 / kLanesRow, kStep = kRowsAtOnce * kWarps;
  const int col = 4 * (lane % kLanesRow), r0 = kRowsAtOnce * warp + lane / kLanesRow;
  const float* base = static_cast<const float*>(view.p) + n * view.seq + tok0 * view.tok + head * view.head + col0 + col;
  const bool vec = rows_aligned16(view);
  if (vec && rows == kC) {  // (uniform)
    const float* src = base + r0 * view.tok;
    const int64_t step = kStep * view.tok;
#pragma unroll
    for (int i = 0; i < kC / kStep; ++i) cp_async16(&tile[r0 + kStep * i][col], src + i * step, 16);
    return;
  }
#pragma unroll
  for (int r = r0; r < kC; r += kStep) {
    const bool live = r < rows;
    const float* src = base + (live ? r : 0) * view.tok;
    if (vec) {
      cp_async16(&tile[r][col], src, live ? 16 : 0);
    } else {
      *reinterpret_cast<float4*>(&tile[r][col]) =
          live ? make_float4(__ldg(src), __ldg(src + 1), __ldg(src + 2), __ldg(src + 3)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
}

// The rows of the next chunk into the L2 (one prefetch a 128-byte line of columns [col0, col0 +
// kCols): at most one a thread), while this one runs.
template <int kCols = kK>
__device__ __forceinline__ void prefetch_rows_f32(const TokenView& view, int64_t n, int64_t tok0, int rows, int head,
                                                  int tid, int col0 = 0) {
  constexpr unsigned kLines = kCols / 32;
  static_assert(kC * kLines <= kThreads, "one line a thread");
  const unsigned e = unsigned(tid);
  if (e >= unsigned(rows) * kLines) return;
  const char* line = reinterpret_cast<const char*>(static_cast<const float*>(view.p) + n * view.seq +
                                                   (tok0 + int64_t(e / kLines)) * view.tok + head * view.head + col0);
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(line + (e % kLines) * 128));
}

// A row's four pieces a lane scaled by rsqrt(sum x^2 + 1e-6), the sum over the warp's 32 lanes
// (the L2 norm of a 128-element row).
__device__ __forceinline__ float4 l2_normalised(float4 x) {
  float ss = x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
  const float rn = rsqrtf(ss + 1e-6f);
  return make_float4(x.x * rn, x.y * rn, x.z * rn, x.w * rn);
}

// Rows (optionally scaled by rsqrt(sum x^2 + 1e-6) first: the L2 norm) split in place into
// their tf32 high parts and, in `lo`, the remainders: warp w rows w, w + 8, ..., lane l columns
// [4 l, +4) (the pieces this thread copied).
__device__ __forceinline__ void split_rows_f32(float (*tile)[kLdF32Tok], float (*lo)[kLdF32Tok], bool normalise,
                                               int warp, int lane) {
#pragma unroll 2
  for (int r = warp; r < kC; r += kWarps) {
    float4 x = *reinterpret_cast<const float4*>(&tile[r][4 * lane]);
    if (normalise) x = l2_normalised(x);
    const Tf32Pair sx = split_tf32(x.x), sy = split_tf32(x.y), sz = split_tf32(x.z), sw = split_tf32(x.w);
    *reinterpret_cast<float4*>(&tile[r][4 * lane]) =
        make_float4(__uint_as_float(sx.hi), __uint_as_float(sy.hi), __uint_as_float(sz.hi), __uint_as_float(sw.hi));
    *reinterpret_cast<float4*>(&lo[r][4 * lane]) =
        make_float4(__uint_as_float(sx.lo), __uint_as_float(sy.lo), __uint_as_float(sz.lo), __uint_as_float(sw.lo));
  }
}

// Rows scaled in place by l2_normalised (split_rows_f32's norm, without the split): warp w
// rows w, w + 8, ..., lane l columns [4 l, +4) (the pieces this thread copied).
__device__ __forceinline__ void normalise_rows_f32(float (*tile)[kLdF32Tok], int warp, int lane) {
#pragma unroll 2
  for (int r = warp; r < kC; r += kWarps) {
    *reinterpret_cast<float4*>(&tile[r][4 * lane]) = l2_normalised(*reinterpret_cast<const float4*>(&tile[r][4 * lane]));
  }
}

// o rows [tok0, tok0 + rows), columns [col0, col0 + kCols) of value head h from the staging
// tile's columns [0, kCols) (token-major), as load_rows_f32 reads.
template <int kCols>
__device__ __forceinline__ void store_rows_f32(const ChunkParams& p, const float (*tile)[kLdF32Tok], int64_t n,
                                               int64_t tok0, int rows, int h, int col0, int warp, int lane) {
  constexpr int kLanesRow = kCols / 4, kRowsAtOnce = 32 / kLanesRow;
  const int col = 4 * (lane % kLanesRow);
  const bool vec = rows_aligned16(p.o);
  float* base = static_cast<float*>(p.o.p) + n * p.o.seq + tok0 * p.o.tok + h * p.o.head + col0 + col;
  for (int r = kRowsAtOnce * warp + lane / kLanesRow; r < rows; r += kRowsAtOnce * kWarps) {
    const float4 x = *reinterpret_cast<const float4*>(&tile[r][col]);
    float* dst = base + r * p.o.tok;
    if (vec) {
      *reinterpret_cast<float4*>(dst) = x;
    } else {
      dst[0] = x.x, dst[1] = x.y, dst[2] = x.z, dst[3] = x.w;
    }
  }
}

// ---- the chunk's state-independent steps

// Kn Kn^T and Qn Kn^T on tensor cores (3xTF32, the A fragments in the permuted k order): warp w
// forms rows [16 (w % 4), +16) x columns [32 (w / 4), +32) of both (two warps' blocks lie wholly
// above the diagonal: zeros). Both operands from the split tiles (rows.q_lo, rows.k_lo), or with
// kSplitAtUse from f32 tiles, split as they are read (the same parts, so the same sums). They
// need no gate, so the split form's prepare kernel forms them once for every value head of a key
// head.
struct F32KeyProducts {
  float kk[4][4], qk[4][4];  // the warp's m16n8 tiles (columns c0 + 8 nt)
};
struct F32RowTiles {
  const float (*q)[kLdF32Tok];
  const float (*k)[kLdF32Tok];
  const float (*q_lo)[kLdF32Tok];  // (unused with kSplitAtUse)
  const float (*k_lo)[kLdF32Tok];
};
template <bool kSplitAtUse>
__device__ __forceinline__ F32KeyProducts key_products_f32(const F32RowTiles& rows, int warp, int lane) {
  const int g = lane >> 2, q = lane & 3;
  const int r0 = 16 * (warp & 3), c0 = 32 * (warp >> 2);
  const auto a_operand = [&](const float (*t)[kLdF32Tok], const float (*t_lo)[kLdF32Tok], int col) {
    if constexpr (kSplitAtUse) {
      const float2 x0 = *reinterpret_cast<const float2*>(&t[r0 + g][col]);
      const float2 x8 = *reinterpret_cast<const float2*>(&t[r0 + g + 8][col]);
      return a_fragment({x0.x, x0.y, x8.x, x8.y});
    } else {
      return a_from_rows(t, t_lo, r0, g, col);
    }
  };
  F32KeyProducts r = {};
  if (c0 <= r0 + 15) {  // (warp-uniform)
#pragma unroll 4
    for (int kt = 0; kt < kK / 8; ++kt) {
      const int col = 8 * kt + 2 * q;
      const Tf32Frag ak = a_operand(rows.k, rows.k_lo, col), aq = a_operand(rows.q, rows.q_lo, col);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int row = c0 + 8 * nt + g;
        if constexpr (kSplitAtUse) {
          const float2 kb = *reinterpret_cast<const float2*>(&rows.k[row][col]);
          const Tf32Pair s0 = split_tf32(kb.x), s1 = split_tf32(kb.y);
          const Tf32B b{s0.hi, s1.hi, s0.lo, s1.lo};
          mma_3xtf32(r.kk[nt], ak, b);
          mma_3xtf32(r.qk[nt], aq, b);
        } else {
          const Tf32B b = b_from_row(rows.k, rows.k_lo, row, col);
          mma_3xtf32(r.kk[nt], ak, b);
          mma_3xtf32(r.qk[nt], aq, b);
        }
      }
    }
  }
  return r;
}

// The tiles the inverse and the masks work on: F32Smem's own, or the prepare kernel's over its
// rows (F32PrepSmem).
struct F32KeyTiles {
  float (*a)[kLdF32CC];  // [C, C] A (strictly lower; the merges keep Z above the diagonal)
  float (*x)[kLdF32CC];  // [C, C] X
  float (*p)[kLdF32CC];  // [C, C] P
  const float* G;        // [C] chunk_gates
  const float* beta;     // [C]
};

// A and P from the key products and a value head's gates (s.G, s.beta): their masks, zeros above
// the diagonal.
__device__ __forceinline__ void mask_key_products_f32(const ChunkParams& p, const F32KeyTiles& s,
                                                      const F32KeyProducts& r, int warp, int lane) {
  const int g = lane >> 2, q = lane & 3;
  const int r0 = 16 * (warp & 3), c0 = 32 * (warp >> 2);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = r0 + g + 8 * (e >> 1), j = c0 + 8 * nt + 2 * q + (e & 1);
      const float mask = j <= i ? expf(s.G[i] - s.G[j]) : 0.f;  // exp(G_i - G_j) <= 1, never a quotient
      s.a[i][j] = j < i ? s.beta[i] * mask * r.kk[nt][e] : 0.f;
      s.p[i][j] = p.scale * mask * r.qk[nt][e];
    }
}

// X = (I + A)^-1 in 16 x 16 blocks, by column strips: warp w = 2 b + s forms X's columns
// [16 b + 8 s, +8) below the diagonal, so that every value of X a warp reads but the diagonal
// blocks is one it wrote (A is read-only here): one CTA barrier, after the diagonal blocks.
// First the diagonal block X_bb = (I + A_bb)^-1 by forward substitution, a column a group of
// four lanes (column c, lane r summing the terms m = r mod 4): X_ic = -sum_{c <= m < i} A_im
// X_mc, lane i % 4 storing X_ic, zeros above the diagonal. Then block row by block row (i = b +
// 1 .. 3) on tensor cores (3xTF32): Z_ib = sum_{b <= m < i} A_im X_mb, kept in A's unused block
// above the diagonal at (b, i), and X_ib = -X_ii Z_ib.
__device__ __forceinline__ void invert_unit_lower_f32(const F32KeyTiles& s, int warp, int lane) {
  const int b = warp >> 1, n0 = 16 * b + 8 * (warp & 1);  // the strip's first column
  {
    // lane r of column c's group holds the block's rows 16 b + r + 4 j (x[j], j = 0..3) in
    // registers, zero above the diagonal (so the terms m < c of each sum add zeros: the same sums
    // as from m = c on), and the rows fully unrolled: no loop counters, no shared-memory round
    // trip between a row's store and the next row's reads
    const int c = n0 + (lane >> 2), r = lane & 3, cb = c - 16 * b;  // cb: c within the block
    float x[4];
#pragma unroll
    for (int jx = 0; jx < 4; ++jx) x[jx] = r + 4 * jx == cb ? 1.f : 0.f;
#pragma unroll
    for (int i = 1; i < 16; ++i) {  // the block's row i
      float part = 0.f;
#pragma unroll
      for (int jx = 0; jx < 4; ++jx)
        if (r + 4 * jx < i) part += s.a[16 * b + i][16 * b + r + 4 * jx] * x[jx];
      part += __shfl_xor_sync(0xffffffffu, part, 1);
      part += __shfl_xor_sync(0xffffffffu, part, 2);
      if (i > cb && (i & 3) == r) x[i >> 2] = -part;
    }
#pragma unroll
    for (int jx = 0; jx < 4; ++jx) s.x[16 * b + r + 4 * jx][c] = x[jx];
  }
  __syncthreads();  // every diagonal block (X_ii is another warp pair's)
  const int g = lane >> 2, q = lane & 3;
  for (int i = b + 1; i < 4; ++i) {  // (warp-uniform)
    __syncwarp();  // this strip's X so far
    float z[4] = {};
    for (int m0 = 16 * b; m0 < 16 * i; m0 += 8) {  // Z's k-steps (the permuted k order of a_fragment)
      const float2 a0 = *reinterpret_cast<const float2*>(&s.a[16 * i + g][m0 + 2 * q]);
      const float2 a8 = *reinterpret_cast<const float2*>(&s.a[16 * i + g + 8][m0 + 2 * q]);
      mma_3xtf32(z, a_fragment({a0.x, a0.y, a8.x, a8.y}), s.x[m0 + 2 * q][n0 + g], s.x[m0 + 2 * q + 1][n0 + g]);
    }
    *reinterpret_cast<float2*>(&s.a[16 * b + g][16 * i + 8 * (warp & 1) + 2 * q]) = make_float2(z[0], z[1]);
    *reinterpret_cast<float2*>(&s.a[16 * b + g + 8][16 * i + 8 * (warp & 1) + 2 * q]) = make_float2(z[2], z[3]);
    __syncwarp();
    float x[4] = {};
#pragma unroll
    for (int k0 = 0; k0 < 16; k0 += 8) {
      const float2 x0 = *reinterpret_cast<const float2*>(&s.x[16 * i + g][16 * i + k0 + 2 * q]);
      const float2 x8 = *reinterpret_cast<const float2*>(&s.x[16 * i + g + 8][16 * i + k0 + 2 * q]);
      const int zc = 16 * i + 8 * (warp & 1) + g;
      mma_3xtf32(x, a_fragment({x0.x, x0.y, x8.x, x8.y}), s.a[16 * b + k0 + 2 * q][zc],
                 s.a[16 * b + k0 + 2 * q + 1][zc]);
    }
    *reinterpret_cast<float2*>(&s.x[16 * i + g][n0 + 2 * q]) = make_float2(-x[0], -x[1]);
    *reinterpret_cast<float2*>(&s.x[16 * i + g + 8][n0 + 2 * q]) = make_float2(-x[2], -x[3]);
  }
}

// ---- the split form's prepared chunks (F32PreparedChunk, chunked_tile.h)

// X and P (kWithP; else X alone: a run without o) of one prepared chunk into the chain's tiles,
// by cp.async (16-byte pieces: thread t rows t / 16 + 16 i, columns 4 (t % 16) of both; the
// caller commits and waits with the chunk's rows).
inline constexpr int kPiecesRow = kC / 4, kPieceRows = kThreads / kPiecesRow;
static_assert(kC % kPieceRows == 0, "whole passes over a [C, C] tile");
template <bool kWithP>
__device__ __forceinline__ void load_prepared_f32(const F32PreparedChunk& in, F32Smem& s, int tid) {
  const int r = int(unsigned(tid) / kPiecesRow), c = 4 * int(unsigned(tid) % kPiecesRow);
#pragma unroll
  for (int i = 0; i < kC / kPieceRows; ++i) {
    cp_async16(&s.x[r + kPieceRows * i][c], &in.x[r + kPieceRows * i][c], 16);
    if constexpr (kWithP) cp_async16(&s.p[r + kPieceRows * i][c], &in.p[r + kPieceRows * i][c], 16);
  }
}

// The next prepared chunk (kWithP; else its X) into the L2 (one prefetch a 128-byte line), while
// this one runs.
template <bool kWithP>
__device__ __forceinline__ void prefetch_prepared_f32(const F32PreparedChunk& in, int tid) {
  static_assert(offsetof(F32PreparedChunk, x) == 0, "X first");
  constexpr unsigned kLines = (kWithP ? sizeof(F32PreparedChunk) : sizeof(F32PreparedChunk::x)) / 128;
  static_assert(kLines <= kThreads, "one line a thread");
  if (unsigned(tid) < kLines)
    asm volatile("prefetch.global.L2 [%0];\n" ::"l"(reinterpret_cast<const char*>(&in) + 128 * tid));
}

// The prepare kernel's X and P tiles out to the workspace (16-byte stores, load_prepared_f32's
// pieces).
__device__ __forceinline__ void store_prepared_f32(const F32KeyTiles& s, F32PreparedChunk& out, int tid) {
  const int r = int(unsigned(tid) / kPiecesRow), c = 4 * int(unsigned(tid) % kPiecesRow);
#pragma unroll
  for (int i = 0; i < kC / kPieceRows; ++i) {
    *reinterpret_cast<float4*>(&out.x[r + kPieceRows * i][c]) = *reinterpret_cast<const float4*>(&s.x[r + kPieceRows * i][c]);
    *reinterpret_cast<float4*>(&out.p[r + kPieceRows * i][c]) = *reinterpret_cast<const float4*>(&s.p[r + kPieceRows * i][c]);
  }
}

// The split form's preparation: one CTA of 8 warps per (chunk slot blockIdx.x, key head
// blockIdx.y), every chunk at once, two CTAs an SM (F32PrepSmem: the rows in f32, split at each
// use). It forms Kn Kn^T and Qn Kn^T once, then for each value head of the key head (the ratio's)
// that head's A and P, the inverse X, and writes X and P to the head's prepared chunk: the fused
// kernel's steps and roundings, so the chain gets the same bits. Slots no chunk uses, flagged
// sequences and padding are left alone (the chain writes nothing, or o's zeros, for them).
__global__ void __launch_bounds__(kThreads, 2) chunked_prepare_f32_kernel(const __grid_constant__ ChunkParams p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  F32PrepSmem& s = *reinterpret_cast<F32PrepSmem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int j = int(blockIdx.y);  // key / query head
  int64_t n = 0, c = 0;
  if (!slot_owner(p, int64_t(blockIdx.x), n, c)) return;
  Sequence sq;
  if (!resolve_sequence(p, n, sq) || sq.slot < 0) return;
  const int64_t tok0 = sq.bos + c * kC;
  const int rows = int(sq.len - c * kC < kC ? sq.len - c * kC : kC);
  float (*q)[kLdF32Tok] = s.rows[0];
  float (*k)[kLdF32Tok] = s.rows[1];
  load_rows_f32(p.q, n, tok0, rows, j, q, warp, lane);
  load_rows_f32(p.k, n, tok0, rows, j, k, warp, lane);
  cp_async_commit();
  cp_async_wait<0>();
  if (p.l2norm) {
    normalise_rows_f32(q, warp, lane);
    normalise_rows_f32(k, warp, lane);
  }
  __syncthreads();
  const F32KeyProducts products = key_products_f32<true>({q, k, nullptr, nullptr}, warp, lane);
  float* over = &s.rows[0][0][0];  // A, X, P over the rows, once the products are in registers
  const F32KeyTiles t{reinterpret_cast<float(*)[kLdF32CC]>(over), reinterpret_cast<float(*)[kLdF32CC]>(over + kC * kLdF32CC),
                      reinterpret_cast<float(*)[kLdF32CC]>(over + 2 * kC * kLdF32CC), s.G, s.beta};
  F32PreparedChunk* out = static_cast<F32PreparedChunk*>(p.prepared) + int64_t(blockIdx.x) * p.Hv;
  for (int i = 0; i < p.ratio; ++i) {
    const int h = p.tiled ? j + p.Hk * i : j * p.ratio + i;  // the key head's value heads
    if (warp == 0) chunk_gates(p, s.G, s.beta, head_gate(p, h), load_raw_gates(p, n, sq, h, c, lane), rows, lane);
    __syncthreads();  // the gates; the rows read (the first head), the head before's X and P out
    mask_key_products_f32(p, t, products, warp, lane);
    __syncthreads();
    invert_unit_lower_f32(t, warp, lane);
    __syncthreads();
    store_prepared_f32(t, out[h], tid);
  }
}

// ---- the kernel

// A pair's CTAs (kSplit: f32_value_split) split the state by value rows: CTA `part` takes rows
// [v0, v0 + kRows), v0 = kRows part, its 8 warps as kRowBlocks blocks of 16 rows by kSplit key
// parts (warp w: rows v0 + 16 (w % kRowBlocks), key columns [kKeyCols (w / kRowBlocks),
// +kKeyCols)), so every warp holds kKeyTiles m16n8 tiles of S. Y^T and O^T's first term (sums
// over the key columns) are then partial sums that the warps of a row block add through shared
// memory (F32Partials, over Qn's dead tiles); every warp of a row block forms the same D^T (so the
// state update needs no exchange), and each finishes O^T for a balanced set of token tiles
// (o_tile_owned). kSplit = 1 is the one-CTA kernel: no exchange, every warp every tile.
template <int kSplit>
struct F32Split {
  static constexpr int kRows = kV / kSplit;          // state rows (o's values) a CTA
  static constexpr int kRowBlocks = kRows / 16;      // 8 / kSplit
  static constexpr int kKeyCols = kK / kSplit;       // key columns a warp
  static constexpr int kKeyTiles = kKeyCols / 8;
  static_assert(kRowBlocks * kSplit == kWarps, "8 warps: row blocks x key parts");
};

// Partial sums of Y^T and O^T by warp and token tile, each lane's four values in one float4 (a
// warp's 16-byte stores and loads: four wavefronts each, no conflicts): Y's over Qn's high
// parts, O's over its remainders (both dead once Y and O's first pass have read them).
using F32Partials = float4[kWarps][kC / 8][32];
static_assert(sizeof(F32Partials) <= sizeof(F32Smem::q) && sizeof(F32Partials) <= sizeof(F32Smem::q_lo),
              "the partial sums fit Qn's tiles");
__device__ __forceinline__ F32Partials& partials_over(float (*tile)[kLdF32Tok]) {
  return *reinterpret_cast<F32Partials*>(&tile[0][0]);
}

// Whether key part kp finishes O^T's token tile nt. D^T P^T costs tile nt nt + 1 k-steps
// (P is lower triangular), so the parts take tiles of equal cost: 2 parts {0, 3, 4, 7} and {1,
// 2, 5, 6} (18 k-steps each), 4 parts {0, 7}, {1, 6}, {2, 5}, {3, 4} (9 each).
template <int kSplit>
__device__ __forceinline__ bool o_tile_owned(int kp, int nt) {
  if constexpr (kSplit == 1) return true;
  if constexpr (kSplit == 2) return ((nt ^ (nt >> 1)) & 1) == kp;
  return (nt < 4 ? nt : 7 - nt) == kp;
}

// The f32 chain's run for CTA role `role` of pass p.seg_pass (the exact sequence split on the f32
// split form, chunked_tile.h's plan_f32_segments; pass 0: the whole sequence). Pass 1 writes no
// o: role 0 is segment 0 from the initial state (its end is S_start(1)), roles 1 + 2 (m - 1) and
// 2 + 2 (m - 1) middle segment m's R_m (from zeros) and A_m (from I with U = 0). Pass 2 runs
// every segment m = role from S_start(m) with o, segment 0 too: it starts from the copy of the
// initial state that pass 1's role 0 leaves at S_start(0) (`start_copy`), since the last segment
// may write the final state over the initial one in place while segment 0 starts.
__device__ __forceinline__ ChainRun f32_chain_run(const ChunkParams& p, int role, int64_t n, int h, int64_t chunks,
                                                  float*& start_copy) {
  ChainRun run;
  run.c_end = chunks;
  start_copy = nullptr;
  if (p.seg_pass == 0) return run;
  const int m = p.seg_pass == 1 && role > 0 ? 1 + (role - 1) / 2 : role;  // the segment
  run.c_begin = m * p.seg_chunks;
  run.c_end = (m + 1) * p.seg_chunks < chunks ? (m + 1) * p.seg_chunks : chunks;
  run.end_final = false;
  if (p.seg_pass == 1) {
    run.write_o = false;
    if (role == 0) {
      start_copy = seg_state(p, n, 0, h, kSegStart);
      run.end_state = seg_state(p, n, 1, h, kSegStart);
      return run;
    }
    const bool transition = (role - 1) % 2 == 1;
    run.start = transition ? kStartIdentity : kStartZero;
    run.use_u = !transition;
    run.end_state = seg_state(p, n, m, h, transition ? kSegA : kSegR);
    return run;
  }
  run.start = kStartSegment;
  run.start_state = seg_state(p, n, m, h, kSegStart);
  run.end_final = m == p.segments - 1;
  return run;
}

// D^T's token tiles by row block, each lane's four values in one float4, over A's tile (dead once
// the inverse is formed; the split form's chain has no A): the warps of a row block exchange the
// tiles each formed (four CTAs a pair).
template <int kSplit>
using F32DTiles = float4[F32Split<kSplit>::kRowBlocks][kC / 8][32];
static_assert(sizeof(F32DTiles<4>) <= sizeof(F32Smem::a), "D^T's tiles fit A's");
template <int kSplit>
__device__ __forceinline__ F32DTiles<kSplit>& d_tiles_over(float (*tile)[kLdF32CC]) {
  return *reinterpret_cast<F32DTiles<kSplit>*>(&tile[0][0]);
}

// kPrepared: the split form's chain, which copies each chunk's X and P from its prepared chunk
// (p.prepared, chunked_prepare_f32_kernel) instead of forming them; else the fused kernel.
// kPass (kPrepared only; p.seg_pass): 0 whole sequences; 1 and 2 the sequence split's passes
// (f32_chain_run), pass 1's runs without o (no Qn S^T, D P^T, P or o stores) and v only where the
// run has U. (Pass 0 keeps its own instance: with the runs' start and end choices compiled in, its
// chain was 1% slower, 1 x 4096 and 1 x 16384.)
template <int kSplit, bool kPrepared, int kPass = 0>
__global__ void __launch_bounds__(kThreads, 1) chunked_prefill_f32_kernel(const __grid_constant__ ChunkParams p) {
  static_assert(kPass == 0 || kPrepared, "the sequence split's passes are the split form's");
  constexpr bool kOutputs = kPass != 1, kRuns = kPass != 0;
  using Sp = F32Split<kSplit>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  F32Smem& s = *reinterpret_cast<F32Smem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, q = lane & 3;
  const int rb = warp % Sp::kRowBlocks, kp = warp / Sp::kRowBlocks;  // the warp's row block, key part
  // CTA (role, pair, part): role-major, so that a pass's runs of one role share a wave (the fused
  // kernel: one role)
  const int64_t units = p.N * p.Hv * kSplit;  // CTAs of one role
  const int role = kRuns ? int(int64_t(blockIdx.x) / units) : 0;
  const int64_t unit = kRuns ? int64_t(blockIdx.x) % units : int64_t(blockIdx.x), pair = unit / kSplit;
  // (the ranking's scratch in A's tile: the f32 tiles leave no room for static shared memory)
  const int64_t n = longest_first(p, pair / p.Hv, reinterpret_cast<int64_t*>(&s.a[0][0]));
  const int h = int(pair % p.Hv);
  const int v0 = Sp::kRows * int(unit % kSplit);  // the CTA's state rows [v0, +kRows)
  const int row0 = v0 + 16 * rb, k0 = Sp::kKeyCols * kp;  // the warp's rows, first key column
  const int j = p.tiled ? h % p.Hk : h / p.ratio;  // key / query head

  Sequence sq;
  if (!resolve_sequence(p, n, sq)) return;  // flag raised; write nothing
  if (!checkpoint_indices_valid(p, n, sq)) return;
  const int64_t chunks = (sq.len + kC - 1) / kC;
  float* start_copy = nullptr;  // pass 1's role 0: the initial state, for pass 2's segment 0
  ChainRun run;
  run.c_end = chunks;
  if constexpr (kRuns) run = f32_chain_run(p, role, n, h, chunks, start_copy);
  if (sq.slot < 0) {  // padding: the CTA's o columns of the run's tokens zero, no state read or written
    if (!kOutputs) return;
    const int64_t end = run.c_end * kC < sq.len ? run.c_end * kC : sq.len;
    for (int64_t r = run.c_begin * kC + warp; r < end; r += kWarps) {
      float* o = static_cast<float*>(p.o.p) + n * p.o.seq + (sq.bos + r) * p.o.tok + h * p.o.head + v0;
      for (int e = lane; e < Sp::kRows; e += 32) o[e] = 0.f;
    }
    return;
  }

  float S[Sp::kKeyTiles][4];  // the state's rows [row0, +16), key columns [k0, +kKeyCols)
  if constexpr (kRuns) {
    load_run_start(p, run, sq.slot, h, S, row0, k0, g, q);
    if (start_copy) store_segment_state(start_copy, S, row0, k0, g, q);
  } else {
    load_state(p, sq.slot, h, S, row0, k0, g, q);
  }
  const bool use_v = kOutputs || run.use_u;  // (runs with o always have U)
  const HeadGate hg = head_gate(p, h);
  int64_t next_checkpoint = kOutputs && p.ckpt_tokens > 0 ? first_checkpoint_chunk(p, 0) : -1;
  const auto prepared = [&](int64_t chunk) -> const F32PreparedChunk& {  // (kPrepared)
    return static_cast<const F32PreparedChunk*>(p.prepared)[chunk_slot(p, n, sq, chunk) * p.Hv + h];
  };
  const int64_t c_begin = kRuns ? run.c_begin : 0, c_end = kRuns ? run.c_end : chunks;
  for (int64_t c = c_begin; c < c_end; ++c) {
    const int64_t tok0 = sq.bos + c * kC;
    const int rows = int(sq.len - c * kC < kC ? sq.len - c * kC : kC);
    __syncthreads();  // chunk c - 1 is done with every tile
    RawGates raw;  // (warp 0: in flight while the copies go out)
    if (warp == 0) raw = load_raw_gates(p, n, sq, h, c, lane);
    if constexpr (kOutputs) load_rows_f32(p.q, n, tok0, rows, j, s.q, warp, lane);
    load_rows_f32(p.k, n, tok0, rows, j, s.k, warp, lane);
    if (use_v) load_rows_f32<Sp::kRows>(p.v, n, tok0, rows, h, s.v, warp, lane, v0);
    if constexpr (kPrepared) load_prepared_f32<kOutputs>(prepared(c), s, tid);
    cp_async_commit();
    if (warp == 0) chunk_gates(p, s.G, s.beta, hg, raw, rows, lane);
    if (c + 1 < c_end) {  // the next chunk's rows on their way to the L2 while this one runs
      const int next_rows = int(sq.len - (c + 1) * kC < kC ? sq.len - (c + 1) * kC : kC);
      if constexpr (kOutputs) prefetch_rows_f32(p.q, n, tok0 + kC, next_rows, j, tid);
      prefetch_rows_f32(p.k, n, tok0 + kC, next_rows, j, tid);
      if (use_v) prefetch_rows_f32<Sp::kRows>(p.v, n, tok0 + kC, next_rows, h, tid, v0);
      if constexpr (kPrepared) prefetch_prepared_f32<kOutputs>(prepared(c + 1), tid);
    }
    cp_async_wait<0>();
    // (each thread normalises and splits the pieces it copied)
    if constexpr (kOutputs) split_rows_f32(s.q, s.q_lo, p.l2norm, warp, lane);
    split_rows_f32(s.k, s.k_lo, p.l2norm, warp, lane);
    __syncthreads();
    if (tid < kC) {
      s.gamma[tid] = expf(s.G[tid]);
      s.tail[tid] = expf(s.G[kC - 1] - s.G[tid]);  // padding rows: g = 0, so G_C is the last live token's
    }
    if constexpr (!kPrepared) {
      const F32KeyTiles t{s.a, s.x, s.p, s.G, s.beta};
      mask_key_products_f32(p, t, key_products_f32<false>({s.q, s.k, s.q_lo, s.k_lo}, warp, lane), warp, lane);
      __syncthreads();
      invert_unit_lower_f32(t, warp, lane);
    }

    // Y^T = S Kn^T and O^T = S Qn^T over the warp's key columns (one pass over them)
    float Y[8][4] = {}, O[8][4] = {};
#pragma unroll
    for (int kt = 0; kt < Sp::kKeyTiles; ++kt) {
      const Tf32Frag a = a_fragment(S[kt]);
      const int col = k0 + 8 * kt + 2 * q;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        mma_3xtf32(Y[nt], a, b_from_row(s.k, s.k_lo, 8 * nt + g, col));
        if constexpr (kOutputs) mma_3xtf32(O[nt], a, b_from_row(s.q, s.q_lo, 8 * nt + g, col));
      }
    }
    __syncthreads();  // gamma, X (and the gates) are everyone's; Qn's tiles are dead
    // Y^T = Vc^T - S Kn^T diag(gamma) (Vc^T in key part 0's sum); O^T's first term scaled
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = 8 * nt + 2 * q + (e & 1), v = 16 * rb + g + 8 * (e >> 1);
        Y[nt][e] = (kp == 0 && use_v ? s.v[t][v] : 0.f) - s.gamma[t] * Y[nt][e];
        if constexpr (kOutputs) O[nt][e] *= p.scale * s.gamma[t];
      }
    if constexpr (kSplit > 1) {  // the row block's partial sums added, in key-part order in every
                                 // warp (so all form the same D^T); Vc's tile is then free
      F32Partials& y_parts = partials_over(s.q);
      F32Partials& o_parts = partials_over(s.q_lo);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        y_parts[warp][nt][lane] = make_float4(Y[nt][0], Y[nt][1], Y[nt][2], Y[nt][3]);
        if constexpr (kOutputs) o_parts[warp][nt][lane] = make_float4(O[nt][0], O[nt][1], O[nt][2], O[nt][3]);
      }
      __syncthreads();
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const bool owned = kOutputs && o_tile_owned<kSplit>(kp, nt);
        float4 y = make_float4(0.f, 0.f, 0.f, 0.f), o = y;
#pragma unroll
        for (int part = 0; part < kSplit; ++part) {
          const int w = rb + Sp::kRowBlocks * part;
          const float4 yp = part == kp ? make_float4(Y[nt][0], Y[nt][1], Y[nt][2], Y[nt][3]) : y_parts[w][nt][lane];
          y.x += yp.x, y.y += yp.y, y.z += yp.z, y.w += yp.w;
          if (owned) {
            const float4 op = part == kp ? make_float4(O[nt][0], O[nt][1], O[nt][2], O[nt][3]) : o_parts[w][nt][lane];
            o.x += op.x, o.y += op.y, o.z += op.z, o.w += op.w;
          }
        }
        Y[nt][0] = y.x, Y[nt][1] = y.y, Y[nt][2] = y.z, Y[nt][3] = y.w;
        if (owned) O[nt][0] = o.x, O[nt][1] = o.y, O[nt][2] = o.z, O[nt][3] = o.w;
      }
    }
    // D^T = Y^T T^T, T_ij = X_ij beta_j (zero above the diagonal: tiles nt >= kt only). With four
    // key parts, each warp forms the token tiles it owns (o_tile_owned's, of equal cost: tile nt
    // takes nt + 1 k-steps here too) and the row block's warps exchange them (F32DTiles), where
    // each formed all eight: the same sums in the same order, so the same bits. (Measured, 1 x
    // 4096 and 1 x 16384: 1.4 to 2.1% faster; with two key parts, where each warp forms half
    // the tiles twice over, the exchange's barrier cost more than it saved: Hv 64 2.2% slower.)
    constexpr bool kExchangeD = kSplit == 4;
    float D[8][4] = {};
#pragma unroll
    for (int kt = 0; kt < 8; ++kt) {
      const Tf32Frag a = a_fragment(Y[kt]);
      const float b0 = s.beta[8 * kt + 2 * q], b1 = s.beta[8 * kt + 2 * q + 1];
#pragma unroll
      for (int nt = kt; nt < 8; ++nt) {
        if (kExchangeD && !o_tile_owned<kSplit>(kp, nt)) continue;  // (warp-uniform)
        const float2 xb = *reinterpret_cast<const float2*>(&s.x[8 * nt + g][8 * kt + 2 * q]);
        mma_3xtf32(D[nt], a, xb.x * b0, xb.y * b1);
      }
    }
    if constexpr (kExchangeD) {
      F32DTiles<kSplit>& d_tiles = d_tiles_over<kSplit>(s.a);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        if (o_tile_owned<kSplit>(kp, nt)) d_tiles[rb][nt][lane] = make_float4(D[nt][0], D[nt][1], D[nt][2], D[nt][3]);
      __syncthreads();
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        if (!o_tile_owned<kSplit>(kp, nt)) {
          const float4 d = d_tiles[rb][nt][lane];
          D[nt][0] = d.x, D[nt][1] = d.y, D[nt][2] = d.z, D[nt][3] = d.w;
        }
    }
    // O^T += D^T P^T (the warp's token tiles), and the next state: S = gamma_C S + D^T
    // diag(exp(G_C - G)) Kn (the factor on D^T's token columns, once a k-step, so that Kn's split
    // parts are the B operands)
    const float gamma_c = s.gamma[kC - 1];
#pragma unroll
    for (int t = 0; t < Sp::kKeyTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[t][e] *= gamma_c;
#pragma unroll
    for (int kt = 0; kt < 8; ++kt) {
      const Tf32Frag a = a_fragment(D[kt]);
#pragma unroll
      for (int nt = kt; nt < 8; ++nt) {
        if (!kOutputs || !o_tile_owned<kSplit>(kp, nt)) continue;  // (warp-uniform)
        const float2 pb = *reinterpret_cast<const float2*>(&s.p[8 * nt + g][8 * kt + 2 * q]);
        mma_3xtf32(O[nt], a, pb.x, pb.y);
      }
      const int t0 = 8 * kt + 2 * q;
      const float e0 = s.tail[t0], e1 = s.tail[t0 + 1];
      const Tf32Frag ae = a_fragment({D[kt][0] * e0, D[kt][1] * e1, D[kt][2] * e0, D[kt][3] * e1});
#pragma unroll
      for (int nt = 0; nt < Sp::kKeyTiles; ++nt)
        mma_3xtf32(S[nt], ae, b_from_column(s.k, s.k_lo, t0, k0 + 8 * nt + g));
    }
    // o: the warp's tiles of O^T into Vc's tile as [C tokens, the CTA's values] (no warp reads
    // Vc's tile after the exchange; with one key part, only this warp read these columns)
    if constexpr (kOutputs) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        if (!o_tile_owned<kSplit>(kp, nt)) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) s.v[8 * nt + 2 * q + (e & 1)][16 * rb + g + 8 * (e >> 1)] = O[nt][e];
      }
      __syncthreads();
      store_rows_f32<Sp::kRows>(p, s.v, n, tok0, rows, h, v0, warp, lane);
      if (c == next_checkpoint) {  // S is the state after chunk c
        store_checkpoint(p, n, sq, h, c, S, row0, g, q, checkpoint_slot(p, n, sq, c), k0);
        next_checkpoint += checkpoint_every_chunks(p);
      }
    }
  }
  if (kRuns && run.end_state) store_segment_state(run.end_state, S, row0, k0, g, q);
  if ((!kRuns || run.end_final) && p.ht.p) store_state(p, sq.slot, h, S, row0, k0, g, q);
}

// `runs` CTA roles of every (sequence, value head), kSplit CTAs each.
template <int kSplit, bool kPrepared, int kPass>
cudaError_t launch_split(const ChunkParams& p, int64_t runs, cudaStream_t stream) {
  cudaError_t e = cudaFuncSetAttribute(chunked_prefill_f32_kernel<kSplit, kPrepared, kPass>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(kF32SmemBytes));
  if (e != cudaSuccess) return e;
  chunked_prefill_f32_kernel<kSplit, kPrepared, kPass>
      <<<dim3(unsigned(p.N * p.Hv * kSplit * runs)), dim3(kThreads), kF32SmemBytes, stream>>>(p);
  return cudaGetLastError();
}

// The kernel at `split` CTAs a pair (f32_value_split), `runs` roles (pass 0: 1).
template <bool kPrepared, int kPass = 0>
cudaError_t launch_chain(const ChunkParams& p, int split, int64_t runs, cudaStream_t stream) {
  switch (split) {
    case 1: return launch_split<1, kPrepared, kPass>(p, runs, stream);
    case 2: return launch_split<2, kPrepared, kPass>(p, runs, stream);
    case 4: return launch_split<4, kPrepared, kPass>(p, runs, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_prepare(const ChunkParams& p, cudaStream_t stream) {
  if (p.chunk_slots <= 0) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(chunked_prepare_f32_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             int(sizeof(F32PrepSmem)));
  if (e != cudaSuccess) return e;
  chunked_prepare_f32_kernel<<<dim3(unsigned(p.chunk_slots), unsigned(p.Hk)), dim3(kThreads), sizeof(F32PrepSmem),
                               stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_chunked_f32(const ChunkParams& p, cudaStream_t stream) {
  if (!p.prepared) return launch_chain<false>(p, p.f32_value_split, 1, stream);
  cudaError_t e = launch_prepare(p, stream);
  if (e != cudaSuccess) return e;
  if (p.segments < 2) return launch_chain<true>(p, p.f32_value_split, 1, stream);
  // the exact sequence split (plan_f32_segments): pass 1 (no o) at f32_pass1_split CTAs a run,
  // the combine, pass 2 (every segment, o) at f32_value_split
  ChunkParams pass = p;
  pass.seg_pass = 1;
  e = launch_chain<true, 1>(pass, p.f32_pass1_split, pass1_runs(p.segments), stream);
  if (e == cudaSuccess && p.segments > 2) {
    e = cudaFuncSetAttribute(segment_combine_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(kCombineSmemBytes));
    if (e != cudaSuccess) return e;
    segment_combine_kernel<float><<<dim3(unsigned(p.N * p.Hv * (kV / kCombineRows))), dim3(kCombineThreads),
                                    kCombineSmemBytes, stream>>>(pass);
    e = cudaGetLastError();
  }
  if (e != cudaSuccess) return e;
  pass.seg_pass = 2;
  return launch_chain<true, 2>(pass, p.f32_value_split, p.segments, stream);
}

}  // namespace gdn::cuda::chunked

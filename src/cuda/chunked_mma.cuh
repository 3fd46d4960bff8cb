// Warp-level tensor-core pieces of the chunked kernel (sm_80+): the m16n8k16 product with f32
// accumulation in bf16 or f16, ldmatrix fragment loads from shared memory, hi + lo splits of
// f32 values, 3xTF32 products of f32 tiles, and cp.async tile copies.
//
// Fragments of mma.m16n8k16 (g = lane / 4, q = lane % 4; pairs are two 16-bit values in one
// register, the lower column in the low half):
//   A, 16 x 16:  a0 (row g,   cols 2q, 2q+1)   a1 (row g+8, cols 2q, 2q+1)
//                a2 (row g,   cols 2q+8, +9)   a3 (row g+8, cols 2q+8, +9)
//   B, 16 x 8:   b0 (rows 2q, 2q+1, col g)     b1 (rows 2q+8, 2q+9, col g)
//   C, 16 x 8:   c0, c1 (row g, cols 2q, 2q+1) c2, c3 (row g+8, cols 2q, 2q+1)
// So a 16 x 16 block of a 16 x N accumulator (its n8 tiles 2s and 2s+1) is, packed pairwise,
// the A fragment of k-step s: accumulators feed the next product without leaving registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace gdn::cuda::chunked {

// ---- the two half-precision flavours: packing, splitting, the product

struct MmaBf16 {
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ __forceinline__ static float2 unpack(uint32_t u) {
    return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
  }
  __device__ __forceinline__ static uint16_t one(float x) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
  __device__ __forceinline__ static float to_f32(uint16_t bits) {
    return __uint_as_float(uint32_t(bits) << 16);
  }
  // d += a b  (A 16 x 16 row-major, B 16 x 8 column-major, f32 accumulators)
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

struct MmaF16 {
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
  __device__ __forceinline__ static float2 unpack(uint32_t u) {
    return __half22float2(*reinterpret_cast<const __half2*>(&u));
  }
  __device__ __forceinline__ static uint16_t one(float x) {
    return __half_as_ushort(__float2half_rn(x));
  }
  __device__ __forceinline__ static float to_f32(uint16_t bits) {
    return __half2float(__ushort_as_half(bits));
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// (x0, x1) = hi + lo: hi rounded to half precision, lo the rounded remainder. A product with
// hi and lo as two operands keeps about 16 significant bits of x instead of 8 (bf16).
template <class M>
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  hi = M::pack(x0, x1);
  const float2 h = M::unpack(hi);
  lo = M::pack(x0 - h.x, x1 - h.y);
}

// A fragments (hi, lo) of k-step s of a 16 x N accumulator block `acc` (its tiles 2s, 2s+1).
template <class M, int kTiles>
__device__ __forceinline__ void acc_to_a_split(const float (&acc)[kTiles][4], int s, uint32_t (&hi)[4],
                                               uint32_t (&lo)[4]) {
  split_pair<M>(acc[2 * s][0], acc[2 * s][1], hi[0], lo[0]);
  split_pair<M>(acc[2 * s][2], acc[2 * s][3], hi[1], lo[1]);
  split_pair<M>(acc[2 * s + 1][0], acc[2 * s + 1][1], hi[2], lo[2]);
  split_pair<M>(acc[2 * s + 1][2], acc[2 * s + 1][3], hi[3], lo[3]);
}

// The A fragment of k-step s of a 16 x N accumulator block `acc` (its tiles 2s, 2s+1), each value
// rounded once to M's type.
template <class M, int kTiles>
__device__ __forceinline__ void acc_to_a(const float (&acc)[kTiles][4], int s, uint32_t (&a)[4]) {
  a[0] = M::pack(acc[2 * s][0], acc[2 * s][1]);
  a[1] = M::pack(acc[2 * s][2], acc[2 * s][3]);
  a[2] = M::pack(acc[2 * s + 1][0], acc[2 * s + 1][1]);
  a[3] = M::pack(acc[2 * s + 1][2], acc[2 * s + 1][3]);
}

// ---- tf32 products of f32 tiles (the inverse's block merges)
//
// Fragments of mma.m16n8k8 with tf32 operands (one f32 register each):
//   A, 16 x 8:   a0 (row g, col q)   a1 (row g+8, col q)   a2 (row g, col q+4)   a3 (row g+8, col q+4)
//   B, 8 x 8:    b0 (row q, col g)   b1 (row q+4, col g)
//   C, 16 x 8:   as m16n8k16's
// Each operand x enters as hi + lo and a product as hi hi + hi lo + lo hi ("3xTF32"): near f32
// accuracy on tensor cores. hi is x with its low 13 mantissa bits cleared (a tf32 value), lo =
// x - hi exactly in f32, handed over whole: the tensor core reads its top 19 bits (truncation),
// so hi + lo keeps about 21 significant bits. (cvt.rna.tf32.f32 rounds instead, but compiles to
// about five integer and compare instructions a value: Nsight Compute put them at a third of
// the merges' time.)
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = __float_as_uint(x) & 0xffffe000u;
  lo = __float_as_uint(x - __uint_as_float(hi));
}

// d += a b (A 16 x 8 row-major, B 8 x 8 column-major, tf32 operands, f32 accumulators)
__device__ __forceinline__ void mma_tf32(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// acc += A B over k-steps [ks_begin, ks_end) of 8, in 3xTF32: A points at a 16 x (8 ks_end)
// tile (row-major, row stride lda floats) and B at an (8 ks_end) x 8 tile (row-major, ldb), both
// f32 in shared memory. The three products of a k-step go to three accumulators (the two
// small terms' sums are added to the large one's at the end), so each k-step's products wait
// only on the same product of the k-step before: one accumulator made the inverse's merges
// (a few k-steps, 4 of 8 warps working) a chain of 3 dependent mma a k-step.
__device__ __forceinline__ void tile_product_tf32x3(float (&acc)[4], const float* A, int lda, const float* B,
                                                    int ldb, int ks_begin, int ks_end, int lane) {
  const int g = lane >> 2, q = lane & 3;
  float lo_hi[4] = {0.f, 0.f, 0.f, 0.f}, hi_lo[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int ks = ks_begin; ks < ks_end; ++ks) {
    const int k = 8 * ks + q;
    uint32_t ah[4], al[4], bh[2], bl[2];
    split_tf32(A[g * lda + k], ah[0], al[0]);
    split_tf32(A[(g + 8) * lda + k], ah[1], al[1]);
    split_tf32(A[g * lda + k + 4], ah[2], al[2]);
    split_tf32(A[(g + 8) * lda + k + 4], ah[3], al[3]);
    split_tf32(B[k * ldb + g], bh[0], bl[0]);
    split_tf32(B[(k + 4) * ldb + g], bh[1], bl[1]);
    mma_tf32(lo_hi, al[0], al[1], al[2], al[3], bh[0], bh[1]);
    mma_tf32(hi_lo, ah[0], ah[1], ah[2], ah[3], bl[0], bl[1]);
    mma_tf32(acc, ah[0], ah[1], ah[2], ah[3], bh[0], bh[1]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] += lo_hi[i] + hi_lo[i];
}

// A 16 x 8 accumulator tile to a row-major f32 tile (row stride ld), times `scale`.
__device__ __forceinline__ void store_acc_f32(const float (&acc)[4], float* to, int ld, float scale, int lane) {
  const int g = lane >> 2, q = lane & 3;
  *reinterpret_cast<float2*>(to + g * ld + 2 * q) = make_float2(scale * acc[0], scale * acc[1]);
  *reinterpret_cast<float2*>(to + (g + 8) * ld + 2 * q) = make_float2(scale * acc[2], scale * acc[3]);
}

// Named barrier `id` (1..15; 0 is __syncthreads) of `threads` threads (whole warps).
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Named barrier `id` of `threads` threads that also returns whether `pred` holds in all of them.
__device__ __forceinline__ bool named_barrier_and(int id, int threads, bool pred) {
  uint32_t all;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.and.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(all)
      : "r"(uint32_t(pred)), "r"(id), "r"(threads)
      : "memory");
  return all != 0;
}
// Arrival on named barrier `id` without waiting (the producer's side of a hand-over whose
// consumers bar.sync on it: `threads` counts both).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- ldmatrix: four 8 x 8 matrices of 16-bit values, one row address per lane

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// stmatrix (sm_90): four 8 x 8 matrices of 16-bit values in the accumulator fragment layout (r[i]:
// row lane / 4, columns 2 (lane % 4) + {0, 1} of matrix i), each stored transposed: lanes 8 i ..
// 8 i + 7 give the addresses of matrix i's 8 stored rows (its columns).
__device__ __forceinline__ void stsm_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

// Row addresses for the four fragment shapes the kernel reads from a row-major tile `base`
// with row stride `ld` (elements). Each returns this lane's address; load with the named
// ldmatrix flavour.

// A (16 x 16) at (m0, k0) of a tile stored [m][k]: ldsm_x4 -> a0..a3.
__device__ __forceinline__ uint32_t a_rows(const uint16_t* base, int ld, int m0, int k0, int lane) {
  const int row = m0 + (lane & 7) + ((lane >> 3) & 1) * 8, col = k0 + (lane >> 4) * 8;
  return smem_addr(base + row * ld + col);
}

// A (16 x 16) at (m0, k0) of a tile stored transposed, [k][m]: ldsm_x4_trans -> a0..a3.
__device__ __forceinline__ uint32_t a_cols(const uint16_t* base, int ld, int m0, int k0, int lane) {
  const int i = lane >> 3;
  const int row = k0 + (i >> 1) * 8 + (lane & 7), col = m0 + (i & 1) * 8;
  return smem_addr(base + row * ld + col);
}

// B (16 x 16 = two n8 tiles) at (k0, n0) of a tile stored [n][k]: ldsm_x4 ->
// {b0, b1} of tile n0 in r[0], r[1] and of tile n0 + 8 in r[2], r[3].
__device__ __forceinline__ uint32_t b_rows(const uint16_t* base, int ld, int k0, int n0, int lane) {
  const int i = lane >> 3;
  const int row = n0 + (i >> 1) * 8 + (lane & 7), col = k0 + (i & 1) * 8;
  return smem_addr(base + row * ld + col);
}

// B (16 x 16 = two n8 tiles) at (k0, n0) of a tile stored [k][n]: ldsm_x4_trans -> as b_rows.
__device__ __forceinline__ uint32_t b_cols(const uint16_t* base, int ld, int k0, int n0, int lane) {
  const int i = lane >> 3;
  const int row = k0 + (i & 1) * 8 + (lane & 7), col = n0 + (i >> 1) * 8;
  return smem_addr(base + row * ld + col);
}

// The same four shapes from a tile laid out by At (chunked_tile.h: RowMajorAt, KMajorAt,
// Swizzle128At): element (r, c) at base + At::at(r, c). Where the layout is additive over
// 8-aligned blocks (At::at(r0 + dr, c0 + dc) = At::block(r0, c0) + At::lane(dr, dc) for r0, c0
// multiples of 8; chunked_tile.h), the lane's part and the block's are formed apart: the block's is a
// constant where the callers' loops are unrolled. (Formed whole, the core-matrix layouts' shifts
// and masks were recomputed at every fragment load: about 4% of the fused step, H200.) A layout
// that is not additive (Swizzle128At) is formed whole.
template <class At>
__device__ __forceinline__ int at_split(int r_lane, int c_lane, int r0, int c0) {
  if constexpr (At::kAdditive)
    return At::lane(r_lane, c_lane) + At::block(r0, c0);
  else
    return At::at(r0 + r_lane, c0 + c_lane);
}
template <class At>
__device__ __forceinline__ uint32_t a_rows(const uint16_t* base, int m0, int k0, int lane) {
  return smem_addr(base + at_split<At>((lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8, m0, k0));
}
template <class At>
__device__ __forceinline__ uint32_t a_cols(const uint16_t* base, int m0, int k0, int lane) {
  const int i = lane >> 3;
  return smem_addr(base + at_split<At>((i >> 1) * 8 + (lane & 7), (i & 1) * 8, k0, m0));
}
template <class At>
__device__ __forceinline__ uint32_t b_rows(const uint16_t* base, int k0, int n0, int lane) {
  const int i = lane >> 3;
  return smem_addr(base + at_split<At>((i >> 1) * 8 + (lane & 7), (i & 1) * 8, n0, k0));
}
template <class At>
__device__ __forceinline__ uint32_t b_cols(const uint16_t* base, int k0, int n0, int lane) {
  const int i = lane >> 3;
  return smem_addr(base + at_split<At>((i & 1) * 8 + (lane & 7), (i >> 1) * 8, k0, n0));
}

// ---- cp.async: 16 bytes global -> shared, zero-filled when `bytes` is 0

__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(bytes));
}
// The same to a shared-memory address already converted (smem_addr), for loops that keep it.
__device__ __forceinline__ void cp_async16_at(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

}  // namespace gdn::cuda::chunked

// Power-of-two exponents that keep the warp-specialised kernel's f16 operands in range.
//
// That kernel forms the chain's products of two computed operands in f16 (S (-W)^T and D^T P^T:
// 11 significant bits where a bf16 hi + lo pair kept about 16, one product where the pair needed
// two or three). f16 ends at 65504 and loses bits below 2^-14, while S, D and o follow the
// inputs' scale, so each chain warp keeps its rows of S, D and O as 2^-sigma times their values
// (sigma an integer of its own, 0 unless a value left the range): products are linear, so the
// state update and the outputs carry the factor through, and o, the checkpoints and the final
// state multiply it back out. Powers of two change no bit of a mantissa.
//   S: checked once a chunk (its largest |value| in [2^-6, 2^14), else brought to about 2^10);
//   D: checked before D^T P^T (its largest |value| below 2^15, else S, D and O scaled down);
//   -W: needs no exponent: |W_ij| <= sum_j |X_ij| beta_j |k_j|, and X = (I + m)^-1 had entries of
//       at most 1 (W below 1) over 3,000 sets of random and near-parallel unit keys with beta in
//       [0, 1] (docs/NOTES.md, twenty-second session); where beta |k|^2 is far above 1 the
//       gate-free inverse itself leaves f32's range first;
//   P: the preparation's, one exponent a chunk (pi, in the P slot), folded into q_f and o.
// sigma stays in [kSigmaMin, kSigmaMax] and pi in [-kPExponentMax, kPExponentMax], so that 2^-sigma
// (U's factor) and 2^(sigma + pi) (o's) are normal f32 numbers: a state that decays with no new
// input (a transition run of the sequence split; v = 0 for a stretch) would otherwise take sigma
// down by about 65 a chunk, past f32's exponents. Below 2^kSigmaMin the state's f16 operand loses
// bits at 2^(kSigmaMin - 14) and under, far below any input it meets.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gdn::cuda::chunked {

// 2^e for an integer e in [-126, 127], exactly.
__device__ __forceinline__ float pow2(int e) { return __int_as_float((127 + e) << 23); }
// floor(log2 |x|) of a normal nonzero f32 x.
__device__ __forceinline__ int exponent_of(float x) { return ((__float_as_int(x) >> 23) & 0xff) - 127; }

template <int kTiles>
__device__ __forceinline__ float abs_max(const float (&x)[kTiles][4]) {
  float m = 0.f;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) m = fmaxf(m, fmaxf(fmaxf(fabsf(x[t][0]), fabsf(x[t][1])), fmaxf(fabsf(x[t][2]), fabsf(x[t][3]))));
  return m;
}
__device__ __forceinline__ float warp_max(float m) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}
// The warp's largest of a non-negative m (no NaN) in one integer reduction (redux.sync, sm_80
// and later): such floats order as their bits do.
__device__ __forceinline__ float warp_max_nonnegative(float m) {
  return __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(m)));
}
template <int kTiles>
__device__ __forceinline__ void scale_tiles(float (&x)[kTiles][4], float f) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) x[t][0] *= f, x[t][1] *= f, x[t][2] *= f, x[t][3] *= f;
}

inline constexpr float kStateHigh = 16384.f;     // 2^14: S's largest |value| kept below
inline constexpr float kStateLow = 1.f / 64.f;   // 2^-6: and, unless S is zero, at or above
inline constexpr int kStateTarget = 10;          // brought to [2^10, 2^11) when it leaves
inline constexpr float kValuesHigh = 32768.f;    // 2^15: D's largest |value| kept below (and P's)
inline constexpr float kPLow = 1.f / 65536.f;    // 2^-16: P's largest |value| kept at or above
inline constexpr int kPTarget = 10;              // P brought to [2^10, 2^11) when it leaves
inline constexpr int kSigmaMin = -64, kSigmaMax = 64;  // sigma's range (above)
inline constexpr int kPExponentMax = 60;               // |pi| at most

// P's exponent pi for a chunk whose largest |P| is m: 0 while m is in [kPLow, kValuesHigh) or
// 0, else the one that brings m to about 2^kPTarget (P stored at 2^-pi times its values).
__device__ __forceinline__ int p_exponent(float m) {
  return m >= kValuesHigh || (m > 0.f && m < kPLow)
             ? min(max(exponent_of(m) - kPTarget, -kPExponentMax), kPExponentMax)
             : 0;
}

// The warp's S (its rows, 2^-sigma times the state) brought back into [kStateLow, kStateHigh)
// when it has left it (warp-uniform; the votes are the whole cost while it has not).
template <int kTiles>
__device__ __forceinline__ void keep_state_in_range(float (&S)[kTiles][4], int& sigma, float m) {  // m: abs_max(S)
  const bool high = __any_sync(0xffffffffu, m >= kStateHigh);
  const bool low = !__any_sync(0xffffffffu, m >= kStateLow) && __any_sync(0xffffffffu, m > 0.f);
  if (high || low) {
    const int d = min(max(exponent_of(warp_max(m)) - kStateTarget, kSigmaMin - sigma), kSigmaMax - sigma);
    if (d != 0) {
      scale_tiles(S, pow2(-d));
      sigma += d;
    }
  }
}
template <int kTiles>
__device__ __forceinline__ void keep_state_in_range(float (&S)[kTiles][4], int& sigma) {
  keep_state_in_range(S, sigma, abs_max(S));
}
// D (2^-sigma times its values) below kValuesHigh for its f16 operand: when it is not, the
// warp's S, D and O are scaled down together (the caller's O holds the same factor).
template <int kTiles>
__device__ __forceinline__ void keep_values_in_range(float (&S)[kTiles][4], float (&D)[8][4], float (&O)[8][4],
                                                     int& sigma) {
  const float m = abs_max(D);
  if (__any_sync(0xffffffffu, m >= kValuesHigh)) {
    const int d = min(exponent_of(warp_max(m)) - 13, kSigmaMax - sigma);
    if (d <= 0) return;  // (sigma at its largest: D, 2^79 or more, is out of f16's range)
    const float f = pow2(-d);
    scale_tiles(S, f);
    scale_tiles(D, f);
    scale_tiles(O, f);
    sigma += d;
  }
}

}  // namespace gdn::cuda::chunked

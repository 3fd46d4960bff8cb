// The cpu backend's kernel: every token of one (sequence, value head) for a block of value
// indices, in f32. Plain loops that the compiler vectorises for the target this file is
// compiled for: kernel_<target>.cpp defines GDN_CPU_TARGET (the namespace) and includes it
// once, with that target's flags (src/cpu/CMakeLists.txt; -fassociative-math lets sums
// vectorise, so the order of additions differs between targets). Hence no include guard.
//
// SPEC.md's step, per token, on the V x K state S (f32):
//   S = alpha S;  delta = beta (v - S k);  S = S + delta k^T;  o = scale S q
// Row v of S evolves on its own (delta_v needs only row v), so a block of rows is loaded once
// into f32 scratch, carried through all the tokens while it stays in cache, and stored once.
//
// vk layout (rows of S stored, K contiguous): one pass over each row s = S[v, :] per token,
//   a_k = s . k,  a_q = s . q                  products with the undecayed row
//   delta_v = beta (v_v - alpha a_k)           alpha a_k = (alpha s) . k
//   o_v = scale (alpha a_q + delta_v (k . q))  = scale (s_new . q)
//   s = alpha s + delta_v k                    = s_new
// kv layout (S^T stored, V contiguous): S k and S q are sums of the K rows of S^T weighted by
// k_i and q_i, accumulated strip by strip of kStrip columns in registers; then delta and o
// for the strip; then the update pass S^T[i, :] = alpha S^T[i, :] + k_i delta^T.
//
// Token blocks (prefill: tasks of 12 tokens or more (vk; kv 8) without per-token snapshots;
// both layouts, the block held as S^T): n = kBlockTokens tokens per pass over the state, so each
// element is read and written once per n tokens and the decay multiplies it once. With
// s = S[v, :] at the block's start, A_i = alpha_1 ... alpha_i and d(j, i) = alpha_{j+1} ... alpha_i
// (d(i, i) = 1), the state after token i is s_i = A_i s + sum_{j <= i} d(j, i) delta_j k_j, so
//   delta_i = beta_i (v_i - A_i (s . k_i) - sum_{j < i} d(j, i) (k_j . k_i) delta_j)
//   o_i     = scale (A_i (s . q_i) + sum_{j <= i} d(j, i) (k_j . q_i) delta_j)
//   s_n     = A_n s + sum_j d(j, n) delta_j k_j
// : one pass for the 2n products s . k_i, s . q_i (n x n coefficients shared by every row),
// the small triangular solve per row, one pass for the update. Vectorised across value rows
// (the columns of S^T, as in the kv pass), with every token's k_i and q_i entry broadcast.
//
// Decode (one token, no snapshots, an f32 or bf16 state to read): no block in scratch; each
// row of the state tensor (vk; kv: each key row of S^T's value indices) is read for its
// products, then read again from cache and updated straight into the final state.

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "cpu/kernel.h"

#ifndef GDN_CPU_TARGET
#error "kernel_impl.h: define GDN_CPU_TARGET (the target's namespace) first"
#endif

namespace gdn::cpu::GDN_CPU_TARGET {
namespace {

int64_t pad(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

// ---- elements: this target's own conversions (round to nearest even; see kernel.h for why
// nothing here is shared with the other targets or with core/dtype.h)
float from_bf16(uint16_t h) { return __builtin_bit_cast(float, uint32_t(h) << 16); }
uint16_t to_bf16(float f) {
  const uint32_t u = __builtin_bit_cast(uint32_t, f);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return uint16_t((nan ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#if defined(__ARM_FP16_FORMAT_IEEE)  // ARM's half (GCC 12 has no _Float16 in C++ there)
using half = __fp16;
#else
using half = _Float16;
#endif
float from_f16(uint16_t h) { return float(__builtin_bit_cast(half, h)); }
uint16_t to_f16(float f) { return __builtin_bit_cast(uint16_t, half(f)); }

int64_t element_size(gdn_dtype t) { return t == GDN_DTYPE_F32 ? 4 : 2; }
const void* element(const void* base, gdn_dtype t, int64_t i) {
  return static_cast<const char*>(base) + i * element_size(t);
}
void* element(void* base, gdn_dtype t, int64_t i) {
  return static_cast<char*>(base) + i * element_size(t);
}

// dst[0, n) = src[0, n) as f32
void load(float* __restrict dst, const void* src, gdn_dtype t, int64_t n) {
  if (t == GDN_DTYPE_BF16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = from_bf16(s[i]);
  } else if (t == GDN_DTYPE_F16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = from_f16(s[i]);
  } else {
    memcpy(dst, src, size_t(n) * sizeof(float));
  }
}

// dst[0, n) = src[0, n) rounded to dtype t (bf16 through the AVX-512 BF16 conversion where the
// target has it: the same rounding, NaN kept quiet, but subnormal values become zero)
void store(void* dst, gdn_dtype t, const float* __restrict src, int64_t n) {
  if (t == GDN_DTYPE_BF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    int64_t i = 0;
#if defined(__AVX512BF16__)
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256((__m256i*)(d + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
#endif
    for (; i < n; ++i) d[i] = to_bf16(src[i]);
  } else if (t == GDN_DTYPE_F16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = to_f16(src[i]);
  } else {
    memcpy(dst, src, size_t(n) * sizeof(float));
  }
}

float load_one(const void* src, gdn_dtype t) {
  float x;
  load(&x, src, t, 1);
  return x;
}

float dot(const float* __restrict x, const float* __restrict y, int64_t n) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

// x <- x * rsqrt(sum(x^2) + 1e-6)
void l2_normalise(float* __restrict x, int64_t n) {
  const float r = 1.0f / sqrtf(dot(x, x, n) + 1e-6f);
  for (int64_t i = 0; i < n; ++i) x[i] *= r;
}

// alpha = decay(g) of token t
float decay(const Params& p, const Task& task, int64_t t) {
  switch (p.gate) {
    case GDN_GATE_DECAY_RATE:  // alpha = exp(-g)
      return expf(-load_one(element(task.g, p.g_dtype, t * task.g_tok), p.g_dtype));
    case GDN_GATE_RAW: {  // alpha = exp(-exp(A_log) softplus(a + dt_bias))
      const float x =
          load_one(element(task.a, p.a_dtype, t * task.a_tok), p.a_dtype) + task.dt_bias;
      const float softplus = x > 20.0f ? x : log1pf(expf(x));
      return expf(-expf(task.A_log) * softplus);
    }
    default:  // log_decay: alpha = exp(g)
      return expf(load_one(element(task.g, p.g_dtype, t * task.g_tok), p.g_dtype));
  }
}

// The lines of n elements of dtype t at x, asked into the cache ahead of their use.
void prefetch(const void* x, gdn_dtype t, int64_t n) {
  const char* c = static_cast<const char*>(x);
  for (int64_t b = 0; b < n * element_size(t); b += 64) __builtin_prefetch(c + b);
}

// Tokens t0 .. t0 + n in f32: q, k [n, K] (normalised when asked), k . q, the block's v [n, vb],
// and the gates alpha, beta [n]. The inputs of the kChunk tokens after them are prefetched: a token's rows sit a whole token's heads apart (a page or more), where the
// hardware prefetchers do not follow.
void prepare(const Params& p, const Task& task, int64_t t0, int64_t n, int64_t v0, int64_t vb,
             Scratch& w) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = t0 + i;
    if (t + kChunk < task.len) {
      const int64_t ahead = t + kChunk;
      prefetch(element(task.q, p.x_dtype, ahead * task.q_tok), p.x_dtype, p.K);
      prefetch(element(task.k, p.x_dtype, ahead * task.k_tok), p.x_dtype, p.K);
      prefetch(element(task.v, p.x_dtype, ahead * task.v_tok + v0), p.x_dtype, vb);
      if (p.gate == GDN_GATE_RAW)
        prefetch(element(task.a, p.a_dtype, ahead * task.a_tok), p.a_dtype, 1);
      else
        prefetch(element(task.g, p.g_dtype, ahead * task.g_tok), p.g_dtype, 1);
      prefetch(element(task.beta, p.beta_dtype, ahead * task.beta_tok), p.beta_dtype, 1);
    }
    load(w.q[i], element(task.q, p.x_dtype, t * task.q_tok), p.x_dtype, p.K);
    load(w.k[i], element(task.k, p.x_dtype, t * task.k_tok), p.x_dtype, p.K);
    if (p.l2norm) {
      l2_normalise(w.q[i], p.K);
      l2_normalise(w.k[i], p.K);
    }
    w.kq[i] = dot(w.k[i], w.q[i], p.K);
    load(w.v[i], element(task.v, p.x_dtype, t * task.v_tok + v0), p.x_dtype, vb);
    w.alpha[i] = decay(p, task, t);
    const float b = load_one(element(task.beta, p.beta_dtype, t * task.beta_tok), p.beta_dtype);
    w.beta[i] = p.beta_mode == GDN_BETA_LOGIT ? 1.0f / (1.0f + expf(-b)) : b;
  }
}

// Where the state after token t goes, or null (pooled snapshot with index -1, none, or not a
// checkpoint token).
void* snapshot_of(const Task& task, gdn_dtype dtype, int64_t t) {
  if (task.snap == nullptr) return nullptr;
  if (task.snap_every > 0 && (t + 1) % task.snap_every != 0) return nullptr;
  if (task.snap_index == nullptr) return element(task.snap, dtype, t * task.snap_tok);
  const int32_t slot = task.snap_index[t * task.snap_index_tok];
  return slot < 0 ? nullptr : element(task.snap, dtype, slot * task.snap_tok);
}

// ---- the vk layout: the block is rows v0.. of S, S_b[r, 0:ld] = S[v0 + r, :] (zero beyond K)

// One token on kRows rows of S_b from s: s [kRows, ld], q, k [ld], v, o [kRows]. Several rows
// at once share the loads of k and q, and keep 2 kRows independent sums in flight.
template <int kRows>
void rows_vk(float* __restrict s, int64_t ld, const float* __restrict q, const float* __restrict k,
             const float* __restrict v, float alpha, float beta, float kq, float scale,
             float* __restrict o) {
  float a_k[kRows] = {}, a_q[kRows] = {};
  for (int64_t i = 0; i < ld; ++i) {
    for (int j = 0; j < kRows; ++j) {
      a_k[j] += s[j * ld + i] * k[i];
      a_q[j] += s[j * ld + i] * q[i];
    }
  }
  float delta[kRows];
  for (int j = 0; j < kRows; ++j) {
    delta[j] = beta * (v[j] - alpha * a_k[j]);
    o[j] = scale * (alpha * a_q[j] + delta[j] * kq);
  }
  for (int64_t i = 0; i < ld; ++i)
    for (int j = 0; j < kRows; ++j) s[j * ld + i] = alpha * s[j * ld + i] + delta[j] * k[i];
}

// One token on S_b [vb, ld]: q, k [ld], v, o [vb]. (Not inlined: inside run() the register
// allocator spills the sums of these loops to the stack; on their own they stay in registers.)
[[gnu::noinline]] void step_vk(float* __restrict S, int64_t vb, int64_t ld,
                               const float* __restrict q, const float* __restrict k,
                               const float* __restrict v, float alpha, float beta, float kq,
                               float scale, float* __restrict o) {
  constexpr int kRows = 4;
  int64_t r = 0;
  for (; r + kRows <= vb; r += kRows)
    rows_vk<kRows>(S + r * ld, ld, q, k, v + r, alpha, beta, kq, scale, o + r);
  for (; r < vb; ++r) rows_vk<1>(S + r * ld, ld, q, k, v + r, alpha, beta, kq, scale, o + r);
}

// ---- the kv layout: the block is columns v0.. of S^T, S_b[i, 0:ld] = S^T[i, v0 + c] (zero
// beyond vb), ld a multiple of kStrip

// One token on S_b [K, ld]: q, k [K], v, o [ld] (not inlined, as step_vk).
[[gnu::noinline]] void step_kv(float* __restrict S, int64_t K, int64_t ld,
                               const float* __restrict q, const float* __restrict k,
                               const float* __restrict v, float alpha, float beta, float kq,
                               float scale, float* __restrict o) {
  for (int64_t c0 = 0; c0 < ld; c0 += kStrip) {
    float a_k[kStrip] = {}, a_q[kStrip] = {};  // (S k), (S q) of the strip's value indices
    for (int64_t i = 0; i < K; ++i) {
      const float* __restrict s = S + i * ld + c0;
      for (int64_t c = 0; c < kStrip; ++c) {
        a_k[c] += k[i] * s[c];
        a_q[c] += q[i] * s[c];
      }
    }
    float delta[kStrip];
    for (int64_t c = 0; c < kStrip; ++c) {
      delta[c] = beta * (v[c0 + c] - alpha * a_k[c]);
      o[c0 + c] = scale * (alpha * a_q[c] + delta[c] * kq);
    }
    for (int64_t i = 0; i < K; ++i) {
      float* __restrict s = S + i * ld + c0;
      for (int64_t c = 0; c < kStrip; ++c) s[c] = alpha * s[c] + k[i] * delta[c];
    }
  }
}

// The block S_b's rows r < rows (row stride ld) from / to a state tensor whose block starts at
// row row0, column col0 (row stride `stride`, dtype t); `width` columns.
struct BlockShape {
  int64_t rows, width, ld, row0, col0;
};

void load_block(float* __restrict S, const BlockShape& b, const void* src, gdn_dtype t,
                int64_t stride) {
  for (int64_t r = 0; r < b.rows; ++r) {
    float* s = S + r * b.ld;
    if (src != nullptr) {
      load(s, element(src, t, (b.row0 + r) * stride + b.col0), t, b.width);
    } else {
      for (int64_t c = 0; c < b.width; ++c) s[c] = 0;
    }
    for (int64_t c = b.width; c < b.ld; ++c) s[c] = 0;  // padding stays zero through every step
  }
}

void store_block(void* dst, gdn_dtype t, int64_t stride, const BlockShape& b,
                 const float* __restrict S) {
  for (int64_t r = 0; r < b.rows; ++r)
    store(element(dst, t, (b.row0 + r) * stride + b.col0), t, S + r * b.ld, b.width);
}

// A padding sequence: its outputs are zero; no state is read or written, snapshots included.
void write_padding(const Params& p, const Task& task, int64_t v0, int64_t vb) {
  alignas(64) float zeros[kMaxHeadDim] = {};
  for (int64_t t = 0; t < task.len; ++t)
    store(element(task.o, p.x_dtype, t * task.o_tok + v0), p.x_dtype, zeros, vb);
}

// ---- token blocks (the block as S^T [K, ld], ld a multiple of kStrip, for both layouts)

// Vectors of this target's width (GCC / Clang vector extensions: one register each on AVX-512,
// AVX2 and SSE2 / NEON; lowered to scalars elsewhere) and the tokens per block that keep a
// strip's 2 n sums in registers (measured on Zen 4: AVX-512 n = 8 0.94 us per token and head at
// K = V = 128 for the passes, n = 4 0.98; AVX2 n = 6 1.10, n = 4 1.16, n = 8 1.48 (spills)).
#if defined(__AVX512F__)
constexpr int kVecLanes = 16, kBlockTokens = 8;
#elif defined(__AVX2__)
constexpr int kVecLanes = 8, kBlockTokens = 6;
#else
constexpr int kVecLanes = 4, kBlockTokens = 4;
#endif
using vec = float __attribute__((vector_size(kVecLanes * sizeof(float))));
static_assert(kStrip % kVecLanes == 0 && kStrip % kChunk == 0 && kBlockTokens <= kChunk,
              "strips of whole vectors, transposed kChunk rows at a time; tokens prepared at once");

// Tasks shorter than this run token by token (decode, verify): the token-block path's setup
// (the coefficients, a whole block's work for the last few tokens, and for vk the block's
// transposition, about 7 us a head at K = V = 128) repays itself over longer ones. Measured on
// Zen 4 (AVX-512, 1 thread, N = 16, Hk / Hv = 16 / 32, K = V = 128, bf16; ms, token by token /
// token blocks): vk T = 4 9.3 / 13.1, T = 8 13.6 / 13.1, T = 10 16.0 / 17.1, T = 12 18.1 / 17.4,
// T = 16 22.2 / 17.5; kv T = 4 8.3 / 9.3, T = 8 11.8 / 9.6, T = 16 18.4 / 14.1.
constexpr int64_t kBlockedMinTokensVk = 12, kBlockedMinTokensKv = 8;

vec load_vec(const float* x) {
  vec r;
  memcpy(&r, x, sizeof r);
  return r;
}
void store_vec(float* x, vec r) { memcpy(x, &r, sizeof r); }

// The coefficients of one block of kBlockTokens tokens (above), shared by every row; tokens
// past the task's end have alpha 1, beta 0 and zero q, k, v, so they change nothing.
struct BlockCoefficients {
  float A[kBlockTokens];                    // A_i
  float kk[kBlockTokens][kBlockTokens];     // [i][j < i]  d(j, i) (k_j . k_i)
  float kq[kBlockTokens][kBlockTokens];     // [i][j <= i] d(j, i) (k_j . q_i)
  float to_end[kBlockTokens];               // d(j, n)
};

// Products of decays below this are taken as zero (they weigh nothing in f32 beside the
// terms they are added to, and would otherwise reach subnormal values).
float flush_tiny(float x) { return fabsf(x) < 1e-30f ? 0.0f : x; }

void block_coefficients(const Scratch& w, int64_t K, BlockCoefficients& c) {
  float d[kBlockTokens][kBlockTokens];  // d(j, i), j <= i
  for (int j = 0; j < kBlockTokens; ++j) {
    d[j][j] = 1.0f;
    for (int i = j + 1; i < kBlockTokens; ++i) d[j][i] = flush_tiny(d[j][i - 1] * w.alpha[i]);
  }
  float A = 1.0f;
  for (int i = 0; i < kBlockTokens; ++i) {
    A = flush_tiny(A * w.alpha[i]);
    c.A[i] = A;
    c.to_end[i] = d[i][kBlockTokens - 1];
    for (int j = 0; j < kBlockTokens; ++j) {
      c.kk[i][j] = j < i ? d[j][i] * dot(w.k[j], w.k[i], K) : 0.0f;
      c.kq[i][j] = j < i ? d[j][i] * dot(w.k[j], w.q[i], K) : j == i ? w.kq[i] : 0.0f;
    }
  }
}

// One block of tokens on S_b [K, ld]: q, k [n, K]; v, o [n, ld] (the block's value indices).
[[gnu::noinline]] void block_step(float* __restrict S, int64_t K, int64_t ld, const Scratch& w,
                                  const BlockCoefficients& c, float scale, float* __restrict o) {
  constexpr int n = kBlockTokens;
  for (int64_t c0 = 0; c0 < ld; c0 += kVecLanes) {
    vec sk[n], sq[n];  // s . k_i, s . q_i of the strip's value rows
    for (int i = 0; i < n; ++i) sk[i] = sq[i] = vec{};
    for (int64_t r = 0; r < K; ++r) {
      const vec s = load_vec(S + r * ld + c0);
#pragma GCC unroll 8
      for (int i = 0; i < n; ++i) {
        sk[i] += w.k[i][r] * s;
        sq[i] += w.q[i][r] * s;
      }
    }
    vec delta[n];
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i) {
      vec x = load_vec(&w.v[i][c0]) - c.A[i] * sk[i];
#pragma GCC unroll 8
      for (int j = 0; j < i; ++j) x -= c.kk[i][j] * delta[j];
      delta[i] = w.beta[i] * x;
      vec y = c.A[i] * sq[i];
#pragma GCC unroll 8
      for (int j = 0; j <= i; ++j) y += c.kq[i][j] * delta[j];
      store_vec(o + i * kMaxHeadDim + c0, scale * y);
    }
#pragma GCC unroll 8
    for (int i = 0; i < n; ++i) delta[i] *= c.to_end[i];
    const float A_n = c.A[n - 1];
    for (int64_t r = 0; r < K; ++r) {
      vec s = A_n * load_vec(S + r * ld + c0);
#pragma GCC unroll 8
      for (int i = 0; i < n; ++i) s += w.k[i][r] * delta[i];
      store_vec(S + r * ld + c0, s);
    }
  }
}

// dst[i * dst_ld + j] = src[j * src_ld + i] for i, j < 8: eight rows of eight floats through
// registers (unpacks of pairs, of pairs of pairs, then of halves).
using vec8 = float __attribute__((vector_size(8 * sizeof(float))));
#if defined(__clang__) || __GNUC__ >= 12
#define GDN_SHUFFLE8(x, y, ...) __builtin_shufflevector(x, y, __VA_ARGS__)
#else  // GCC before 12: the same selection through its own builtin
using mask8 = int __attribute__((vector_size(8 * sizeof(int))));
#define GDN_SHUFFLE8(x, y, ...) __builtin_shuffle(x, y, mask8{__VA_ARGS__})
#endif
void transpose_8x8(const float* __restrict src, int64_t src_ld, float* __restrict dst, int64_t dst_ld) {
  vec8 a[8], b[8];
  for (int j = 0; j < 8; ++j) memcpy(&a[j], src + j * src_ld, sizeof(vec8));
  for (int j = 0; j < 8; j += 2) {  // b[j]: rows j, j + 1 interleaved at columns 0, 1, 4, 5; b[j + 1] at 2, 3, 6, 7
    b[j] = GDN_SHUFFLE8(a[j], a[j + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    b[j + 1] = GDN_SHUFFLE8(a[j], a[j + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int j = 0; j < 8; j += 4) {  // a[j + c]: rows j .. j + 3 of columns c and c + 4
    a[j + 0] = GDN_SHUFFLE8(b[j], b[j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    a[j + 1] = GDN_SHUFFLE8(b[j], b[j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    a[j + 2] = GDN_SHUFFLE8(b[j + 1], b[j + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    a[j + 3] = GDN_SHUFFLE8(b[j + 1], b[j + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int c = 0; c < 4; ++c) {  // column c from rows 0 .. 3 and 4 .. 7; column c + 4 likewise
    b[c] = GDN_SHUFFLE8(a[c], a[4 + c], 0, 1, 2, 3, 8, 9, 10, 11);
    b[c + 4] = GDN_SHUFFLE8(a[c], a[4 + c], 4, 5, 6, 7, 12, 13, 14, 15);
  }
  for (int i = 0; i < 8; ++i) memcpy(dst + i * dst_ld, &b[i], sizeof(vec8));
}

// The vk block's rows r < b.rows (row stride `stride`) to and from S_b as S^T [K, ld], kChunk
// rows of S at a time through the f32 rows `rows` [kChunk, kMaxHeadDim], eight columns at a time
// through registers (a column at a time would touch a line of S_b per value).
static_assert(kChunk == 8, "the vk block is transposed in 8 x 8 tiles");
void load_block_transposed(float* __restrict S, const BlockShape& b, const void* src, gdn_dtype t,
                           int64_t stride, float (*__restrict rows)[kMaxHeadDim]) {
  for (int64_t r0 = 0; r0 < b.ld; r0 += kChunk) {
    for (int64_t j = 0; j < kChunk; ++j) {
      if (src != nullptr && r0 + j < b.rows) {
        load(rows[j], element(src, t, (b.row0 + r0 + j) * stride + b.col0), t, b.width);
      } else {  // no initial state, or the padding columns: zeros
        for (int64_t i = 0; i < b.width; ++i) rows[j][i] = 0;
      }
    }
    int64_t i = 0;
    for (; i + 8 <= b.width; i += 8) transpose_8x8(&rows[0][i], kMaxHeadDim, S + i * b.ld + r0, b.ld);
    for (; i < b.width; ++i)
      for (int64_t j = 0; j < kChunk; ++j) S[i * b.ld + r0 + j] = rows[j][i];
  }
}

void store_block_transposed(void* dst, gdn_dtype t, int64_t stride, const BlockShape& b,
                            const float* __restrict S, float (*__restrict rows)[kMaxHeadDim]) {
  for (int64_t r0 = 0; r0 < b.rows; r0 += kChunk) {
    int64_t i = 0;
    for (; i + 8 <= b.width; i += 8) transpose_8x8(S + i * b.ld + r0, b.ld, &rows[0][i], kMaxHeadDim);
    for (; i < b.width; ++i)
      for (int64_t j = 0; j < kChunk; ++j) rows[j][i] = S[i * b.ld + r0 + j];
    for (int64_t j = 0; j < kChunk && r0 + j < b.rows; ++j)
      store(element(dst, t, (b.row0 + r0 + j) * stride + b.col0), t, rows[j], b.width);
  }
}

// Every token of the task for value indices [v0, v0 + vb), kBlockTokens at a time; a block
// ends at each checkpoint token, whose state is stored as the block's end state.
void run_token_blocks(const Params& p, const Task& task, int64_t v0, int64_t vb, Scratch& w) {
  const bool vk = p.layout == GDN_STATE_VK;
  const int64_t ld = pad(vb, kStrip);
  // S_b [K, ld]: S^T's columns v0.. ; vk: b describes the rows of S it comes from
  const BlockShape b = vk ? BlockShape{vb, p.K, ld, v0, 0} : BlockShape{p.K, vb, ld, 0, v0};
  float(*rows)[kMaxHeadDim] = w.o;  // the transposition's f32 rows (before and after the tokens)
  if (vk)
    load_block_transposed(w.S, b, task.state_in, p.state_in_dtype, task.state_in_row, rows);
  else
    load_block(w.S, b, task.state_in, p.state_in_dtype, task.state_in_row);
  const auto store_state = [&](void* dst, gdn_dtype t, int64_t stride) {
    if (vk)
      store_block_transposed(dst, t, stride, b, w.S, rows);
    else
      store_block(dst, t, stride, b, w.S);
  };
  for (int64_t i = 0; i < kChunk; ++i)  // beyond vb: zero, never written
    for (int64_t c = vb; c < ld; ++c) w.v[i][c] = 0;
  BlockCoefficients coef;
  for (int64_t t0 = 0; t0 < task.len;) {
    int64_t n = task.len - t0 < kBlockTokens ? task.len - t0 : kBlockTokens;
    if (task.snap != nullptr) {  // checkpoints (snap_every > 0): a block ends at each
      const int64_t to_checkpoint = task.snap_every - t0 % task.snap_every;
      n = n < to_checkpoint ? n : to_checkpoint;
    }
    prepare(p, task, t0, n, v0, vb, w);
    for (int64_t i = n; i < kBlockTokens; ++i) {  // tokens past the block's end change nothing
      for (int64_t c = 0; c < p.K; ++c) w.q[i][c] = w.k[i][c] = 0;
      for (int64_t c = 0; c < vb; ++c) w.v[i][c] = 0;
      w.alpha[i] = 1.0f, w.beta[i] = 0.0f, w.kq[i] = 0.0f;
    }
    block_coefficients(w, p.K, coef);
    block_step(w.S, p.K, ld, w, coef, p.scale, &w.o[0][0]);
    for (int64_t i = 0; i < n; ++i)
      store(element(task.o, p.x_dtype, (t0 + i) * task.o_tok + v0), p.x_dtype, w.o[i], vb);
    t0 += n;
    if (void* snap = snapshot_of(task, p.snapshot_dtype, t0 - 1)) store_state(snap, p.snapshot_dtype, task.snap_row);
  }
  if (task.state_out != nullptr) store_state(task.state_out, p.state_out_dtype, task.state_out_row);
}

// ---- decode (one token, no snapshots, a state of f32 or bf16 to read): one pass over the
// state, from the state tensor to the final state in registers, nothing staged in scratch. The
// state is read in address order, one stream per row (rows read a vector each in turn, or any
// order that breaks a single stream, halve the rate the hardware prefetchers keep up from
// memory); the update's second reading of a row hits L1 (vk) or L2 (kv).

using u16vec = uint16_t __attribute__((vector_size(kVecLanes * sizeof(uint16_t))));
using u32vec = uint32_t __attribute__((vector_size(kVecLanes * sizeof(uint32_t))));

// kVecLanes state elements at x (f32 or bf16) as f32, and back (bf16: round to nearest even,
// NaN kept quiet, as to_bf16; avx512bf16 as store()). The bf16 forms through the target's
// widening and narrowing instructions: the generic vector code compiles to two halves or
// permutes on AVX-512 and to scalar packing on SSE2.
template <bool kBf16>
vec load_state_vec(const char* x) {
  if constexpr (!kBf16) {
    return load_vec(reinterpret_cast<const float*>(x));
  } else {
#if defined(__AVX512BW__)
    return (vec)_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)x)), 16);
#elif defined(__AVX2__)
    return (vec)_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)x)), 16);
#elif defined(__SSE2__)  // each value the upper half of its lane
    return (vec)_mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64((const __m128i*)x));
#else
    u16vec h;
    memcpy(&h, x, sizeof h);
    return (vec)(__builtin_convertvector(h, u32vec) << 16);
#endif
  }
}
// f32 -> bf16 of a vector: kVecLanes bf16 values, in the narrowest register that holds them
#if defined(__AVX512BW__)
using bf16vec = __m256i;
#elif defined(__SSE2__)
using bf16vec = __m128i;  // SSE2: the low 8 bytes
#else
using bf16vec = u16vec;
#endif
bf16vec to_bf16_vec(vec f) {
#if defined(__AVX512BF16__)
  return (__m256i)_mm512_cvtneps_pbh(f);  // as to_bf16; subnormals to 0
#else
  const u32vec u = (u32vec)f;
  // the bf16 value in each lane's upper half
  const u32vec r = (u & 0x7fffffffu) > 0x7f800000u ? u | 0x00400000u : u + 0x7fffu + ((u >> 16) & 1u);
#if defined(__AVX512BW__)
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32((__m512i)r, 16));
#elif defined(__AVX2__)
  const __m256i h = _mm256_srli_epi32((__m256i)r, 16);
  return _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
#elif defined(__SSE2__)  // sign-extended upper halves: the signed pack keeps their bits
  const __m128i h = _mm_srai_epi32((__m128i)r, 16);
  return _mm_packs_epi32(h, h);
#else
  return __builtin_convertvector(r >> 16, u16vec);
#endif
#endif
}

template <bool kBf16>
void store_state_vec(char* x, vec f) {
  if constexpr (!kBf16) {
    store_vec(reinterpret_cast<float*>(x), f);
  } else {
    const bf16vec h = to_bf16_vec(f);
    memcpy(x, &h, kVecLanes * sizeof(uint16_t));
  }
}

// Snapshots (every token's state, written once and read, if ever, by a later call) go around
// the caches where the target has non-temporal stores: ordinary stores of lines not in cache
// first read them (for ownership), a third of verify's memory traffic. vec_stream(x, f) writes
// one vector at x, aligned to its size, and answers false where the target has no such store.
template <bool kBf16>
bool vec_stream(char* x, vec f) {
#if defined(__AVX512F__)
  if constexpr (kBf16) _mm256_stream_si256((__m256i*)x, to_bf16_vec(f));
  else _mm512_stream_ps((float*)x, (__m512)f);
  return true;
#elif defined(__AVX2__)
  if constexpr (kBf16) _mm_stream_si128((__m128i*)x, to_bf16_vec(f));
  else _mm256_stream_ps((float*)x, (__m256)f);
  return true;
#elif defined(__SSE2__) && defined(__x86_64__)
  if constexpr (kBf16) _mm_stream_si64((long long*)x, _mm_cvtsi128_si64(to_bf16_vec(f)));
  else _mm_stream_ps((float*)x, (__m128)f);
  return true;
#else
  (void)x, (void)f;
  return false;
#endif
}

// store_block for a snapshot: rows whose start is aligned for vec_stream are streamed (the
// tail of each row, past its last whole vector, stored as usual).
template <bool kBf16>
void store_snapshot_block(void* dst, int64_t stride, const BlockShape& b, const float* __restrict S) {
  constexpr int64_t size = kBf16 ? 2 : 4;
  for (int64_t r = 0; r < b.rows; ++r) {
    char* row = static_cast<char*>(dst) + ((b.row0 + r) * stride + b.col0) * size;
    const float* s = S + r * b.ld;
    int64_t i = 0;
    if (reinterpret_cast<uintptr_t>(row) % (kVecLanes * size) == 0)
      for (; i + kVecLanes <= b.width && vec_stream<kBf16>(row + i * size, load_vec(s + i)); i += kVecLanes) {
      }
    store(row + i * size, kBf16 ? GDN_DTYPE_BF16 : GDN_DTYPE_F32, s + i, b.width - i);
  }
}

float sum_lanes(vec x) {
  float s = 0;
  for (int l = 0; l < kVecLanes; ++l) s += x[l];
  return s;
}

// A decode task's state tensors (one dtype, element `size` bytes): element (r, c) of the task's
// [R, C] state at in + r * in_row + c * size; out likewise, null when the final state is not
// written. (Passed by value: stores through char pointers could alias a referenced one.)
struct DecodeState {
  const char* in;
  int64_t in_row;
  char* out;
  int64_t out_row, size;
  const char* in_at(int64_t r, int64_t c) const { return in + r * in_row + c * size; }
  char* out_at(int64_t r, int64_t c) const { return out + r * out_row + c * size; }
};

// vk: the value rows [0, vb) of the task's block (st), the token in w's first slot: o [vb].
// One call per task, the row loop inside (a call per few rows cost as much as the rows' loads
// with GCC); the token's scalars held in locals (the stores go through pointers that could
// alias them).
template <bool kBf16>
void decode_vk(const Params& p, const Scratch& w, DecodeState st, int64_t vb, float* __restrict o) {
  const int64_t K = p.K, whole = K / kVecLanes * kVecLanes;
  const float alpha = w.alpha[0], beta = w.beta[0], kq = w.kq[0], scale = p.scale;
  const float* __restrict k = w.k[0];
  const float* __restrict q = w.q[0];
  const float* __restrict v = w.v[0];
  const gdn_dtype dtype = kBf16 ? GDN_DTYPE_BF16 : GDN_DTYPE_F32;
  constexpr int kRows = 4;    // rows whose products come before their updates
  constexpr int kParts = 4;   // partial sums of a row's products (chains of whole / 64 FMAs)
  static_assert(kParts == 4, "the partial sums are added as a pair of pairs below");
  for (int64_t r0 = 0; r0 < vb; r0 += kRows) {
    const int rows = vb - r0 < kRows ? int(vb - r0) : kRows;
    float delta[kRows];
    for (int j = 0; j < rows; ++j) {  // each row read to its end: one stream for the prefetchers
      const char* row = st.in_at(r0 + j, 0);
      vec ak[kParts] = {}, aq[kParts] = {};
      int64_t i = 0;
      for (; i + kParts * kVecLanes <= whole; i += kParts * kVecLanes) {
        for (int u = 0; u < kParts; ++u) {
          const vec s = load_state_vec<kBf16>(row + (i + u * kVecLanes) * st.size);
          ak[u] += s * load_vec(k + i + u * kVecLanes);
          aq[u] += s * load_vec(q + i + u * kVecLanes);
        }
      }
      for (; i < whole; i += kVecLanes) {
        const vec s = load_state_vec<kBf16>(row + i * st.size);
        ak[0] += s * load_vec(k + i);
        aq[0] += s * load_vec(q + i);
      }
      float a_k = sum_lanes((ak[0] + ak[1]) + (ak[2] + ak[3]));
      float a_q = sum_lanes((aq[0] + aq[1]) + (aq[2] + aq[3]));
      for (; i < K; ++i) {
        const float s = load_one(row + i * st.size, dtype);
        a_k += s * k[i];
        a_q += s * q[i];
      }
      delta[j] = beta * (v[r0 + j] - alpha * a_k);
      o[r0 + j] = scale * (alpha * a_q + delta[j] * kq);
    }
    if (st.out == nullptr) continue;
    for (int j = 0; j < rows; ++j) {
      const char* row = st.in_at(r0 + j, 0);
      char* out = st.out_at(r0 + j, 0);
      const float d = delta[j];
      int64_t i = 0;
      for (; i < whole; i += kVecLanes)
        store_state_vec<kBf16>(out + i * st.size,
                               alpha * load_state_vec<kBf16>(row + i * st.size) + d * load_vec(k + i));
      for (; i < K; ++i) {
        const float s = alpha * load_one(row + i * st.size, dtype) + d * k[i];
        store(out + i * st.size, dtype, &s, 1);
      }
    }
  }
}

// kv: the value indices c0 .. c0 + kVecs kVecLanes (columns of S^T, each row a key index),
// every row read once for the products and once (from L2) for the update: o [vb].
template <int kVecs, bool kBf16>
void decode_columns_kv(const Params& p, const Scratch& w, DecodeState st, int64_t c0, float* o) {
  vec sk[kVecs], sq[kVecs];
  for (int m = 0; m < kVecs; ++m) sk[m] = sq[m] = vec{};
  for (int64_t i = 0; i < p.K; ++i) {
    const float k = w.k[0][i], q = w.q[0][i];
    for (int m = 0; m < kVecs; ++m) {
      const vec s = load_state_vec<kBf16>(st.in_at(i, c0 + m * kVecLanes));
      sk[m] += k * s;
      sq[m] += q * s;
    }
  }
  const float alpha = w.alpha[0], beta = w.beta[0];
  vec delta[kVecs];
  for (int m = 0; m < kVecs; ++m) {
    const int64_t c = c0 + m * kVecLanes;
    delta[m] = beta * (load_vec(&w.v[0][c]) - alpha * sk[m]);
    store_vec(o + c, p.scale * (alpha * sq[m] + delta[m] * w.kq[0]));
  }
  if (st.out == nullptr) return;
  for (int64_t i = 0; i < p.K; ++i) {
    const float k = w.k[0][i];
    for (int m = 0; m < kVecs; ++m) {
      const vec s = load_state_vec<kBf16>(st.in_at(i, c0 + m * kVecLanes));
      store_state_vec<kBf16>(st.out_at(i, c0 + m * kVecLanes), alpha * s + k * delta[m]);
    }
  }
}

// kv: one value index c (the columns past the last whole vector), scalar.
void decode_column_kv(const Params& p, const Scratch& w, DecodeState st, int64_t c, float* o) {
  float a_k = 0, a_q = 0;
  for (int64_t i = 0; i < p.K; ++i) {
    const float s = load_one(st.in_at(i, c), p.state_in_dtype);
    a_k += w.k[0][i] * s;
    a_q += w.q[0][i] * s;
  }
  const float alpha = w.alpha[0];
  const float delta = w.beta[0] * (w.v[0][c] - alpha * a_k);
  o[c] = p.scale * (alpha * a_q + delta * w.kq[0]);
  if (st.out == nullptr) return;
  for (int64_t i = 0; i < p.K; ++i) {
    const float s = alpha * load_one(st.in_at(i, c), p.state_in_dtype) + w.k[0][i] * delta;
    store(st.out_at(i, c), p.state_out_dtype, &s, 1);
  }
}

// Vectors of value indices per kv pass: 2 kKvVecs sums in registers beside the loads.
constexpr int kKvVecs = kVecLanes == 16 ? 8 : 4;

// One token for value indices [v0, v0 + vb), the state f32 (kBf16 false) or bf16.
template <bool kBf16>
void decode(const Params& p, const Task& task, int64_t v0, int64_t vb, Scratch& w) {
  prepare(p, task, 0, 1, v0, vb, w);
  const bool vk = p.layout == GDN_STATE_VK;
  const int64_t size = kBf16 ? 2 : 4;
  // (r, c) of the task's state block: vk rows v0.. of S, kv columns v0.. of S^T
  const DecodeState st{
      static_cast<const char*>(task.state_in) + (vk ? v0 * task.state_in_row : v0) * size,
      task.state_in_row * size,
      task.state_out == nullptr
          ? nullptr
          : static_cast<char*>(task.state_out) + (vk ? v0 * task.state_out_row : v0) * size,
      task.state_out_row * size, size};
  float* o = w.o[0];
  if (vk) {
    decode_vk<kBf16>(p, w, st, vb, o);
  } else {
    int64_t c = 0;
    for (; c + kKvVecs * kVecLanes <= vb; c += kKvVecs * kVecLanes)
      decode_columns_kv<kKvVecs, kBf16>(p, w, st, c, o);
    if (kKvVecs > 4 && c + 4 * kVecLanes <= vb)
      decode_columns_kv<4, kBf16>(p, w, st, c, o), c += 4 * kVecLanes;
    if (c + 2 * kVecLanes <= vb) decode_columns_kv<2, kBf16>(p, w, st, c, o), c += 2 * kVecLanes;
    if (c + kVecLanes <= vb) decode_columns_kv<1, kBf16>(p, w, st, c, o), c += kVecLanes;
    for (; c < vb; ++c) decode_column_kv(p, w, st, c, o);
  }
  store(element(task.o, p.x_dtype, v0), p.x_dtype, o, vb);
}

// decode<> when the task is one: a single token, no snapshots, a state to read, of f32 or bf16
// (every state of a call shares one dtype); else false.
bool try_decode(const Params& p, const Task& task, int64_t v0, int64_t vb, Scratch& w) {
  if (task.len != 1 || task.snap != nullptr || task.state_in == nullptr) return false;
  if (p.state_in_dtype == GDN_DTYPE_F32)
    decode<false>(p, task, v0, vb, w);
  else if (p.state_in_dtype == GDN_DTYPE_BF16)
    decode<true>(p, task, v0, vb, w);
  else
    return false;
  return true;
}

}  // namespace

void run(const Params& p, const Task& task, int64_t v0, int64_t v1, Scratch& w) {
  const bool vk = p.layout == GDN_STATE_VK;
  const int64_t vb = v1 - v0;
  // S_b: vk [vb, pad(K)] rows v0.. of S; kv [K, pad(vb)] columns v0.. of S^T
  const BlockShape b = vk ? BlockShape{vb, p.K, pad(p.K, kLanes), v0, 0}
                          : BlockShape{p.K, vb, pad(vb, kStrip), 0, v0};
  if (task.padded) {
    write_padding(p, task, v0, vb);
    return;
  }
  const bool per_token_snapshots = task.snap != nullptr && task.snap_every <= 0;
  if (task.len >= (vk ? kBlockedMinTokensVk : kBlockedMinTokensKv) && !per_token_snapshots) {
    run_token_blocks(p, task, v0, vb, w);
    return;
  }
  if (try_decode(p, task, v0, vb, w)) return;
  load_block(w.S, b, task.state_in, p.state_in_dtype, task.state_in_row);
  for (int64_t i = 0; i < kChunk; ++i) {  // padding of the token vectors: zero, never written
    for (int64_t c = p.K; c < pad(p.K, kLanes); ++c) w.q[i][c] = w.k[i][c] = 0;
    for (int64_t c = vb; c < pad(vb, kStrip); ++c) w.v[i][c] = 0;
  }
  bool streamed = false;
  for (int64_t t0 = 0; t0 < task.len; t0 += kChunk) {
    const int64_t n = task.len - t0 < kChunk ? task.len - t0 : kChunk;
    prepare(p, task, t0, n, v0, vb, w);
    for (int64_t i = 0; i < n; ++i) {
      (vk ? step_vk : step_kv)(w.S, vk ? vb : p.K, b.ld, w.q[i], w.k[i], w.v[i], w.alpha[i],
                               w.beta[i], w.kq[i], p.scale, w.o[i]);
      store(element(task.o, p.x_dtype, (t0 + i) * task.o_tok + v0), p.x_dtype, w.o[i], vb);
      if (void* snap = snapshot_of(task, p.snapshot_dtype, t0 + i)) {
        if (p.snapshot_dtype == GDN_DTYPE_F32)
          store_snapshot_block<false>(snap, task.snap_row, b, w.S);
        else if (p.snapshot_dtype == GDN_DTYPE_BF16)
          store_snapshot_block<true>(snap, task.snap_row, b, w.S);
        else
          store_block(snap, p.snapshot_dtype, task.snap_row, b, w.S);
        streamed = true;
      }
    }
  }
  if (task.state_out != nullptr)
    store_block(task.state_out, p.state_out_dtype, task.state_out_row, b, w.S);
#if defined(__SSE2__)
  if (streamed) _mm_sfence();  // the non-temporal stores ordered before the task's end
#endif
  (void)streamed;
}

}  // namespace gdn::cpu::GDN_CPU_TARGET

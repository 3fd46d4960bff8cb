// Device helpers shared by the decode kernels (decode_vk.cuh, decode_kv.cuh): element access in
// any input dtype, 16-byte state chunks with streaming cache hints, the gates, shuffle sums,
// and the per-sequence resolution that checks device-resident index contents.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/decode_params.h"
#include "cuda/sequence.cuh"
#include "gdn/gdn.h"

namespace gdn::cuda {

// ---- input / output elements (q, k, v, o, gates): f32, bf16 or f16, converted to f32

__device__ __forceinline__ float half_bits_to_f32(uint32_t bits, int dtype) {
  return dtype == GDN_DTYPE_BF16 ? __uint_as_float(bits << 16)
                                 : __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
}

__device__ __forceinline__ uint32_t f32_to_half_bits(float x, int dtype) {
  return dtype == GDN_DTYPE_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x))
                                 : __half_as_ushort(__float2half_rn(x));
}

// Element `off` of a tensor of `dtype`, as a byte address: one address per tensor whatever its
// dtype (element-typed pointers per dtype would each take registers across the token loop).
__device__ __forceinline__ const char* element_at(const void* base, int dtype, int64_t off) {
  return static_cast<const char*>(base) + (off << (dtype == GDN_DTYPE_F32 ? 2 : 1));
}

// Loads go out as raw bits and are converted afterwards, so that every load of a token is in
// flight before the first is used: a conversion between two loads (a branch on the dtype) made
// each load wait for the previous one, a chain of memory latencies per token.

// The bits of element `off` of a tensor of `dtype`: f32 32 bits, bf16 / f16 16 (low half).
// (load_bits_at: at its byte address)
__device__ __forceinline__ uint32_t load_bits_at(const char* at, int dtype) {
  return dtype == GDN_DTYPE_F32 ? __ldg(reinterpret_cast<const unsigned int*>(at))
                                : uint32_t(__ldg(reinterpret_cast<const unsigned short*>(at)));
}
__device__ __forceinline__ uint32_t load_bits(const void* base, int dtype, int64_t off) {
  return load_bits_at(element_at(base, dtype, off), dtype);
}

__device__ __forceinline__ float bits_to_f32(uint32_t bits, int dtype) {
  return dtype == GDN_DTYPE_F32 ? __uint_as_float(bits) : half_bits_to_f32(bits, dtype);
}

// E consecutive elements t[off, off + E) as raw bits: f32 in w[0, E), two halves a word in
// w[0, E / 2) (the lower element in the low half). off a multiple of E; read in 16-byte vectors
// (8-byte for 4 half-width elements); cuda_can_implement checks the alignment.
template <int E>
struct RunBits {
  static_assert(E % 4 == 0, "runs of whole 4-element vectors");
  uint32_t w[E];

  __device__ __forceinline__ void load(const TokenView& t, int64_t off) { load(t, t.dtype, off); }
  // with the dtype given (a compile-time constant in a specialised kernel: DecodeForm)
  __device__ __forceinline__ void load(const TokenView& t, int dtype, int64_t off) {
    load_at(element_at(t.p, dtype, off), dtype);
  }
  // from its byte address (element_at)
  __device__ __forceinline__ void load_at(const char* at, int dtype) {
    if (dtype == GDN_DTYPE_F32) {
#pragma unroll
      for (int i = 0; i < E / 4; ++i) {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(at) + i);
        w[4 * i] = u.x; w[4 * i + 1] = u.y; w[4 * i + 2] = u.z; w[4 * i + 3] = u.w;
      }
    } else if constexpr (E % 8 == 0) {
#pragma unroll
      for (int i = 0; i < E / 8; ++i) {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(at) + i);
        w[4 * i] = u.x; w[4 * i + 1] = u.y; w[4 * i + 2] = u.z; w[4 * i + 3] = u.w;
      }
    } else {
      const uint2 u = __ldg(reinterpret_cast<const uint2*>(at));
      w[0] = u.x; w[1] = u.y;
    }
  }

  __device__ __forceinline__ void to_f32(int dtype, float* x) const {
    if (dtype == GDN_DTYPE_F32) {
#pragma unroll
      for (int e = 0; e < E; ++e) x[e] = __uint_as_float(w[e]);
      return;
    }
#pragma unroll
    for (int e = 0; e < E / 2; ++e) {
      x[2 * e] = half_bits_to_f32(w[e] & 0xffffu, dtype);
      x[2 * e + 1] = half_bits_to_f32(w[e] >> 16, dtype);
    }
  }
};

// t[off, off + E) = x[0, E), rounded to t's dtype (nearest even); aligned as for RunBits.
template <int E>
__device__ __forceinline__ void store_run(const TokenView& t, int64_t off, const float* x) {
  static_assert(E % 4 == 0, "runs of whole 4-element vectors");
  char* at = const_cast<char*>(element_at(t.p, t.dtype, off));
  if (t.dtype == GDN_DTYPE_F32) {
#pragma unroll
    for (int i = 0; i < E / 4; ++i)
      reinterpret_cast<float4*>(at)[i] = make_float4(x[4 * i], x[4 * i + 1], x[4 * i + 2], x[4 * i + 3]);
    return;
  }
  uint32_t w[E / 2];
#pragma unroll
  for (int e = 0; e < E / 2; ++e)
    w[e] = f32_to_half_bits(x[2 * e], t.dtype) | (f32_to_half_bits(x[2 * e + 1], t.dtype) << 16);
  if constexpr (E % 8 == 0) {
#pragma unroll
    for (int i = 0; i < E / 8; ++i)
      reinterpret_cast<uint4*>(at)[i] = make_uint4(w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]);
  } else {
    *reinterpret_cast<uint2*>(at) = make_uint2(w[0], w[1]);
  }
}

__device__ __forceinline__ void store_scalar(const TokenView& t, int dtype, int64_t off, float x) {
  char* at = const_cast<char*>(element_at(t.p, dtype, off));
  if (dtype == GDN_DTYPE_F32)
    *reinterpret_cast<float*>(at) = x;
  else
    *reinterpret_cast<unsigned short*>(at) = static_cast<unsigned short>(f32_to_half_bits(x, dtype));
}

// Offset of element (n, t = token in the batch's token axis, h, 0).
__device__ __forceinline__ int64_t token_offset(const TokenView& t, int64_t n, int64_t tok, int64_t h) {
  return n * t.seq + tok * t.tok + h * t.head;
}

// ---- state storage: 16-byte chunks, f32 math. The state is touched once per call: streaming
// loads and stores (ld.global.cs / st.global.cs, evict-first), so that it does not displace
// q, k, v in L1 / L2; plain ones for calls whose state is large (decode_streams_state).

template <class S> struct StateChunk;

template <> struct StateChunk<float> {
  static constexpr int W = 4;  // elements per 16-byte chunk
  __device__ __forceinline__ static void to_f32(const uint4& u, float* x) {
    x[0] = __uint_as_float(u.x); x[1] = __uint_as_float(u.y);
    x[2] = __uint_as_float(u.z); x[3] = __uint_as_float(u.w);
  }
  __device__ __forceinline__ static uint4 from_f32(const float* x) {
    return make_uint4(__float_as_uint(x[0]), __float_as_uint(x[1]), __float_as_uint(x[2]), __float_as_uint(x[3]));
  }
};

template <> struct StateChunk<Bf16> {
  static constexpr int W = 8;
  __device__ __forceinline__ static void to_f32(const uint4& u, float* x) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[2 * e] = __uint_as_float(w[e] << 16);
      x[2 * e + 1] = __uint_as_float(w[e] & 0xffff0000u);
    }
  }
  __device__ __forceinline__ static uint4 from_f32(const float* x) {  // round to nearest even
    uint32_t w[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const __nv_bfloat162 b = __floats2bfloat162_rn(x[2 * e], x[2 * e + 1]);  // .x: low half
      w[e] = uint32_t(__bfloat16_as_ushort(b.x)) | (uint32_t(__bfloat16_as_ushort(b.y)) << 16);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

// 16-byte load and store of a state chunk: streaming (ld.global.cs / st.global.cs) or plain,
// a compile-time choice of the kernel (decode_streams_state() in decode_tile.h says which calls
// take a plain instance).
template <class S>
__device__ __forceinline__ uint4 load_chunk(const S* src, bool streaming) {
  const uint4* at = reinterpret_cast<const uint4*>(src);
  return streaming ? __ldcs(at) : *at;
}

template <class S>
__device__ __forceinline__ void store_chunk(S* dst, const uint4& chunk, bool streaming) {
  uint4* at = reinterpret_cast<uint4*>(dst);
  if (streaming)
    __stcs(at, chunk);
  else
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(at), "r"(chunk.x), "r"(chunk.y), "r"(chunk.z),
                 "r"(chunk.w)
                 : "memory");  // one 16-byte store (a plain `*at = chunk` became four 4-byte ones)
}

// The state chunks a thread holds across a sequence's tokens. Held in f32 (an f32 state; a bf16
// state through several tokens, so that it is rounded to bf16 once, when stored), or, for a
// bf16 state through at most one token, as stored ("raw": 8 bf16 a 16-byte chunk, half the
// registers of f32, so twice the rows a thread and twice the bytes in flight), widened on use.
template <class S, int R, bool kRaw>
struct HeldState {
  using Chunk = StateChunk<S>;
  static constexpr int W = Chunk::W;
  float x[R][W];
  __device__ __forceinline__ void load(int r, const uint4& stored) { Chunk::to_f32(stored, x[r]); }
  __device__ __forceinline__ void zero(int r) {
#pragma unroll
    for (int e = 0; e < W; ++e) x[r][e] = 0.f;
  }
  __device__ __forceinline__ void get(int r, float* y) const {
#pragma unroll
    for (int e = 0; e < W; ++e) y[e] = x[r][e];
  }
  __device__ __forceinline__ void set(int r, const float* y) {
#pragma unroll
    for (int e = 0; e < W; ++e) x[r][e] = y[e];
  }
  __device__ __forceinline__ uint4 stored(int r) const { return Chunk::from_f32(x[r]); }
};

template <int R>
struct HeldState<Bf16, R, true> {
  using Chunk = StateChunk<Bf16>;
  static constexpr int W = Chunk::W;
  uint4 u[R];
  __device__ __forceinline__ void load(int r, const uint4& stored) { u[r] = stored; }
  __device__ __forceinline__ void zero(int r) { u[r] = make_uint4(0, 0, 0, 0); }
  __device__ __forceinline__ void get(int r, float* y) const { Chunk::to_f32(u[r], y); }
  __device__ __forceinline__ void set(int r, const float* y) { u[r] = Chunk::from_f32(y); }
  __device__ __forceinline__ uint4 stored(int r) const { return u[r]; }
};

// (slot, h, 0, 0) of a state tensor.
template <class S>
__device__ __forceinline__ S* state_at(const StateView& s, int64_t slot, int64_t h) {
  return static_cast<S*>(s.p) + slot * s.slot + h * s.head;
}


// ---- what a kernel knows of its inputs at compile time (the host picks the DecodeForm,
// decode_launch.h)

// Every dtype and option read from the parameter block.
struct AnyInputs {
  __device__ static int q(const DecodeParams& p) { return p.q.dtype; }
  __device__ static int k(const DecodeParams& p) { return p.k.dtype; }
  __device__ static int v(const DecodeParams& p) { return p.v.dtype; }
  __device__ static int o(const DecodeParams& p) { return p.o.dtype; }
  __device__ static const TokenView& gate_input(const DecodeParams& p) { return p.gate == GDN_GATE_RAW ? p.a : p.g; }
  __device__ static int gate_input_dtype(const DecodeParams& p) { return gate_input(p).dtype; }  // g, or a (raw)
  __device__ static int beta(const DecodeParams& p) { return p.beta.dtype; }
  __device__ static int gate(const DecodeParams& p) { return p.gate; }
  __device__ static bool beta_logit(const DecodeParams& p) { return p.beta_logit != 0; }
  __device__ static bool l2norm(const DecodeParams& p) { return p.l2norm != 0; }
  static constexpr bool kSnapshots = true;  // may write per-token states
  static constexpr bool kCheckpoints = true;  // ... or only every snap_every tokens
};

// bf16 q, k, v and o, fixed: the base of the decode calls' common forms below.
struct Bf16TokenInputs {
  __device__ static int q(const DecodeParams&) { return GDN_DTYPE_BF16; }
  __device__ static int k(const DecodeParams&) { return GDN_DTYPE_BF16; }
  __device__ static int v(const DecodeParams&) { return GDN_DTYPE_BF16; }
  __device__ static int o(const DecodeParams&) { return GDN_DTYPE_BF16; }
  static constexpr bool kSnapshots = false;
  static constexpr bool kCheckpoints = false;
};

// The plain decode call of fla-style callers: bf16 q, k, v, o; f32 g (log decay) and beta
// (probability); no q/k norm; no snapshots. Scale, state pool and padding stay run-time.
struct PlainBf16Inputs : Bf16TokenInputs {
  __device__ static const TokenView& gate_input(const DecodeParams& p) { return p.g; }
  __device__ static int gate_input_dtype(const DecodeParams&) { return GDN_DTYPE_F32; }
  __device__ static int beta(const DecodeParams&) { return GDN_DTYPE_F32; }
  __device__ static int gate(const DecodeParams&) { return GDN_GATE_LOG_DECAY; }
  __device__ static bool beta_logit(const DecodeParams&) { return false; }
  __device__ static bool l2norm(const DecodeParams&) { return false; }
};

// The plain inputs through several tokens (speculative verify, short prefill from fla-style
// callers), with per-token snapshots allowed.
struct PlainBf16TokensInputs : PlainBf16Inputs {
  static constexpr bool kSnapshots = true;  // (not checkpoints: the host takes the generic kernel)
};

// The serving decode call (Qwen3-Next in an engine): bf16 q, k, v, o; the gate computed in the
// kernel from a, A_log, dt_bias (raw); beta as a logit; q/k L2 norm; no snapshots. The gate
// inputs' dtypes (f32 or bf16 a, beta, A_log, dt_bias), scale, pool and padding stay run-time.
struct ServingBf16Inputs : Bf16TokenInputs {
  __device__ static const TokenView& gate_input(const DecodeParams& p) { return p.a; }
  __device__ static int gate_input_dtype(const DecodeParams& p) { return p.a.dtype; }
  __device__ static int beta(const DecodeParams& p) { return p.beta.dtype; }
  __device__ static int gate(const DecodeParams&) { return GDN_GATE_RAW; }
  __device__ static bool beta_logit(const DecodeParams&) { return true; }
  __device__ static bool l2norm(const DecodeParams&) { return true; }
};

// ---- gates (SPEC "Conventions"), per (token, value head); the same in every thread

struct Gates {
  float alpha;  // decay of the state
  float beta;   // write strength
};

// The gate inputs of (token, value head) as raw bits: g (or a, A_log[h], dt_bias[h] for gate
// raw) and beta.
struct GateBits {
  uint32_t g, beta, A_log, dt_bias;

  template <class In = AnyInputs>
  __device__ __forceinline__ void load(const DecodeParams& p, int64_t n, int64_t tok, int h) {
    const bool raw = In::gate(p) == GDN_GATE_RAW;
    const TokenView& gv = In::gate_input(p);
    g = load_bits(gv.p, In::gate_input_dtype(p), token_offset(gv, n, tok, h));
    beta = load_bits(p.beta.p, In::beta(p), token_offset(p.beta, n, tok, h));
    if (raw) {
      A_log = load_bits(p.A_log, p.A_log_dtype, h * p.A_log_stride);
      dt_bias = load_bits(p.dt_bias, p.dt_bias_dtype, h * p.dt_bias_stride);
    }
  }
  // g (or a) and beta from their byte addresses (element_at)
  template <class In = AnyInputs>
  __device__ __forceinline__ void load_at(const DecodeParams& p, int h, const char* g_at, const char* beta_at) {
    const bool raw = In::gate(p) == GDN_GATE_RAW;
    g = load_bits_at(g_at, In::gate_input_dtype(p));
    beta = load_bits_at(beta_at, In::beta(p));
    if (raw) {
      A_log = load_bits(p.A_log, p.A_log_dtype, h * p.A_log_stride);
      dt_bias = load_bits(p.dt_bias, p.dt_bias_dtype, h * p.dt_bias_stride);
    }
  }

  // SPEC "Conventions"
  template <class In = AnyInputs>
  __device__ __forceinline__ Gates gates(const DecodeParams& p) const {
    const bool raw = In::gate(p) == GDN_GATE_RAW;
    float x = bits_to_f32(g, In::gate_input_dtype(p));
    if (raw) {
      // g = -exp(A_log[h]) * softplus(a[t, h] + dt_bias[h])    softplus(x) = x for x > 20
      x += bits_to_f32(dt_bias, p.dt_bias_dtype);
      x = -expf(bits_to_f32(A_log, p.A_log_dtype)) * (x > 20.f ? x : log1pf(expf(x)));
    } else if (In::gate(p) == GDN_GATE_DECAY_RATE) {
      x = -x;  // alpha = exp(-g)
    }
    float b = bits_to_f32(beta, In::beta(p));
    if (In::beta_logit(p)) b = __fdividef(1.f, 1.f + expf(-b));  // beta = sigmoid(b)
    return Gates{expf(x), b};
  }
};

// ---- reductions

// x[i] <- sum of x[i] over the lanes whose index differs only in bits [first, 32): lanes
// lane % first + first * m for all m. first = 1 sums a whole warp; first = L sums the lanes
// that hold the same column group in different row groups.
template <int kFirst, int kCount>
__device__ __forceinline__ void sum_across_lanes(float (&x)[kCount]) {
#pragma unroll
  for (int m = kFirst; m < 32; m *= 2)
#pragma unroll
    for (int i = 0; i < kCount; ++i) x[i] += __shfl_xor_sync(0xffffffffu, x[i], m);
}

// x[i] <- sum of x[i] over the kWidth aligned lanes of this lane's group.
template <int kWidth, int kCount>
__device__ __forceinline__ void sum_within_group(float (&x)[kCount]) {
#pragma unroll
  for (int m = kWidth / 2; m >= 1; m /= 2)
#pragma unroll
    for (int i = 0; i < kCount; ++i) x[i] += __shfl_xor_sync(0xffffffffu, x[i], m);
}

// x[0, C) summed over the kWidth aligned lanes of this lane's group, transposed: each step hands
// half of the values to the lane across bit m (m = kWidth / 2, ..., kWidth / C) and keeps the
// other half, then one value is summed over the remaining bits: C - 1 + log2(kWidth / C)
// shuffles instead of C log2(kWidth). Afterwards the lane at position c of its group holds the
// total of value c >> log2(kWidth / C), returned. C: a power of two <= kWidth.
template <int C, int kWidth>
__device__ __forceinline__ float sum_within_group_transposed(float* x) {
  if constexpr (C == 1) {
    float s = x[0];
#pragma unroll
    for (int m = kWidth / 2; m >= 1; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
    return s;
  } else {
    constexpr int M = kWidth / 2;
    const bool upper = (threadIdx.x & M) != 0;
#pragma unroll
    for (int i = 0; i < C / 2; ++i) {  // keep my half, add the partner's copy of it
      const float send = upper ? x[i] : x[i + C / 2];
      const float keep = upper ? x[i + C / 2] : x[i];
      x[i] = keep + __shfl_xor_sync(0xffffffffu, send, M);
    }
    return sum_within_group_transposed<C / 2, M>(x);
  }
}

// ---- programmatic dependent launch (sm_90; launch_tile's early_launch)
// A kernel launched early may run beside the end of the previous kernel on its stream: it waits
// for that kernel's completion and memory before its first read of anything (q, k, v, gates,
// indices and the state may all be that kernel's output), then lets the next kernel be
// scheduled early in turn (which waits likewise: the launch order is unchanged). Without an
// early launch both are no-ops.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// ---- sequences

__device__ __forceinline__ int32_t snapshot_slot(const DecodeParams& p, int64_t n, int64_t tok) {
  return p.snapshot_indices[n * p.snap_idx_seq + tok * p.snap_idx_tok];
}

// What a CTA works on: the grid is (sequence n, value head h, slice of V), slice fastest.
struct CtaWork {
  int64_t n;
  int h;
  int j;      // the key/query head feeding value head h
  int slice;
};

__device__ __forceinline__ CtaWork cta_work(const DecodeParams& p) {
  CtaWork w;
  const unsigned nh = p.by_slices.div(blockIdx.x);  // grid < 2^31 CTAs (decode_launch)
  w.slice = int(blockIdx.x - nh * unsigned(p.slices));
  const unsigned n = p.by_Hv.div(nh);
  w.h = int(nh - n * unsigned(p.Hv));
  w.n = n;
  const unsigned hu = unsigned(w.h);
  w.j = int(p.tiled ? hu - p.by_Hk.div(hu) * unsigned(p.Hk) : p.by_ratio.div(hu));
  return w;
}

// Resolves sequence n and checks every device-resident index entry it uses (SPEC "Errors"):
// those of resolve_span, and snapshot_indices[n, t] in [-1, P2). On an invalid entry it ORs the
// matching GDN_ERROR_FLAG_* into *error_flags and returns false: the caller then writes nothing.
// Every thread of the CTA calls it (it synchronises when snapshot indices are given).
// kMayBePacked / kSnapshots false: a kernel never launched for packed batches / with snapshots
// skips that code.
template <bool kMayBePacked = true, bool kSnapshots = true>
__device__ __forceinline__ bool resolve_sequence(const DecodeParams& p, int64_t n, Sequence& s) {
  uint32_t bad = resolve_span<kMayBePacked>(p, n, s);
  // Snapshot slots of a padded sequence are not used (it writes no state).
  if (kSnapshots && p.snapshot_indices && bad == 0 && s.slot >= 0) bad |= snapshot_indices_flag(p, n, s);
  return valid_or_flagged(p.error_flags, bad);
}

// ---- the held state in and out

// The initial state's chunks into `held`: chunk r at h0 + row(r) * row_stride (h0 already at
// the thread's first column); all R loads issued before any is used. Zeros where h0 is null (no
// initial state, or a padding slot).
template <class S, int R, bool Raw, class RowOf>
__device__ __forceinline__ void load_initial_state(HeldState<S, R, Raw>& held, const S* h0, int64_t row_stride,
                                                   RowOf row, bool streaming) {
  if (h0) {
    uint4 raw[R];
#pragma unroll
    for (int r = 0; r < R; ++r) raw[r] = load_chunk(h0 + int64_t(row(r)) * row_stride, streaming);
#pragma unroll
    for (int r = 0; r < R; ++r) held.load(r, raw[r]);
  } else {
#pragma unroll
    for (int r = 0; r < R; ++r) held.zero(r);
  }
}

// R held chunks to a state tensor: chunk r at dst + row(r) * row_stride (dst already at the
// thread's first column).
template <class S, int R, bool Raw, class RowOf>
__device__ __forceinline__ void store_held(const HeldState<S, R, Raw>& held, S* dst, int64_t row_stride, RowOf row,
                                           bool streaming) {
#pragma unroll
  for (int r = 0; r < R; ++r) store_chunk(dst + int64_t(row(r)) * row_stride, held.stored(r), streaming);
}

// The state after token `tok` of sequence n (its t-th) is kept when a snapshot is asked: where
// (n, tok, h)'s snapshot starts and its row stride, or null (no snapshots, a -1 pool slot, or
// with kCheckpoints not a checkpoint token).
template <class S, bool kCheckpoints = true>
__device__ __forceinline__ S* snapshot_at(const DecodeParams& p, int64_t n, int64_t tok, int64_t t, int h,
                                          int64_t& row_stride) {
  row_stride = 0;
  if (kCheckpoints && p.snap_every > 0 && (t + 1) % p.snap_every != 0) return nullptr;
  if (p.snap_mode == kSnapDense) {
    row_stride = p.snap_row;
    return static_cast<S*>(p.snap_dense.p) + token_offset(p.snap_dense, n, tok, h);
  }
  if (p.snap_mode == kSnapPool) {
    row_stride = p.snap_pool.row;
    const int32_t slot = snapshot_slot(p, n, tok);
    return slot >= 0 ? state_at<S>(p.snap_pool, slot, h) : nullptr;
  }
  return nullptr;
}

}  // namespace gdn::cuda

// gdn_decode_lab: a measurement tool for the CUDA decode kernel (not part of libgdn).
//
// Times, in one device call, the library's decode kernels (decode_vk.cuh, decode_kv.cuh,
// instantiated here) against the lab's register-resident warp-per-rows kernel (b) and a copy
// kernel of the same access pattern (the ceiling of a read + write of the state), each in place
// and into another buffer ("-oop"), at B = 64, 256, 1024. Every computing variant is first
// checked against an f64 CPU reference on sampled (sequence, head) pairs, with o poisoned.
// Each variant runs in a forked child (the parent makes no CUDA call) with a SIGILL / SIGSEGV /
// SIGBUS / SIGABRT handler that prints the faulting address, its module and nearest symbol.
// (The first lab run settled the SIGILL of the v2 staged kernel's tiles: every tile passed here,
// docs/NOTES.md.)
// Problem: Hk = 16, Hv = 32, K = V = 128, T = 1, f32 q/k/v/g/beta/o, f32 state,
// gate log_decay, head map block, no l2norm, scale 1/sqrt(K). Output: a log, then the table.
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/ucontext.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/decode_kv.cuh"
#include "cuda/decode_vk.cuh"

namespace {

using gdn::cuda::DecodeParams;

constexpr int Hk = 16, Hv = 32, K = 128, V = 128, K4 = K / 4;
constexpr int64_t kHeadElems = int64_t(V) * K;  // one (sequence, head) state
constexpr double kTol = 1e-4;                    // rel L2 vs f64: f32 sums of 128 terms land near 1e-6
constexpr int kBatches[] = {64, 256, 1024};
constexpr int kLaunchesPerGraph = 10, kReplays = 20;

// ---------------------------------------------------------------- reporting to the parent

int g_pipe = -1;  // write end of this child's pipe to the parent

void emit(const char* fmt, ...) {  // one line to stdout and to the parent
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  n = std::min(std::max(n, 0), int(sizeof buf) - 2);
  buf[n++] = '\n';
  fwrite(buf, 1, size_t(n), stdout);
  fflush(stdout);
  if (g_pipe >= 0 && write(g_pipe, buf, size_t(n)) < 0) {}
}

// The fatal-signal handler: pc, si_addr, module and nearest symbol of both, the 16 bytes at pc,
// a backtrace; then _exit(128 + sig) (132 for SIGILL, like the default action's status).
void describe(const char* what, void* addr, char* out, size_t size) {
  Dl_info info{};
  if (addr && dladdr(addr, &info) && info.dli_fname) {
    const uintptr_t base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    const uintptr_t sym = reinterpret_cast<uintptr_t>(info.dli_saddr);
    snprintf(out, size, "%s=%p module=%s+0x%lx symbol=%s+0x%lx", what, addr, info.dli_fname,
             static_cast<unsigned long>(reinterpret_cast<uintptr_t>(addr) - base),
             info.dli_sname ? info.dli_sname : "?",
             static_cast<unsigned long>(sym ? reinterpret_cast<uintptr_t>(addr) - sym : 0));
  } else {
    snprintf(out, size, "%s=%p module=? (not in a loaded object: JIT or anonymous memory)", what, addr);
  }
}

void on_fatal(int sig, siginfo_t* si, void* ctx) {
  void* pc = reinterpret_cast<void*>(static_cast<ucontext_t*>(ctx)->uc_mcontext.gregs[REG_RIP]);
  char a[400], b[400], bytes[64] = "";
  describe("pc", pc, a, sizeof a);
  describe("si_addr", si->si_addr, b, sizeof b);
  Dl_info info{};
  if (dladdr(pc, &info)) {  // pc lies in a mapped object: its instruction bytes are readable
    const unsigned char* p = static_cast<const unsigned char*>(pc);
    for (int i = 0; i < 12; ++i) snprintf(bytes + 3 * i, 4, "%02x ", p[i]);
  }
  emit("SIG %s (%d) code=%d tid=%ld %s | %s | bytes at pc: %s", strsignal(sig), sig, si->si_code,
       long(gettid()), a, b, bytes);
  void* frames[32];
  const int n = backtrace(frames, 32);
  backtrace_symbols_fd(frames, n, STDOUT_FILENO);
  _exit(128 + sig);
}

void install_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGILL, SIGSEGV, SIGBUS, SIGABRT, SIGFPE}) sigaction(sig, &sa, nullptr);
}

#define CK(call)                                                                          \
  do {                                                                                    \
    const cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                              \
      emit("CUDA error %s at %s:%d: %s", cudaGetErrorName(e_), __FILE__, __LINE__, #call); \
      _exit(3);                                                                           \
    }                                                                                     \
  } while (0)

// ---------------------------------------------------------------- inputs and the reference

struct Rng {  // splitmix64
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
  double normal() { return std::sqrt(-2 * std::log(1 - uniform())) * std::cos(6.283185307179586 * uniform()); }
};

struct HostInputs {  // [N, Hk, K] q, k; [N, Hv, V] v; [N, Hv] g, beta (T = 1)
  std::vector<float> q, k, v, g, beta;
};

HostInputs make_inputs(int N, uint64_t seed) {
  Rng r{seed};
  HostInputs in;
  auto fill = [&](std::vector<float>& x, size_t n, auto gen) {
    x.resize(n);
    for (auto& e : x) e = float(gen());
  };
  const double qk = 1 / std::sqrt(double(K));  // |q|, |k| near 1: the state stays bounded in place
  fill(in.q, size_t(N) * Hk * K, [&] { return qk * r.normal(); });
  fill(in.k, size_t(N) * Hk * K, [&] { return qk * r.normal(); });
  fill(in.v, size_t(N) * Hv * V, [&] { return r.normal(); });
  fill(in.g, size_t(N) * Hv, [&] { return -0.02 - 0.7 * r.uniform(); });  // alpha = exp(g) in (0.5, 0.98)
  fill(in.beta, size_t(N) * Hv, [&] { return 0.1 + 0.8 * r.uniform(); });
  return in;
}

// One decode step of (n, h) in f64 (SPEC "The recurrence"); s0/s1 in the stored layout.
void reference(const HostInputs& in, int n, int h, bool kv, const std::vector<float>& s0,
               std::vector<double>& o, std::vector<double>& s1) {
  const int j = h / (Hv / Hk);
  const float* q = &in.q[(size_t(n) * Hk + j) * K];
  const float* k = &in.k[(size_t(n) * Hk + j) * K];
  const double alpha = std::exp(double(in.g[size_t(n) * Hv + h])), beta = in.beta[size_t(n) * Hv + h];
  auto at = [&](int v, int c) { return kv ? size_t(c) * V + v : size_t(v) * K + c; };
  s1.assign(kHeadElems, 0);
  o.assign(V, 0);
  for (int v = 0; v < V; ++v) {
    double a = 0;
    for (int c = 0; c < K; ++c) a += alpha * s0[at(v, c)] * k[c];        // (alpha S k)_v
    const double delta = beta * (in.v[(size_t(n) * Hv + h) * V + v] - a);  // beta (v - alpha S k)
    double out = 0;
    for (int c = 0; c < K; ++c) {
      s1[at(v, c)] = alpha * s0[at(v, c)] + delta * k[c];  // S' = alpha S + delta k^T
      out += s1[at(v, c)] * q[c];
    }
    o[v] = out / std::sqrt(double(K));  // o = scale S' q
  }
}

double rel_l2(const std::vector<double>& ref, const float* got, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-300)) : INFINITY;
}

// ---------------------------------------------------------------- device buffers

__global__ void fill_state(float* s, int64_t count, uint32_t seed) {  // uniform in [-0.5, 0.5)
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 0x9e3779b9u ^ uint32_t(i >> 32) * 0x85ebca6bu ^ seed;
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    s[i] = float(x >> 8) * 0x1.0p-24f - 0.5f;
  }
}

struct Device {
  int N = 0, nbuf = 0;
  HostInputs in;
  float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr, *o = nullptr;
  std::vector<float*> state;  // nbuf state buffers [N, Hv, V, K] (rotated: more than L2 in total)
  uint32_t* flags = nullptr;

  int64_t state_elems() const { return int64_t(N) * Hv * kHeadElems; }
  int64_t state_bytes() const { return state_elems() * 4; }

  Device(int n, int min_bufs) : N(n), in(make_inputs(n, 0x5eed0000u + uint64_t(n))) {
    auto up = [](float*& d, const std::vector<float>& h) {
      CK(cudaMalloc(&d, h.size() * 4));
      CK(cudaMemcpy(d, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    };
    up(q, in.q); up(k, in.k); up(v, in.v); up(g, in.g); up(beta, in.beta);
    CK(cudaMalloc(&o, size_t(N) * Hv * V * 4));
    CK(cudaMalloc(&flags, 4));
    CK(cudaMemset(flags, 0, 4));
    // 4 x the 60 MB L2 over the buffers a graph rotates through
    const int64_t want = 256ll << 20;
    nbuf = std::max<int>(min_bufs, int((want + state_bytes() - 1) / state_bytes()));
    state.resize(size_t(nbuf));
    for (auto& s : state) {
      CK(cudaMalloc(&s, size_t(state_bytes())));
      fill_state<<<1024, 256>>>(s, state_elems(), 0x1234u + uint32_t(&s - state.data()));
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
  }
  ~Device() {
    for (float* p : {q, k, v, g, beta, o}) cudaFree(p);
    for (float* s : state) cudaFree(s);
    cudaFree(flags);
  }
};

// ---------------------------------------------------------------- the library's kernels

DecodeParams lib_params(const Device& d, float* state, float* state_out, bool kv) {
  DecodeParams p;
  p.N = d.N; p.T = 1; p.T_total = d.N;
  p.Hk = Hk; p.Hv = Hv; p.K = K; p.V = V; p.ratio = Hv / Hk;
  p.slices = V / gdn::cuda::decode_per_cta(kv, K, 4);
  p.q = {d.q, int64_t(Hk) * K, int64_t(Hk) * K, K, GDN_DTYPE_F32};
  p.k = {d.k, int64_t(Hk) * K, int64_t(Hk) * K, K, GDN_DTYPE_F32};
  p.v = {d.v, int64_t(Hv) * V, int64_t(Hv) * V, V, GDN_DTYPE_F32};
  p.o = {d.o, int64_t(Hv) * V, int64_t(Hv) * V, V, GDN_DTYPE_F32};
  p.g = {d.g, Hv, Hv, 1, GDN_DTYPE_F32};
  p.beta = {d.beta, Hv, Hv, 1, GDN_DTYPE_F32};
  p.h0 = {state, Hv * kHeadElems, kHeadElems, kv ? V : K};
  p.ht = p.h0;
  p.ht.p = state_out;  // state: in place
  p.error_flags = d.flags;
  p.gate = GDN_GATE_LOG_DECAY;
  p.scale = 1.f / std::sqrt(float(K));
  gdn::cuda::set_grid_divisors(p);
  return p;
}

const void* lib_kernel_ptr(bool kv) {
  return kv ? reinterpret_cast<const void*>(&gdn::cuda::decode_kv_kernel<K, float, false>)
            : reinterpret_cast<const void*>(&gdn::cuda::decode_vk_kernel<K, float, false>);
}

cudaError_t launch_lib(bool kv, const DecodeParams& p, cudaStream_t s) {
  const dim3 grid(unsigned(p.N * p.Hv * p.slices));
  if (kv)
    gdn::cuda::decode_kv_kernel<K, float, false><<<grid, gdn::cuda::decode_threads(true), 0, s>>>(p);
  else
    gdn::cuda::decode_vk_kernel<K, float, false><<<grid, gdn::cuda::decode_threads(false), 0, s>>>(p);
  return cudaGetLastError();
}

// ---------------------------------------------------------------- variants b and c (vk, f32)
//
// A warp owns H consecutive state rows of one (n, h) (a "tile"); lane l holds columns
// [4l, 4l + 4) of each row as one float4, loaded with ld.global.cs and stored with st.global.cs.

struct LabArgs {
  float* state;      // [N, Hv, V, K]
  float* state_out;  // where the new state goes: state (in place) or another buffer
  const float *q, *k, *v, *g, *beta;
  float* o;
  int64_t rows;  // N * Hv * V
  float scale;
};

// x[0, C) summed over the warp, transposed: each step m hands half of the values to the lane
// across bit m, so C - 1 + (5 - log2 C) shuffles instead of 5 C; afterwards lane l holds the
// total of value l >> (5 - log2 C). C: a power of two <= 32.
template <int C, int M = 16>
__device__ __forceinline__ float warp_sum_transposed(float* x, int lane) {
  if constexpr (C == 1) {
    float s = x[0];
#pragma unroll
    for (int m = M; m >= 1; m /= 2) s += __shfl_xor_sync(0xffffffffu, s, m);
    return s;
  } else {
    const bool upper = lane & M;
#pragma unroll
    for (int i = 0; i < C / 2; ++i) {  // keep my half, add the partner's copy of it
      const float send = upper ? x[i] : x[i + C / 2];
      const float keep = upper ? x[i + C / 2] : x[i];
      x[i] = keep + __shfl_xor_sync(0xffffffffu, send, M);
    }
    return warp_sum_transposed<C / 2, M / 2>(x, lane);
  }
}

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
}

constexpr int ilog2(int x) { return x <= 1 ? 0 : 1 + ilog2(x / 2); }

template <int H>
__device__ __forceinline__ void load_rows(const LabArgs& a, int64_t tile, int lane, float4 (&x)[H]) {
  const float4* s = reinterpret_cast<const float4*>(a.state) + tile * H * K4 + lane;
#pragma unroll
  for (int r = 0; r < H; ++r) x[r] = __ldcs(s + r * K4);  // all H rows in flight before any use
}

// One decode step of tile `tile`'s H rows, held in x (this lane's float4 of each).
template <int H>
__device__ __forceinline__ void update_rows(const LabArgs& a, int64_t tile, int lane, float4 (&x)[H]) {
  constexpr int C = 2 * H, SH = 5 - ilog2(C);  // sums per row: a = S k, b = S q
  const int64_t row0 = tile * H, nh = row0 / V;  // first global row, (n, h) pair
  const int n = int(nh / Hv), h = int(nh % Hv), j = h / (Hv / Hk);
  const float4 kk = __ldg(reinterpret_cast<const float4*>(a.k) + (int64_t(n) * Hk + j) * K4 + lane);
  const float4 qq = __ldg(reinterpret_cast<const float4*>(a.q) + (int64_t(n) * Hk + j) * K4 + lane);
  const float alpha = __expf(__ldg(a.g + nh)), beta = __ldg(a.beta + nh);
  float kq[1] = {dot4(kk, qq)};
  const float k_q = warp_sum_transposed<1>(kq, lane);  // k . q, once per tile
  float sum[C];
#pragma unroll
  for (int r = 0; r < H; ++r) {
    sum[r] = dot4(x[r], kk);      // (S k)_r
    sum[H + r] = dot4(x[r], qq);  // (S q)_r
  }
  const float tot = warp_sum_transposed<C>(sum, lane);
  const int idx = lane >> SH, r_own = idx % H;  // this lane holds sum idx, of row r_own
  const float vr = __ldg(a.v + row0 + r_own);
  float delta = beta * (vr - alpha * tot);                          // a-lanes: beta (v - alpha S k)
  delta = __shfl_sync(0xffffffffu, delta, r_own << SH);             // every lane: delta of row r_own
  const float out = a.scale * (alpha * tot + delta * k_q);          // b-lanes: scale (alpha S q + delta k.q)
  if (idx >= H && (lane & ((1 << SH) - 1)) == 0) a.o[row0 + r_own] = out;
  float4* s = reinterpret_cast<float4*>(a.state_out) + row0 * K4 + lane;
#pragma unroll
  for (int r = 0; r < H; ++r) {
    const float d = __shfl_sync(0xffffffffu, delta, r << SH);
    const float4 y = make_float4(alpha * x[r].x + d * kk.x, alpha * x[r].y + d * kk.y,  // S' = alpha S + delta k^T
                                 alpha * x[r].z + d * kk.z, alpha * x[r].w + d * kk.w);
    __stcs(s + r * K4, y);
  }
}

// (b) One tile of R rows per warp, 4 warps per CTA, one launch covers all rows.
template <int R>
__global__ void __launch_bounds__(128) lab_reg_kernel(const LabArgs a) {
  const int64_t tile = blockIdx.x * 4ll + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  float4 x[R];
  load_rows<R>(a, tile, lane, x);
  update_rows<R>(a, tile, lane, x);
}

// The copy ceiling of this access pattern: (b)'s loads and stores of R rows per warp, no
// arithmetic (state_out = state: read and write the same bytes, as an in-place update does).
template <int R>
__global__ void __launch_bounds__(128) lab_copy_kernel(const LabArgs a) {
  const int64_t tile = blockIdx.x * 4ll + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  float4 x[R];
  load_rows<R>(a, tile, lane, x);
  float4* s = reinterpret_cast<float4*>(a.state_out) + tile * R * K4 + lane;
#pragma unroll
  for (int r = 0; r < R; ++r) __stcs(s + r * K4, x[r]);
}

// The copy with plain 16-byte loads and stores (the library's hints from 256 MiB of state) and
// the CTAs' order over the state permuted (kOrder): 0 in order; 1 CTAs 2b and 2b + 1 take
// blocks b and nb / 2 + b (two address ranges far apart in flight at once); 2 block (b x 40503)
// mod nb (nb a power of two: scattered over the whole buffer). Whether an in-place update's
// cost against another buffer depends on where its reads and writes fall at one time.
template <int R, bool kPlain, int kOrder>
__global__ void __launch_bounds__(128) lab_copy_order_kernel(const LabArgs a) {
  const int64_t nb = gridDim.x, b = blockIdx.x;
  const int64_t block = kOrder == 1 ? ((b & 1) ? nb / 2 + b / 2 : b / 2) : kOrder == 2 ? (b * 40503) & (nb - 1) : b;
  const int64_t tile = block * 4 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const float4* src = reinterpret_cast<const float4*>(a.state) + tile * R * K4 + lane;
  float4* dst = reinterpret_cast<float4*>(a.state_out) + tile * R * K4 + lane;
  float4 x[R];
#pragma unroll
  for (int r = 0; r < R; ++r) x[r] = kPlain ? src[r * K4] : __ldcs(src + r * K4);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (kPlain)
      dst[r * K4] = x[r];
    else
      __stcs(dst + r * K4, x[r]);
  }
}

// ---------------------------------------------------------------- variants, launched uniformly

enum Kind { kLibVk, kLibKv, kReg, kCopy, kCopyPlain0, kCopyPlain1, kCopyPlain2, kCopyCs2 };

struct Variant {
  Kind kind;
  int tile;         // R (b, copy); 0 for the library's kernels
  bool oop = false;  // the new state to another buffer (else in place)
  std::string name() const {
    char b[48];
    if (kind == kLibVk || kind == kLibKv)
      snprintf(b, sizeof b, "%s%s", kind == kLibVk ? "lib-vk" : "lib-kv", oop ? "-oop" : "");
    else if (kind >= kCopyPlain0)
      snprintf(b, sizeof b, "copy%s-R%d-order%d%s", kind == kCopyCs2 ? "cs" : "plain", tile,
               kind == kCopyCs2 ? 2 : int(kind - kCopyPlain0), oop ? "-oop" : "");
    else
      snprintf(b, sizeof b, "%s%d%s", kind == kReg ? "b-reg-R" : "copy-R", tile, oop ? "-oop" : "");
    return b;
  }
  bool kv() const { return kind == kLibKv; }
};

const void* variant_kernel(const Variant& v) {
  if (v.kind == kLibVk || v.kind == kLibKv) return lib_kernel_ptr(v.kv());
  switch (v.kind) {
    case kCopyPlain0: return (const void*)&lab_copy_order_kernel<8, true, 0>;
    case kCopyPlain1: return (const void*)&lab_copy_order_kernel<8, true, 1>;
    case kCopyPlain2: return (const void*)&lab_copy_order_kernel<8, true, 2>;
    case kCopyCs2: return (const void*)&lab_copy_order_kernel<8, false, 2>;
    default: break;
  }
  switch (v.tile) {
    case 4: return v.kind == kReg ? (const void*)&lab_reg_kernel<4> : (const void*)&lab_copy_kernel<4>;
    case 8: return v.kind == kReg ? (const void*)&lab_reg_kernel<8> : (const void*)&lab_copy_kernel<8>;
    default: return nullptr;
  }
}

int ctas_per_sm(const Variant& v) {
  int blocks = 0;
  const int threads = v.kind == kLibVk ? gdn::cuda::decode_threads(false) : 128;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, variant_kernel(v), threads, 0));
  return blocks;
}

// State bytes one CTA has in flight after issuing its loads.
int inflight_bytes_per_cta(const Variant& v) {
  if (v.kind == kLibVk || v.kind == kLibKv) return gdn::cuda::decode_per_cta(v.kv(), K, 4) * K * 4;
  return 4 * v.tile * K * 4;
}

cudaError_t launch_variant(const Variant& v, const Device& d, float* state, float* state_out, cudaStream_t s) {
  if (v.kind == kLibVk || v.kind == kLibKv) return launch_lib(v.kv(), lib_params(d, state, state_out, v.kv()), s);
  const LabArgs a{state, state_out, d.q, d.k, d.v, d.g, d.beta, d.o, int64_t(d.N) * Hv * V, 1.f / std::sqrt(float(K))};
  const dim3 grid(unsigned(a.rows / v.tile / 4));
  if (v.kind == kReg && v.tile == 4) lab_reg_kernel<4><<<grid, 128, 0, s>>>(a);
  if (v.kind == kReg && v.tile == 8) lab_reg_kernel<8><<<grid, 128, 0, s>>>(a);
  if (v.kind == kCopy && v.tile == 4) lab_copy_kernel<4><<<grid, 128, 0, s>>>(a);
  if (v.kind == kCopy && v.tile == 8) lab_copy_kernel<8><<<grid, 128, 0, s>>>(a);
  if (v.kind == kCopyPlain0) lab_copy_order_kernel<8, true, 0><<<grid, 128, 0, s>>>(a);
  if (v.kind == kCopyPlain1) lab_copy_order_kernel<8, true, 1><<<grid, 128, 0, s>>>(a);
  if (v.kind == kCopyPlain2) lab_copy_order_kernel<8, true, 2><<<grid, 128, 0, s>>>(a);
  if (v.kind == kCopyCs2) lab_copy_order_kernel<8, false, 2><<<grid, 128, 0, s>>>(a);
  return cudaGetLastError();
}

// One step from buffer 0 against the f64 reference on sampled (n, h) pairs; the whole o must be
// written (poisoned with NaN first). Returns whether it passed; fills the error figures.
struct Check {
  cudaError_t launch = cudaSuccess, sync = cudaSuccess;
  uint32_t flags = 0;
  int64_t unwritten = 0;
  double o_err = 0, s_err = 0;
  bool ok() const { return launch == cudaSuccess && sync == cudaSuccess && !flags && !unwritten && o_err < kTol && s_err < kTol; }
};

Check check_variant(const Variant& v, Device& d) {
  if (v.kind == kCopy || v.kind >= kCopyPlain0) return Check{};  // moves bytes only
  const int pairs[][2] = {{0, 0}, {0, Hv - 1}, {d.N - 1, 0}, {d.N - 1, Hv - 1}, {d.N / 2, 5}, {d.N / 3, 17}, {1, 22}, {d.N - 2, 9}};
  constexpr int P = sizeof pairs / sizeof pairs[0];
  fill_state<<<1024, 256>>>(d.state[0], d.state_elems(), 0xc0ffeeu + uint32_t(v.tile));
  CK(cudaGetLastError());
  CK(cudaMemset(d.o, 0xff, size_t(d.N) * Hv * V * 4));  // NaN
  CK(cudaMemset(d.flags, 0, 4));
  std::vector<std::vector<float>> s0(P, std::vector<float>(kHeadElems)), s1 = s0;
  auto head = [&](int i) { return d.state[0] + (int64_t(pairs[i][0]) * Hv + pairs[i][1]) * kHeadElems; };
  for (int i = 0; i < P; ++i) CK(cudaMemcpy(s0[i].data(), head(i), kHeadElems * 4, cudaMemcpyDeviceToHost));
  Check c;
  float* out = v.oop ? d.state[1] : d.state[0];
  c.launch = launch_variant(v, d, d.state[0], out, nullptr);
  c.sync = cudaDeviceSynchronize();
  if (c.launch != cudaSuccess || c.sync != cudaSuccess) return c;
  std::vector<float> o(size_t(d.N) * Hv * V);
  CK(cudaMemcpy(o.data(), d.o, o.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&c.flags, d.flags, 4, cudaMemcpyDeviceToHost));
  for (float x : o) c.unwritten += std::isnan(x);
  std::vector<double> ro, rs;
  for (int i = 0; i < P; ++i) {
    CK(cudaMemcpy(s1[i].data(), head(i) + (out - d.state[0]), kHeadElems * 4, cudaMemcpyDeviceToHost));
    reference(d.in, pairs[i][0], pairs[i][1], v.kv(), s0[i], ro, rs);
    c.o_err = std::max(c.o_err, rel_l2(ro, &o[(size_t(pairs[i][0]) * Hv + pairs[i][1]) * V], V));
    c.s_err = std::max(c.s_err, rel_l2(rs, s1[i].data(), kHeadElems));
  }
  return c;
}

// Median microseconds of one launch: a graph of kLaunchesPerGraph launches rotating over the
// state buffers, kReplays timed replays after 3 warm-up ones.
template <class F>
double time_graph(F&& launch_i) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunchesPerGraph; ++i) CK(launch_i(i, s));
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(exec, s));
  std::vector<float> ms;
  for (int i = 0; i < kReplays; ++i) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(exec, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float t = 0;
    CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CK(cudaGetLastError());
  std::sort(ms.begin(), ms.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  return 1e3 * ms[ms.size() / 2] / kLaunchesPerGraph;
}

// ---------------------------------------------------------------- jobs (each in a child)

int job_time(const Variant& v) {
  CK(cudaFree(nullptr));
  cudaFuncAttributes fa{};
  CK(cudaFuncGetAttributes(&fa, variant_kernel(v)));
  const int occ = ctas_per_sm(v);
  for (int B : kBatches) {
    Device d(B, 2);
    const Check c = check_variant(v, d);
    if (!c.ok()) {
      emit("ROW %s %d - - FAIL regs=%d,ctas/SM=%d,o_rel=%.1e,s_rel=%.1e,%s/%s", v.name().c_str(), B, fa.numRegs, occ,
           c.o_err, c.s_err, cudaGetErrorName(c.launch), cudaGetErrorName(c.sync));
      continue;
    }
    const double us = time_graph([&](int i, cudaStream_t s) {
      float* in = d.state[size_t(i % d.nbuf)];
      return launch_variant(v, d, in, v.oop ? d.state[size_t((i + 1) % d.nbuf)] : in, s);
    });
    const double gbs = 2.0 * double(d.state_bytes()) / (us * 1e3);
    emit("ROW %s %d %.2f %.0f ok regs=%d,ctas/SM=%d,KiB/SM=%d,o_rel=%.1e,s_rel=%.1e", v.name().c_str(), B, us, gbs,
         fa.numRegs, occ, occ * inflight_bytes_per_cta(v) / 1024, c.o_err, c.s_err);
  }
  return 0;
}

// ---------------------------------------------------------------- the parent

struct Outcome {
  int status = 0;            // exit status, or 128 + signal
  std::string text;          // what the child sent through its pipe
};

template <class F>
Outcome in_child(const char* title, F&& job) {
  printf("\n==== %s\n", title);
  fflush(stdout);
  int fd[2];
  if (pipe(fd) != 0) { perror("pipe"); exit(2); }
  const pid_t pid = fork();
  if (pid == 0) {  // the child: its own CUDA context, a watchdog, the handlers
    close(fd[0]);
    g_pipe = fd[1];
    install_handlers();
    alarm(60);
    _exit(job());
  }
  close(fd[1]);
  Outcome out;
  char buf[4096];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) out.text.append(buf, size_t(n));
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  out.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (WIFSIGNALED(st)) printf("(child killed by signal %d: %s)\n", WTERMSIG(st), strsignal(WTERMSIG(st)));
  return out;
}

std::vector<std::string> lines_with(const std::string& text, const char* prefix) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(strlen(prefix)));
    at = end + 1;
  }
  return out;
}

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  // every variant at every B, one child each (a fault in one leaves the others' figures)
  std::vector<Variant> timed = {{kCopy, 4}, {kCopy, 4, true}, {kCopy, 8}, {kLibVk, 0}, {kLibVk, 0, true},
                                {kLibKv, 0}, {kLibKv, 0, true}, {kReg, 4}, {kReg, 4, true}, {kReg, 8}};
  // DECODE_LAB_SET=order: the copies in place and into another buffer, by hints and CTA order
  if (const char* set = getenv("DECODE_LAB_SET"); set && std::string(set) == "order")
    timed = {{kCopy, 8},         {kCopy, 8, true},       {kCopyPlain0, 8}, {kCopyPlain0, 8, true}, {kCopyPlain1, 8},
             {kCopyPlain2, 8},   {kCopyPlain2, 8, true}, {kCopyCs2, 8},    {kLibVk, 0},            {kLibVk, 0, true}};
  std::vector<std::string> rows;
  for (const Variant& v : timed) {
    const Outcome o = in_child(("time " + v.name()).c_str(), [&] { return job_time(v); });
    for (const auto& r : lines_with(o.text, "ROW ")) rows.push_back(r);
    if (o.status != 0) {
      char b[160];
      snprintf(b, sizeof b, "%s - - - DIED status=%d%s", v.name().c_str(), o.status,
               lines_with(o.text, "SIG ").empty() ? "" : (" " + lines_with(o.text, "SIG ")[0]).substr(0, 100).c_str());
      rows.push_back(b);
    }
  }

  printf("\n================ decode lab (Hk=%d, Hv=%d, K=V=%d, f32 state; GB/s of state read + written)\n", Hk, Hv, K);
  printf("%-16s %5s %10s %7s %-7s %s\n", "variant", "B", "us", "GB/s", "correct", "notes");
  for (const auto& r : rows) {
    char name[64] = "", us[32] = "", gbs[32] = "", ok[32] = "", notes[600] = "";
    int B = 0;
    if (sscanf(r.c_str(), "%63s %d %31s %31s %31s %599[^\n]", name, &B, us, gbs, ok, notes) < 5) {
      printf("%s\n", r.c_str());
      continue;
    }
    printf("%-16s %5d %10s %7s %-7s %s\n", name, B, us, gbs, ok, notes);
  }
  return 0;
}

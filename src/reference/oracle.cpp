// The f64 oracle: SPEC.md's recurrence, line by line, for every option. Every other backend is
// checked against it, so it stays plain: one (sequence, value head) at a time, in double.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/dtype.h"

namespace gdn {
namespace {

// ---- elements of any floating dtype, as double

double load(const void* data, gdn_dtype dtype, int64_t i) {
  switch (dtype) {
    case GDN_DTYPE_F32: return static_cast<const float*>(data)[i];
    case GDN_DTYPE_BF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case GDN_DTYPE_F16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case GDN_DTYPE_F64: return static_cast<const double*>(data)[i];
    default: return NAN;  // validation admits floating dtypes only
  }
}

// x rounded to f32 with round-to-odd. Rounding that to bf16 or f16 (at least 13 bits shorter)
// then rounds x correctly: no double-rounding error.
float round_to_odd_f32(double x) {
  float f = static_cast<float>(x);
  if (double(f) == x || !std::isfinite(f)) return f;
  if (std::fabs(double(f)) > std::fabs(x)) f = std::nextafter(f, 0.f);  // truncate toward zero
  return bits_f32(f32_bits(f) | 1u);                                    // inexact: make it odd
}

// Stores x rounded once to nearest-even in `dtype`.
void store(void* data, gdn_dtype dtype, int64_t i, double x) {
  switch (dtype) {
    case GDN_DTYPE_F32: static_cast<float*>(data)[i] = static_cast<float>(x); break;
    case GDN_DTYPE_BF16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(round_to_odd_f32(x)); break;
    case GDN_DTYPE_F16: static_cast<uint16_t*>(data)[i] = f32_to_f16(round_to_odd_f32(x)); break;
    case GDN_DTYPE_F64: static_cast<double*>(data)[i] = x; break;
    default: break;  // validation admits floating dtypes only
  }
}

// ---- addressing (problem.h)

// Offset of element (n, token, h, 0) of a per-token tensor; `token` counts from the batch start
// when packed (bos(n) + t) and from the sequence start when dense.
int64_t token_at(const TokenTensor& x, int64_t n, int64_t token, int64_t h) {
  return n * x.seq + token * x.tok + h * x.head;
}

int64_t cu_seqlen(const Problem& p, int64_t n) {
  return p.cu_seqlens_dtype == GDN_DTYPE_I64 ? static_cast<const int64_t*>(p.cu_seqlens)[n]
                                             : static_cast<const int32_t*>(p.cu_seqlens)[n];
}

// S is V x K, S[v * K + k]. In memory its element (v, k) sits at row v, column k (vk) or at
// row k, column v (kv) of one head's state, with `row` elements between rows.
int64_t state_offset(const Problem& p, int64_t row, int64_t v, int64_t k) {
  return p.state_layout == GDN_STATE_VK ? v * row + k : k * row + v;
}

void load_state(const Problem& p, const void* data, gdn_dtype dtype, int64_t base, int64_t row,
                double* S) {
  for (int64_t v = 0; v < p.V; ++v)
    for (int64_t k = 0; k < p.K; ++k)
      S[v * p.K + k] = load(data, dtype, base + state_offset(p, row, v, k));
}

void store_state(const Problem& p, void* data, gdn_dtype dtype, int64_t base, int64_t row,
                 const double* S) {
  for (int64_t v = 0; v < p.V; ++v)
    for (int64_t k = 0; k < p.K; ++k)
      store(data, dtype, base + state_offset(p, row, v, k), S[v * p.K + k]);
}

// ---- the recurrence's scalars

double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

// log(alpha) of value head h at this token, by gate:
//   log_decay: g    decay_rate: -g    raw: -exp(A_log[h]) * softplus(a + dt_bias[h])
double log_alpha(const Problem& p, int64_t n, int64_t token, int64_t h) {
  switch (p.gate) {
    case GDN_GATE_LOG_DECAY: return load(p.g.data, p.g.dtype, token_at(p.g, n, token, h));
    case GDN_GATE_DECAY_RATE: return -load(p.g.data, p.g.dtype, token_at(p.g, n, token, h));
    case GDN_GATE_RAW: {
      const double a = load(p.a.data, p.a.dtype, token_at(p.a, n, token, h));
      const double A_log = load(p.A_log.data, p.A_log.dtype, h * p.A_log.stride);
      const double dt_bias = load(p.dt_bias.data, p.dt_bias.dtype, h * p.dt_bias.stride);
      return -std::exp(A_log) * softplus(a + dt_bias);
    }
  }
  return NAN;
}

double beta_of(const Problem& p, int64_t n, int64_t token, int64_t h) {
  const double b = load(p.beta.data, p.beta.dtype, token_at(p.beta, n, token, h));
  return p.beta_mode == GDN_BETA_LOGIT ? 1 / (1 + std::exp(-b)) : b;
}

// x <- x * 1/sqrt(sum(x^2) + 1e-6)
void l2normalize(double* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
  const double inv = 1 / std::sqrt(sum + 1e-6);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// ---- one sequence n, one value head h

// scratch: V*K + 2K + V doubles.
void run_head(const Problem& p, int64_t n, int64_t h, double* scratch) {
  const int64_t K = p.K, V = p.V;
  double* S = scratch;    // [V, K]
  double* q = S + V * K;  // [K]
  double* k = q + K;      // [K]
  double* delta = k + K;  // [V]
  const int64_t bos = p.packed ? cu_seqlen(p, n) : 0;
  const int64_t T = p.packed ? cu_seqlen(p, n + 1) - bos : p.T;
  const int64_t slot = p.state_indices ? p.state_indices[n * p.state_indices_stride] : n;
  const int64_t j = p.key_head(h);

  // A padding entry: zero outputs; no state is read or written (snapshots included).
  if (slot == -1) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < V; ++i)
        store(p.o.data, p.o.dtype, token_at(p.o, n, bos + t, h) + i, 0.0);
    return;
  }

  const StateTensor& h0 = p.initial_state;
  if (h0.data)
    load_state(p, h0.data, h0.dtype, slot * h0.slot + h * h0.head, h0.row, S);
  else
    for (int64_t i = 0; i < V * K; ++i) S[i] = 0;

  for (int64_t t = 0; t < T; ++t) {
    const int64_t token = bos + t;
    for (int64_t i = 0; i < K; ++i) {
      q[i] = load(p.q.data, p.q.dtype, token_at(p.q, n, token, j) + i);
      k[i] = load(p.k.data, p.k.dtype, token_at(p.k, n, token, j) + i);
    }
    if (p.qk_l2norm) {
      l2normalize(q, K);
      l2normalize(k, K);
    }
    const double alpha = std::exp(log_alpha(p, n, token, h));
    const double beta = beta_of(p, n, token, h);

    // (S[r * K + c]: r a value index, c a key index)
    // S = alpha * S                         (decay first)
    for (int64_t i = 0; i < V * K; ++i) S[i] *= alpha;
    // delta = beta * (v - S k)
    for (int64_t r = 0; r < V; ++r) {
      double Sk = 0;
      for (int64_t c = 0; c < K; ++c) Sk += S[r * K + c] * k[c];
      delta[r] = beta * (load(p.v.data, p.v.dtype, token_at(p.v, n, token, h) + r) - Sk);
    }
    // S = S + delta k^T
    for (int64_t r = 0; r < V; ++r)
      for (int64_t c = 0; c < K; ++c) S[r * K + c] += delta[r] * k[c];
    // o = scale * S q
    for (int64_t r = 0; r < V; ++r) {
      double Sq = 0;
      for (int64_t c = 0; c < K; ++c) Sq += S[r * K + c] * q[c];
      store(p.o.data, p.o.dtype, token_at(p.o, n, token, h) + r, double(p.scale) * Sq);
    }

    // the state after this token: dense [.., T, Hv, R, C], or pool slot snapshot_indices[n, t]
    // (with checkpoints, only after every checkpoint_tokens tokens)
    if (!p.snapshot_after(t)) continue;
    if (p.snapshots_dense.data) {
      const TokenTensor& s = p.snapshots_dense;
      store_state(p, s.data, s.dtype, token_at(s, n, token, h), s.row, S);
    } else if (p.snapshots_pool.data) {
      const TokenTensor& at = p.snapshot_index_strides;
      const int64_t snap_slot = p.snapshot_indices[n * at.seq + token * at.tok];
      const StateTensor& s = p.snapshots_pool;
      if (snap_slot != -1)
        store_state(p, s.data, s.dtype, snap_slot * s.slot + h * s.head, s.row, S);
    }
  }

  const StateTensor& ht = p.final_state;
  if (ht.data) store_state(p, ht.data, ht.dtype, slot * ht.slot + h * ht.head, ht.row, S);
}

}  // namespace

gdn_status reference_forward(const Problem& p) {
  const int threads = p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
  const int64_t per_head = p.V * p.K + 2 * p.K + p.V;
  std::vector<double> scratch(size_t(threads) * size_t(per_head));  // one slice per thread
  const int64_t heads = p.N * p.Hv;
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (int64_t nh = 0; nh < heads; ++nh)
    run_head(p, nh / p.Hv, nh % p.Hv, scratch.data() + omp_get_thread_num() * per_head);
  return GDN_STATUS_SUCCESS;
}

}  // namespace gdn

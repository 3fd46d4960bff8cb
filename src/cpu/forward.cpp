// gdn::cpu_forward: the problem cut into (sequence, value head, block of value indices) tasks,
// run in parallel by the kernel of the dispatched SIMD target.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <new>
#include <numeric>
#include <vector>

#include "core/backend.h"
#include "core/dtype.h"
#include "core/error.h"
#include "cpu/dispatch.h"
#include "cpu/kernel.h"
#include "cpu/tiles.h"

namespace gdn {
namespace {

constexpr int64_t kSerialWork = int64_t{1} << 16;  // state elements x tokens: run on one thread

const void* element(const void* base, gdn_dtype t, int64_t i) {
  return static_cast<const char*>(base) + i * dtype_size(t);
}
void* element(void* base, gdn_dtype t, int64_t i) {
  return static_cast<char*>(base) + i * dtype_size(t);
}

int64_t cu_seqlen(const Problem& p, int64_t n) {
  return p.cu_seqlens_dtype == GDN_DTYPE_I64 ? static_cast<const int64_t*>(p.cu_seqlens)[n]
                                             : static_cast<const int32_t*>(p.cu_seqlens)[n];
}

float head_value(const HeadVector& x, int64_t h) {
  const void* e = element(x.data, x.dtype, h * x.stride);
  switch (x.dtype) {
    case GDN_DTYPE_BF16: return bf16_to_f32(*static_cast<const uint16_t*>(e));
    case GDN_DTYPE_F16: return f16_to_f32(*static_cast<const uint16_t*>(e));
    default: return *static_cast<const float*>(e);
  }
}

cpu::Params params_of(const Problem& p) {
  cpu::Params k;
  k.K = p.K;
  k.V = p.V;
  k.x_dtype = p.input_dtype;
  k.g_dtype = p.g.dtype;
  k.beta_dtype = p.beta.dtype;
  k.a_dtype = p.a.dtype;
  k.state_in_dtype = p.initial_state.dtype;
  k.state_out_dtype = p.final_state.dtype;
  k.snapshot_dtype = p.snapshot_indices ? p.snapshots_pool.dtype : p.snapshots_dense.dtype;
  k.gate = p.gate;
  k.beta_mode = p.beta_mode;
  k.layout = p.state_layout;
  k.l2norm = p.qk_l2norm;
  k.scale = p.scale;
  return k;
}

// Sequence n, value head h: its tokens' tensors from token 0, its state slot, its snapshots.
cpu::Task task_of(const Problem& p, int64_t n, int64_t h) {
  const int64_t bos = p.packed ? cu_seqlen(p, n) : 0;
  const int64_t j = p.key_head(h);
  const int64_t slot = p.state_indices ? p.state_indices[n * p.state_indices_stride] : n;
  // element (n, t = 0, head) of a per-token tensor
  auto first = [&](const TokenTensor& x, int64_t head) {
    return element(x.data, x.dtype, n * x.seq + bos * x.tok + head * x.head);
  };
  cpu::Task t;
  t.len = p.packed ? cu_seqlen(p, n + 1) - bos : p.T;
  t.padded = slot < 0;
  t.q = first(p.q, j), t.q_tok = p.q.tok;
  t.k = first(p.k, j), t.k_tok = p.k.tok;
  t.v = first(p.v, h), t.v_tok = p.v.tok;
  t.o = const_cast<void*>(first(p.o, h)), t.o_tok = p.o.tok;
  t.beta = first(p.beta, h), t.beta_tok = p.beta.tok;
  if (p.gate == GDN_GATE_RAW) {
    t.a = first(p.a, h), t.a_tok = p.a.tok;
    t.A_log = head_value(p.A_log, h);
    t.dt_bias = head_value(p.dt_bias, h);
  } else {
    t.g = first(p.g, h), t.g_tok = p.g.tok;
  }
  if (!t.padded && p.initial_state.data) {
    const StateTensor& s = p.initial_state;
    t.state_in = element(s.data, s.dtype, slot * s.slot + h * s.head), t.state_in_row = s.row;
  }
  if (!t.padded && p.final_state.data) {
    const StateTensor& s = p.final_state;
    t.state_out = element(s.data, s.dtype, slot * s.slot + h * s.head), t.state_out_row = s.row;
  }
  if (p.has_snapshots && p.snapshot_indices) {
    const StateTensor& s = p.snapshots_pool;
    t.snap = element(s.data, s.dtype, h * s.head), t.snap_tok = s.slot, t.snap_row = s.row;
    t.snap_index =
        p.snapshot_indices + n * p.snapshot_index_strides.seq + bos * p.snapshot_index_strides.tok;
    t.snap_index_tok = p.snapshot_index_strides.tok;
  } else if (p.has_snapshots) {
    const TokenTensor& s = p.snapshots_dense;
    t.snap = const_cast<void*>(first(s, h)), t.snap_tok = s.tok, t.snap_row = s.row;
  }
  t.snap_every = p.checkpoint_tokens;
  return t;
}

}  // namespace

gdn_status cpu_forward(const Problem& p) {
  if (p.K > cpu::kMaxHeadDim || p.V > cpu::kMaxHeadDim)
    return fail(GDN_STATUS_UNSUPPORTED, "K, V: %lld, %lld: the cpu backend takes at most %lld",
                (long long)p.K, (long long)p.V, (long long)cpu::kMaxHeadDim);
  const cpu::KernelFn kernel = cpu::selected_target().run;
  const cpu::Params params = params_of(p);
  // Threads: as asked (0: all), at most one per task; one for calls too small to repay waking
  // others (a few microseconds of work). Tasks: (sequence, value head, block of value rows).
  int64_t threads = p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
  if (p.T_total * p.Hv * p.K * p.V < kSerialWork) threads = 1;
  const int64_t width = cpu::task_width(p.K, p.V, p.state_layout, p.N * p.Hv, threads);
  const int64_t blocks = (p.V + width - 1) / width;
  const int64_t per_sequence = p.Hv * blocks;
  const int64_t tasks = p.N * per_sequence;
  threads = std::clamp<int64_t>(threads, 1, std::max<int64_t>(tasks, 1));

  // The sequences in the order their tasks are handed out (empty: 0 .. N-1). Packed batches:
  // longest first, so that no long one starts last. Dense batches with a state pool: the
  // padding entries (slot -1: zero outputs, no state) after the live ones, so that the threads'
  // contiguous ranges split the real work evenly however the padding lies.
  std::vector<int64_t> order;
  int64_t live = p.N;  // dense: the sequences with a state slot, first in `order`
  if (p.packed || p.state_indices) {
    try {
      order.resize(size_t(p.N));
    } catch (const std::bad_alloc&) {
      return fail(GDN_STATUS_INTERNAL_ERROR, "cpu backend: out of host memory (%lld sequences)",
                  (long long)p.N);
    }
    std::iota(order.begin(), order.end(), int64_t{0});
    if (p.packed) {
      auto length = [&](int64_t n) { return cu_seqlen(p, n + 1) - cu_seqlen(p, n); };
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return length(a) > length(b); });
    } else {
      auto padding = [&](int64_t n) { return p.state_indices[n * p.state_indices_stride] < 0; };
      live = std::stable_partition(order.begin(), order.end(), [&](int64_t n) { return !padding(n); }) -
             order.begin();
    }
  }
  // One Scratch per thread, allocated before any output is written.
  std::unique_ptr<cpu::Scratch[]> scratch(new (std::nothrow) cpu::Scratch[size_t(threads)]);
  if (!scratch)
    return fail(GDN_STATUS_INTERNAL_ERROR, "cpu backend: out of host memory (%lld x %zu bytes)",
                (long long)threads, sizeof(cpu::Scratch));

  const auto run_task = [&](int64_t i) {
    const int64_t rank = i / per_sequence, h = i / blocks % p.Hv, b = i % blocks;
    const int64_t n = order.empty() ? rank : order[size_t(rank)];
    kernel(params, task_of(p, n, h), b * width, std::min(p.V, (b + 1) * width),
           scratch[size_t(omp_get_thread_num())]);
  };
  // Dense batches: tasks of equal work, each thread a contiguous range of the live ones, so that
  // its states stream through memory in order (one task at a time in turn broke every thread's
  // stream at each head: two threads, decode B = 64 bf16 state 3.5 -> 3.0 ms, kv 10.5 -> 6.3 ms,
  // B = 1 80 -> 41 us), then the padding entries' (zero outputs). Packed batches: lengths
  // differ, the longest first, one task at a time.
  if (p.packed) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(int(threads))
    for (int64_t i = 0; i < tasks; ++i) run_task(i);
  } else {
    const int64_t live_tasks = live * per_sequence;
#pragma omp parallel num_threads(int(threads))
    {
#pragma omp for schedule(static) nowait
      for (int64_t i = 0; i < live_tasks; ++i) run_task(i);
#pragma omp for schedule(static)
      for (int64_t i = live_tasks; i < tasks; ++i) run_task(i);
    }
  }
  return GDN_STATUS_SUCCESS;
}

}  // namespace gdn

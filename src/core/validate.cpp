// Validation of gdn_forward_args into a Problem (SPEC.md "Errors"). Every check names the
// argument and the value that failed; nothing here writes anything but the Problem.
#include "core/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/config_table.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/names.h"

namespace gdn {
namespace {

#define GDN_TRY(expr)                                  \
  do {                                                 \
    const gdn_status status_ = (expr);                 \
    if (status_ != GDN_STATUS_SUCCESS) return status_; \
  } while (0)

using ll = long long;
constexpr gdn_status kInvalid = GDN_STATUS_INVALID_ARGUMENT;

// ---- text for messages

struct Text {
  char s[192];
};

// "[2, 3, 1, 4]"
Text format_list(const int64_t* values, int n) {
  Text t{"["};
  size_t used = 1;
  for (int i = 0; i < n && used < sizeof t.s; ++i)
    used += std::snprintf(t.s + used, sizeof t.s - used, "%s%lld", i ? ", " : "", (ll)values[i]);
  if (used < sizeof t.s) std::snprintf(t.s + used, sizeof t.s - used, "]");
  return t;
}

// The value of an enum field as the caller stored it, even outside the enumerators.
template <class Enum>
int enum_value(const Enum& e) {
  static_assert(sizeof(Enum) == sizeof(int), "gdn enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// ---- tensor arguments

// The dimension letters of a tensor argument, outermost first.
struct Layout {
  int ndim;
  const char* dims[GDN_MAX_DIMS];
};

Text format_layout(const Layout& l) {
  Text t{"["};
  size_t used = 1;
  for (int i = 0; i < l.ndim && used < sizeof t.s; ++i)
    used += std::snprintf(t.s + used, sizeof t.s - used, "%s%s", i ? ", " : "", l.dims[i]);
  if (used < sizeof t.s) std::snprintf(t.s + used, sizeof t.s - used, "]");
  return t;
}

constexpr Layout kQKDense{4, {"N", "T", "Hk", "K"}};
constexpr Layout kQKPacked{3, {"T_total", "Hk", "K"}};
constexpr Layout kVODense{4, {"N", "T", "Hv", "V"}};
constexpr Layout kVOPacked{3, {"T_total", "Hv", "V"}};
constexpr Layout kPerHeadDense{3, {"N", "T", "Hv"}};
constexpr Layout kPerHeadPacked{2, {"T_total", "Hv"}};
constexpr Layout kHeadVector{1, {"Hv"}};
constexpr Layout kCuSeqlens{1, {"N+1"}};
constexpr Layout kStateIndices{1, {"N"}};
constexpr Layout kSnapshotIndicesDense{2, {"N", "T"}};
constexpr Layout kSnapshotIndicesPacked{1, {"T_total"}};

// `prefix` (e.g. [P, Hv]) followed by the state's rows and columns: [.., V, K] (vk) or [.., K, V].
Layout state_layout(Layout prefix, gdn_state_layout layout) {
  const bool vk = layout == GDN_STATE_VK;
  prefix.dims[prefix.ndim++] = vk ? "V" : "K";
  prefix.dims[prefix.ndim++] = vk ? "K" : "V";
  return prefix;
}

// A tensor argument after the checks every tensor gets. Absent tensors have t == nullptr.
struct View {
  const char* name = "";
  const gdn_tensor* t = nullptr;
  Layout layout{};
  int64_t stride[GDN_MAX_DIMS] = {};  // explicit strides, in elements
  uintptr_t lo = 0, hi = 0;           // the bytes it spans: [lo, hi)

  bool present() const { return t != nullptr; }
  int64_t dim(int i) const { return t->shape[i]; }
};

// Dtype, rank, sizes, device type, strides (filling in contiguous ones), 64-bit extent and
// alignment of one tensor argument. An absent tensor (data null) passes with v->t == nullptr.
gdn_status check_tensor(const char* name, const gdn_tensor& t, const Layout& layout, View* v) {
  v->name = name;
  v->layout = layout;
  if (!t.data) return GDN_STATUS_SUCCESS;
  v->t = &t;

  const int dtype = enum_value(t.dtype);
  if (dtype < GDN_DTYPE_F32 || dtype > GDN_DTYPE_F64)
    return fail(kInvalid, "%s: dtype %d is not a tensor dtype (f32=1 .. f64=6)", name, dtype);
  const int64_t size = dtype_size(t.dtype);
  if (t.ndim != layout.ndim)
    return fail(kInvalid, "%s: ndim=%d, expected %d (%s)", name, t.ndim, layout.ndim,
                format_layout(layout).s);
  const int n = t.ndim;
  for (int i = 0; i < n; ++i)
    if (t.shape[i] < 1)
      return fail(kInvalid, "%s: %s=%lld is not positive (shape %s)", name, layout.dims[i],
                  (ll)t.shape[i], format_list(t.shape, n).s);
  const int device = enum_value(t.device_type);
  if (device != GDN_DEVICE_CPU && device != GDN_DEVICE_CUDA)
    return fail(kInvalid, "%s: device_type %d is not a gdn_device_type (cpu=1, cuda=2)", name,
                device);

  bool contiguous = true;
  for (int i = 0; i < n; ++i) contiguous = contiguous && t.strides[i] == 0;
  if (contiguous) {
    v->stride[n - 1] = 1;
    for (int i = n - 2; i >= 0; --i)
      if (__builtin_mul_overflow(v->stride[i + 1], t.shape[i + 1], &v->stride[i]))
        return fail(kInvalid, "%s: size overflows 64 bits (shape %s)", name,
                    format_list(t.shape, n).s);
  } else {
    if (t.strides[n - 1] != 1)
      return fail(kInvalid, "%s: the stride of %s is %lld, expected 1 (strides %s)", name,
                  layout.dims[n - 1], (ll)t.strides[n - 1], format_list(t.strides, n).s);
    for (int i = 0; i < n - 1; ++i)
      if (t.strides[i] < 1)
        return fail(kInvalid, "%s: the stride of %s is %lld, expected >= 1 (strides %s)", name,
                    layout.dims[i], (ll)t.strides[i], format_list(t.strides, n).s);
    std::copy(t.strides, t.strides + n, v->stride);
  }

  // bytes spanned = (1 + sum (shape[i] - 1) * stride[i]) * size, and the end address fits
  int64_t last = 0, term = 0, bytes = 0;
  uintptr_t end = 0;
  for (int i = 0; i < n; ++i)
    if (__builtin_mul_overflow(t.shape[i] - 1, v->stride[i], &term) ||
        __builtin_add_overflow(last, term, &last))
      return fail(kInvalid, "%s: size overflows 64 bits (shape %s, strides %s)", name,
                  format_list(t.shape, n).s, format_list(v->stride, n).s);
  if (__builtin_mul_overflow(last + 1, size, &bytes) ||
      __builtin_add_overflow(reinterpret_cast<uintptr_t>(t.data), uintptr_t(bytes), &end))
    return fail(kInvalid, "%s: size overflows 64 bits (shape %s, strides %s, %lld-byte elements)",
                name, format_list(t.shape, n).s, format_list(v->stride, n).s, (ll)size);
  v->lo = reinterpret_cast<uintptr_t>(t.data);
  v->hi = end;

  if (v->lo % uintptr_t(size) != 0)
    return fail(kInvalid, "%s: data %p is not aligned to %lld bytes (dtype %s)", name, t.data,
                (ll)size, dtype_name(t.dtype));
  return GDN_STATUS_SUCCESS;
}

// x's dimension i must equal `want`: the same dimension of the argument `source`.
gdn_status expect_dim(const View& x, int i, int64_t want, const char* source) {
  if (x.dim(i) == want) return GDN_STATUS_SUCCESS;
  return fail(kInvalid, "%s: %s=%lld, but %s has %s=%lld", x.name, x.layout.dims[i], (ll)x.dim(i),
              source, x.layout.dims[i], (ll)want);
}

// Every dimension of x equals the same dimension of `y`.
gdn_status expect_same_shape(const View& x, const View& y) {
  for (int i = 0; i < x.layout.ndim; ++i) GDN_TRY(expect_dim(x, i, y.dim(i), y.name));
  return GDN_STATUS_SUCCESS;
}

// ---- the problem's sizes, and which argument defines each

struct Sizes {
  bool packed = false;
  int64_t N = 0, T = 0, T_total = 0, Hk = 0, K = 0, Hv = 0, V = 0;
  const char* N_from = "q";  // "cu_seqlens" when packed
};

// The leading token dimensions of a per-token tensor: [N, T, ..] or [T_total, ..].
gdn_status expect_tokens(const View& x, const Sizes& s) {
  if (s.packed) return expect_dim(x, 0, s.T_total, "q");
  GDN_TRY(expect_dim(x, 0, s.N, "q"));
  return expect_dim(x, 1, s.T, "q");
}

// The trailing [.., Hv, R, C] of a state or snapshot tensor, starting at dimension i.
gdn_status expect_state_dims(const View& x, int i, const Sizes& s, gdn_state_layout layout) {
  const bool vk = layout == GDN_STATE_VK;
  GDN_TRY(expect_dim(x, i, s.Hv, "v"));
  GDN_TRY(expect_dim(x, i + 1, vk ? s.V : s.K, vk ? "v" : "q"));
  return expect_dim(x, i + 2, vk ? s.K : s.V, vk ? "q" : "v");
}

// ---- the arguments, checked tensor by tensor

struct Views {
  View q, k, v, g, beta, a, A_log, dt_bias, initial_state, cu_seqlens, state_indices,
      snapshot_indices, o, final_state, state_snapshots;

  template <class F>
  gdn_status for_each_present(F f) const {
    for (const View* x : {&q, &k, &v, &g, &beta, &a, &A_log, &dt_bias, &initial_state, &cu_seqlens,
                          &state_indices, &snapshot_indices, &o, &final_state, &state_snapshots})
      if (x->present()) GDN_TRY(f(*x));
    return GDN_STATUS_SUCCESS;
  }
};

gdn_status check_options(const gdn_forward_args& a) {
  struct EnumField {
    const char* name;
    int value, max;
    const char* type;
  };
  const EnumField fields[] = {
      {"gate", enum_value(a.gate), GDN_GATE_RAW, "gdn_gate_mode"},
      {"beta_mode", enum_value(a.beta_mode), GDN_BETA_LOGIT, "gdn_beta_mode"},
      {"head_map", enum_value(a.head_map), GDN_HEAD_MAP_TILED, "gdn_head_map"},
      {"state_layout", enum_value(a.state_layout), GDN_STATE_KV, "gdn_state_layout"},
      {"backend", enum_value(a.backend), GDN_BACKEND_REFERENCE, "gdn_backend"},
      {"path", enum_value(a.path), GDN_PATH_CHUNKED, "gdn_path"},
  };
  for (const EnumField& f : fields)
    if (f.value < 0 || f.value > f.max)
      return fail(kInvalid, "%s: %d is not a %s (0..%d)", f.name, f.value, f.type, f.max);
  if (!std::isfinite(a.scale))
    return fail(kInvalid, "scale: %g is not finite (0 = 1/sqrt(K))", double(a.scale));
  if (a.num_threads < 0)
    return fail(kInvalid, "num_threads: %d is negative (0 = all cores)", a.num_threads);
  if (a.chunk_checkpoint_every < 0)
    return fail(kInvalid,
                "chunk_checkpoint_every: %d is negative (0: snapshots after every token; n > 0: "
                "after every n * %d tokens)",
                a.chunk_checkpoint_every, GDN_CHECKPOINT_TOKENS);
  if (reinterpret_cast<uintptr_t>(a.error_flags) % alignof(uint32_t) != 0)
    return fail(kInvalid, "error_flags: %p is not aligned to 4 bytes",
                static_cast<void*>(a.error_flags));
  return GDN_STATUS_SUCCESS;
}

// Required tensors are present; each gate's own tensors are given exactly when it uses them.
gdn_status check_presence(const gdn_forward_args& a) {
  const std::pair<const char*, const gdn_tensor*> required[] = {
      {"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"beta", &a.beta}, {"o", &a.o}};
  for (const auto& [name, t] : required)
    if (!t->data) return fail(kInvalid, "%s: data is null (required)", name);

  const bool raw = a.gate == GDN_GATE_RAW;
  const char* gate = gate_name(a.gate);
  if (raw && a.g.data)
    return fail(kInvalid, "g: given with gate raw (%p), which computes g from a, A_log and dt_bias",
                a.g.data);
  if (!raw && !a.g.data) return fail(kInvalid, "g: data is null (required by gate %s)", gate);
  const std::pair<const char*, const gdn_tensor*> raw_only[] = {
      {"a", &a.a}, {"A_log", &a.A_log}, {"dt_bias", &a.dt_bias}};
  for (const auto& [name, t] : raw_only) {
    if (raw && !t->data) return fail(kInvalid, "%s: data is null (required by gate raw)", name);
    if (!raw && t->data)
      return fail(kInvalid, "%s: given (%p), but only gate raw uses it (gate is %s)", name, t->data,
                  gate);
  }
  if (a.state_indices.data && !a.initial_state.data && !a.final_state.data)
    return fail(kInvalid, "state_indices: given (%p) without initial_state or final_state",
                a.state_indices.data);
  if (a.snapshot_indices.data && !a.state_snapshots.data)
    return fail(kInvalid, "snapshot_indices: given (%p) without state_snapshots",
                a.snapshot_indices.data);
  if (a.chunk_checkpoint_every > 0 && !a.state_snapshots.data)
    return fail(kInvalid,
                "chunk_checkpoint_every: %d asks for the state after every %lld tokens, but "
                "state_snapshots (where they go) is null",
                a.chunk_checkpoint_every, (long long)a.chunk_checkpoint_every * GDN_CHECKPOINT_TOKENS);
  return GDN_STATUS_SUCCESS;
}

gdn_status check_tensors(const gdn_forward_args& a, Views* w) {
  const bool packed = a.cu_seqlens.data != nullptr;
  const bool pooled = a.state_indices.data != nullptr;
  const bool snapshot_pool = a.snapshot_indices.data != nullptr;
  const Layout state =
      state_layout(pooled ? Layout{2, {"P", "Hv"}} : Layout{2, {"N", "Hv"}}, a.state_layout);
  const Layout snapshots = state_layout(snapshot_pool ? Layout{2, {"P2", "Hv"}}
                                        : packed      ? Layout{2, {"T_total", "Hv"}}
                                                      : Layout{3, {"N", "T", "Hv"}},
                                        a.state_layout);
  const Layout& per_head = packed ? kPerHeadPacked : kPerHeadDense;

  GDN_TRY(check_tensor("q", a.q, packed ? kQKPacked : kQKDense, &w->q));
  GDN_TRY(check_tensor("k", a.k, packed ? kQKPacked : kQKDense, &w->k));
  GDN_TRY(check_tensor("v", a.v, packed ? kVOPacked : kVODense, &w->v));
  GDN_TRY(check_tensor("g", a.g, per_head, &w->g));
  GDN_TRY(check_tensor("beta", a.beta, per_head, &w->beta));
  GDN_TRY(check_tensor("a", a.a, per_head, &w->a));
  GDN_TRY(check_tensor("A_log", a.A_log, kHeadVector, &w->A_log));
  GDN_TRY(check_tensor("dt_bias", a.dt_bias, kHeadVector, &w->dt_bias));
  GDN_TRY(check_tensor("initial_state", a.initial_state, state, &w->initial_state));
  GDN_TRY(check_tensor("cu_seqlens", a.cu_seqlens, kCuSeqlens, &w->cu_seqlens));
  GDN_TRY(check_tensor("state_indices", a.state_indices, kStateIndices, &w->state_indices));
  GDN_TRY(check_tensor("snapshot_indices", a.snapshot_indices,
                       packed ? kSnapshotIndicesPacked : kSnapshotIndicesDense,
                       &w->snapshot_indices));
  GDN_TRY(check_tensor("o", a.o, packed ? kVOPacked : kVODense, &w->o));
  GDN_TRY(check_tensor("final_state", a.final_state, state, &w->final_state));
  return check_tensor("state_snapshots", a.state_snapshots, snapshots, &w->state_snapshots);
}

// Every tensor's shape agrees with the sizes q, v and cu_seqlens define.
gdn_status check_shapes(const gdn_forward_args& a, const Views& w, Sizes* s) {
  s->packed = w.cu_seqlens.present();
  if (s->packed) {
    if (w.cu_seqlens.dim(0) < 2)
      return fail(kInvalid, "cu_seqlens: N+1=%lld, expected at least 2 (N >= 1 sequences)",
                  (ll)w.cu_seqlens.dim(0));
    s->N = w.cu_seqlens.dim(0) - 1;
    s->T_total = s->T = w.q.dim(0);
    s->N_from = "cu_seqlens";
  } else {
    s->N = w.q.dim(0);
    s->T = w.q.dim(1);
    s->T_total = s->N * s->T;  // cannot overflow: q's extent did not
  }
  const int tokens = s->packed ? 1 : 2;  // leading token dimensions of per-token tensors
  s->Hk = w.q.dim(tokens);
  s->K = w.q.dim(tokens + 1);
  s->Hv = w.v.dim(tokens);
  s->V = w.v.dim(tokens + 1);

  GDN_TRY(expect_same_shape(w.k, w.q));
  GDN_TRY(expect_tokens(w.v, *s));
  if (s->Hv % s->Hk != 0)
    return fail(kInvalid, "v: Hv=%lld is not a multiple of Hk=%lld", (ll)s->Hv, (ll)s->Hk);
  GDN_TRY(expect_same_shape(w.o, w.v));
  for (const View* x : {&w.g, &w.beta, &w.a}) {
    if (!x->present()) continue;
    GDN_TRY(expect_tokens(*x, *s));
    GDN_TRY(expect_dim(*x, tokens, s->Hv, "v"));
  }
  for (const View* x : {&w.A_log, &w.dt_bias})
    if (x->present()) GDN_TRY(expect_dim(*x, 0, s->Hv, "v"));

  const bool pooled = w.state_indices.present();
  for (const View* x : {&w.initial_state, &w.final_state}) {
    if (!x->present()) continue;
    if (!pooled) GDN_TRY(expect_dim(*x, 0, s->N, s->N_from));
    GDN_TRY(expect_state_dims(*x, 1, *s, a.state_layout));
  }
  if (w.initial_state.present() && w.final_state.present())
    GDN_TRY(expect_same_shape(w.final_state, w.initial_state));
  if (pooled) GDN_TRY(expect_dim(w.state_indices, 0, s->N, s->N_from));

  if (w.state_snapshots.present()) {
    if (w.snapshot_indices.present()) {
      GDN_TRY(expect_state_dims(w.state_snapshots, 1, *s, a.state_layout));
      GDN_TRY(expect_tokens(w.snapshot_indices, *s));
    } else {
      GDN_TRY(expect_tokens(w.state_snapshots, *s));
      GDN_TRY(expect_state_dims(w.state_snapshots, tokens, *s, a.state_layout));
    }
  }
  return GDN_STATUS_SUCCESS;
}

bool is_float(gdn_dtype t) {
  return t == GDN_DTYPE_F32 || t == GDN_DTYPE_BF16 || t == GDN_DTYPE_F16 || t == GDN_DTYPE_F64;
}

// Dtypes: k, v and o have q's (the reference may write f64 outputs); the per-head inputs are
// f32 or q's; all states share one floating dtype; indices are integers.
gdn_status check_dtypes(const gdn_forward_args& a, const Views& w) {
  const gdn_dtype in = a.q.dtype;
  if (!is_float(in))
    return fail(kInvalid, "q: dtype %s is not a floating-point dtype", dtype_name(in));
  for (const View* x : {&w.k, &w.v})
    if (x->t->dtype != in)
      return fail(kInvalid, "%s: dtype %s, but q has dtype %s", x->name, dtype_name(x->t->dtype),
                  dtype_name(in));
  const bool f64_output = a.backend == GDN_BACKEND_REFERENCE && a.o.dtype == GDN_DTYPE_F64;
  if (a.o.dtype != in && !f64_output)
    return fail(kInvalid,
                "o: dtype %s, but q has dtype %s (only the reference backend also writes f64)",
                dtype_name(a.o.dtype), dtype_name(in));
  for (const View* x : {&w.g, &w.beta, &w.a, &w.A_log, &w.dt_bias})
    if (x->present() && x->t->dtype != GDN_DTYPE_F32 && x->t->dtype != in)
      return fail(kInvalid, "%s: dtype %s, expected f32 or q's dtype %s", x->name,
                  dtype_name(x->t->dtype), dtype_name(in));

  const View* first_state = nullptr;
  for (const View* x : {&w.initial_state, &w.final_state, &w.state_snapshots}) {
    if (!x->present()) continue;
    if (!is_float(x->t->dtype))
      return fail(kInvalid, "%s: dtype %s is not a floating-point dtype", x->name,
                  dtype_name(x->t->dtype));
    if (!first_state) first_state = x;
    if (x->t->dtype != first_state->t->dtype)
      return fail(kInvalid, "%s: dtype %s, but %s has dtype %s (all states share one dtype)",
                  x->name, dtype_name(x->t->dtype), first_state->name,
                  dtype_name(first_state->t->dtype));
  }

  if (w.cu_seqlens.present() && a.cu_seqlens.dtype != GDN_DTYPE_I32 &&
      a.cu_seqlens.dtype != GDN_DTYPE_I64)
    return fail(kInvalid, "cu_seqlens: dtype %s, expected i32 or i64",
                dtype_name(a.cu_seqlens.dtype));
  for (const View* x : {&w.state_indices, &w.snapshot_indices})
    if (x->present() && x->t->dtype != GDN_DTYPE_I32)
      return fail(kInvalid, "%s: dtype %s, expected i32", x->name, dtype_name(x->t->dtype));
  return GDN_STATUS_SUCCESS;
}

// All tensors live on q's device; the backend (AUTO: where they live) can address it; host
// backends get no device memory, even mislabelled.
gdn_status check_devices(const gdn_forward_args& a, const Views& w, gdn_backend* backend) {
  const gdn_device_type device = a.q.device_type;
  GDN_TRY(w.for_each_present([&](const View& x) {
    if (x.t->device_type != device)
      return fail(kInvalid, "%s: device_type %s, but q has device_type %s", x.name,
                  device_name(x.t->device_type), device_name(device));
    if (device == GDN_DEVICE_CUDA && x.t->device_id != a.q.device_id)
      return fail(kInvalid, "%s: device_id %d, but q has device_id %d", x.name, x.t->device_id,
                  a.q.device_id);
    return GDN_STATUS_SUCCESS;
  }));

  *backend = a.backend;
  if (*backend == GDN_BACKEND_AUTO)
    *backend = device == GDN_DEVICE_CUDA ? GDN_BACKEND_CUDA : GDN_BACKEND_CPU;
  const bool host_backend = *backend != GDN_BACKEND_CUDA;
  if (host_backend && device == GDN_DEVICE_CUDA)
    return fail(kInvalid,
                "q: device_type cuda, but the %s backend runs on the host (a CUDA pointer given to "
                "a host backend)",
                backend_name(*backend));
  if (!host_backend && device != GDN_DEVICE_CUDA)
    return fail(kInvalid, "q: device_type %s, but the cuda backend needs CUDA device memory",
                device_name(device));
  if (host_backend)
    GDN_TRY(w.for_each_present([&](const View& x) {
      if (!cuda_is_device_pointer(x.t->data)) return GDN_STATUS_SUCCESS;
      return fail(
          kInvalid,
          "%s: data %p is CUDA device memory, but is labelled device_type cpu for the %s backend",
          x.name, x.t->data, backend_name(*backend));
    }));
  return GDN_STATUS_SUCCESS;
}

// final_state is either the very same view as initial_state (in place) or disjoint from it.
gdn_status check_state_aliasing(const Views& w) {
  const View& h0 = w.initial_state;
  const View& ht = w.final_state;
  if (!h0.present() || !ht.present()) return GDN_STATUS_SUCCESS;
  const bool same_view = h0.t->data == ht.t->data && h0.t->dtype == ht.t->dtype &&
                         std::equal(h0.stride, h0.stride + h0.layout.ndim, ht.stride);
  const bool overlap = ht.lo < h0.hi && h0.lo < ht.hi;
  if (overlap && !same_view)
    return fail(kInvalid,
                "final_state: bytes [%p, %p) overlap initial_state's [%p, %p) without being "
                "the same view (in place needs the same data, dtype and strides)",
                reinterpret_cast<void*>(ht.lo), reinterpret_cast<void*>(ht.hi),
                reinterpret_cast<void*>(h0.lo), reinterpret_cast<void*>(h0.hi));
  return GDN_STATUS_SUCCESS;
}

// ---- index contents

// The elements of an integer tensor of rank 1 or 2, row-major, read on the host (copied from
// the device first when they live there).
gdn_status read_indices(const View& x, void* stream, std::vector<int64_t>* out) {
  const gdn_tensor& t = *x.t;
  const unsigned char* base = static_cast<const unsigned char*>(t.data);
  std::vector<unsigned char> host_copy;
  if (t.device_type == GDN_DEVICE_CUDA) {
    host_copy.resize(x.hi - x.lo);
    GDN_TRY(cuda_copy_to_host(host_copy.data(), t.data, host_copy.size(), stream));
    base = host_copy.data();
  }
  const int64_t rows = t.ndim == 2 ? t.shape[0] : 1;
  const int64_t cols = t.shape[t.ndim - 1];
  const int64_t row_stride = t.ndim == 2 ? x.stride[0] : 0;
  const int64_t size = dtype_size(t.dtype);
  out->resize(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const unsigned char* at = base + (r * row_stride + c) * size;
      int64_t value;
      if (t.dtype == GDN_DTYPE_I64) {
        std::memcpy(&value, at, 8);
      } else {
        int32_t v32;
        std::memcpy(&v32, at, 4);
        value = v32;
      }
      (*out)[size_t(r * cols + c)] = value;
    }
  return GDN_STATUS_SUCCESS;
}

// "[3]" or "[1, 2]": the position of flat element i of x.
Text format_position(const View& x, int64_t i) {
  const int64_t cols = x.dim(x.layout.ndim - 1);
  const int64_t pos[2] = {i / cols, i % cols};
  return x.layout.ndim == 2 ? format_list(pos, 2) : format_list(&i, 1);
}

// cu_seqlens starts at 0, never decreases and ends at T_total.
gdn_status check_cu_seqlens(const std::vector<int64_t>& cu, int64_t T_total) {
  if (cu[0] != 0) return fail(kInvalid, "cu_seqlens: cu_seqlens[0]=%lld, expected 0", (ll)cu[0]);
  for (size_t n = 1; n < cu.size(); ++n)
    if (cu[n] < cu[n - 1])
      return fail(kInvalid, "cu_seqlens: decreases at [%zu] (%lld after %lld)", n, (ll)cu[n],
                  (ll)cu[n - 1]);
  const size_t N = cu.size() - 1;
  if (cu[N] != T_total)
    return fail(
        kInvalid,
        "cu_seqlens: cu_seqlens[%zu]=%lld, but it must end at T_total=%lld (q's first dimension)",
        N, (ll)cu[N], (ll)T_total);
  return GDN_STATUS_SUCCESS;
}

// Pool slots: every entry in [-1, slots), and no live slot (>= 0) used twice.
gdn_status check_slots(const View& x, const std::vector<int64_t>& slot, int64_t slots,
                       const char* letter) {
  for (size_t i = 0; i < slot.size(); ++i)
    if (slot[i] < -1 || slot[i] >= slots)
      return fail(kInvalid, "%s: %s%s=%lld is outside [-1, %s=%lld)", x.name, x.name,
                  format_position(x, int64_t(i)).s, (ll)slot[i], letter, (ll)slots);
  std::vector<std::pair<int64_t, int64_t>> live;  // (slot, position)
  for (size_t i = 0; i < slot.size(); ++i)
    if (slot[i] >= 0) live.emplace_back(slot[i], int64_t(i));
  std::sort(live.begin(), live.end());
  for (size_t i = 1; i < live.size(); ++i)
    if (live[i].first == live[i - 1].first)
      return fail(kInvalid, "%s: slot %lld is used twice (%s%s and %s%s)", x.name,
                  (ll)live[i].first, x.name, format_position(x, live[i - 1].second).s, x.name,
                  format_position(x, live[i].second).s);
  return GDN_STATUS_SUCCESS;
}

// Contents of cu_seqlens, state_indices and snapshot_indices: always for host memory; for
// device memory only on request (host_check_indices), since the kernels check them otherwise.
gdn_status check_index_contents(const gdn_forward_args& a, const Views& w, const Problem& p) {
  if (p.device_type == GDN_DEVICE_CUDA && !a.host_check_indices) return GDN_STATUS_SUCCESS;
  std::vector<int64_t> values;
  if (w.cu_seqlens.present()) {
    GDN_TRY(read_indices(w.cu_seqlens, a.stream, &values));
    GDN_TRY(check_cu_seqlens(values, p.T_total));
  }
  if (w.state_indices.present()) {
    GDN_TRY(read_indices(w.state_indices, a.stream, &values));
    GDN_TRY(check_slots(w.state_indices, values, p.pool_slots, "P"));
  }
  if (w.snapshot_indices.present()) {
    GDN_TRY(read_indices(w.snapshot_indices, a.stream, &values));
    GDN_TRY(check_slots(w.snapshot_indices, values, p.snapshot_pool_slots, "P2"));
  }
  return GDN_STATUS_SUCCESS;
}

// ---- the resolved problem

// A per-token tensor [N, T, H, (R,) ..] (dense) or [T_total, H, (R,) ..] (packed).
TokenTensor token_tensor(const View& x, bool packed) {
  TokenTensor t;
  if (!x.present()) return t;
  const int first = packed ? 0 : 1;  // the token dimension
  t.data = x.t->data;
  t.dtype = x.t->dtype;
  t.seq = packed ? 0 : x.stride[0];
  t.tok = x.stride[first];
  t.head = x.stride[first + 1];
  t.row = x.layout.ndim == first + 4 ? x.stride[first + 2] : 0;  // snapshots' state rows
  return t;
}

// A state tensor [N or P, Hv, R, C].
StateTensor state_tensor(const View& x) {
  StateTensor s;
  if (!x.present()) return s;
  s.data = x.t->data;
  s.dtype = x.t->dtype;
  s.slot = x.stride[0];
  s.head = x.stride[1];
  s.row = x.stride[2];
  return s;
}

HeadVector head_vector(const View& x) {
  HeadVector h;
  if (!x.present()) return h;
  h.data = x.t->data;
  h.dtype = x.t->dtype;
  h.stride = x.stride[0];
  return h;
}

Problem resolve(const gdn_forward_args& a, const Views& w, const Sizes& s, gdn_backend backend) {
  Problem p;
  p.N = s.N;
  p.T = s.T;
  p.T_total = s.T_total;
  p.Hk = s.Hk;
  p.Hv = s.Hv;
  p.K = s.K;
  p.V = s.V;
  p.ratio = s.Hv / s.Hk;

  p.packed = s.packed;
  p.cu_seqlens = a.cu_seqlens.data;
  p.cu_seqlens_dtype = s.packed ? a.cu_seqlens.dtype : GDN_DTYPE_NONE;
  p.state_indices = static_cast<const int32_t*>(a.state_indices.data);
  p.state_indices_stride = w.state_indices.present() ? w.state_indices.stride[0] : 1;
  const View& some_state = w.initial_state.present() ? w.initial_state : w.final_state;
  p.pool_slots = w.state_indices.present() ? some_state.dim(0) : s.N;
  p.snapshot_indices = static_cast<const int32_t*>(a.snapshot_indices.data);
  if (w.snapshot_indices.present()) {
    p.snapshot_index_strides.seq = s.packed ? 0 : w.snapshot_indices.stride[0];
    p.snapshot_index_strides.tok = w.snapshot_indices.stride[s.packed ? 0 : 1];
    p.snapshot_pool_slots = w.state_snapshots.dim(0);
  }

  p.q = token_tensor(w.q, s.packed);
  p.k = token_tensor(w.k, s.packed);
  p.v = token_tensor(w.v, s.packed);
  p.o = token_tensor(w.o, s.packed);
  p.g = token_tensor(w.g, s.packed);
  p.beta = token_tensor(w.beta, s.packed);
  p.a = token_tensor(w.a, s.packed);
  p.A_log = head_vector(w.A_log);
  p.dt_bias = head_vector(w.dt_bias);
  p.initial_state = state_tensor(w.initial_state);
  p.final_state = state_tensor(w.final_state);
  p.in_place = p.final_state.data && p.final_state.data == p.initial_state.data;
  p.has_snapshots = w.state_snapshots.present();
  p.checkpoint_tokens = int64_t(a.chunk_checkpoint_every) * GDN_CHECKPOINT_TOKENS;
  if (w.snapshot_indices.present())
    p.snapshots_pool = state_tensor(w.state_snapshots);
  else
    p.snapshots_dense = token_tensor(w.state_snapshots, s.packed);

  p.gate = a.gate;
  p.beta_mode = a.beta_mode;
  p.head_map = a.head_map;
  p.state_layout = a.state_layout;
  p.qk_l2norm = a.qk_l2norm != 0;
  p.scale = a.scale != 0.f ? a.scale : float(1.0 / std::sqrt(double(s.K)));
  p.backend = backend;
  p.path = a.path;
  p.input_dtype = a.q.dtype;

  p.device_type = a.q.device_type;
  p.device_id = a.q.device_type == GDN_DEVICE_CUDA ? a.q.device_id : 0;
  p.stream = a.stream;
  p.workspace = a.workspace;
  p.workspace_bytes = a.workspace_bytes;
  p.error_flags = a.error_flags;
  p.num_threads = a.num_threads;
  return p;
}

}  // namespace

gdn_status validate(const gdn_forward_args& args, Problem* out) {
  Views w;
  Sizes s;
  gdn_backend backend = GDN_BACKEND_AUTO;
  GDN_TRY(check_options(args));
  GDN_TRY(check_presence(args));
  GDN_TRY(check_tensors(args, &w));
  GDN_TRY(check_shapes(args, w, &s));
  GDN_TRY(check_dtypes(args, w));
  GDN_TRY(check_devices(args, w, &backend));
  GDN_TRY(check_state_aliasing(w));
  const Problem p = resolve(args, w, s, backend);
  GDN_TRY(check_supported(p));
  GDN_TRY(check_index_contents(args, w, p));
  *out = p;
  return GDN_STATUS_SUCCESS;
}

}  // namespace gdn

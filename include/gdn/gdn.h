/* gdn: Gated DeltaNet kernels. The C API: the library's stable ABI.
 *
 * Letters (SPEC.md): N sequences, T tokens per sequence (T_total when packed), Hk key/query
 * heads, Hv value heads (Hv % Hk == 0, r = Hv / Hk), K key head dim, V value head dim,
 * P state-pool slots, C chunk length.
 *
 * The recurrence, per sequence, value head h and token t (S is V x K, f32 math):
 *   j = head_map(h); q, k = q[t, j], k[t, j]          (optionally L2-normalised)
 *   S = alpha(g[t, h]) * S                               decay first
 *   delta = beta[t, h] * (v[t, h] - S k)
 *   S = S + delta k^T
 *   o[t, h] = scale * (S q)
 *
 * Layouts (row-major, last index fastest):
 *   tensor        dense                 packed (cu_seqlens[N+1] given)
 *   q, k          [N, T, Hk, K]         [T_total, Hk, K]
 *   v, o          [N, T, Hv, V]         [T_total, Hv, V]
 *   g, beta, a    [N, T, Hv]            [T_total, Hv]
 *   A_log,dt_bias [Hv]                  [Hv]
 *   state (vk)    [N, Hv, V, K]         same; or a pool [P, Hv, V, K] with state_indices[N]
 *   state (kv)    [N, Hv, K, V]         same; or a pool [P, Hv, K, V]
 *   snapshots     [N, T, Hv, V, K] (vk) [T_total, Hv, V, K]; or a pool [P, Hv, V, K] addressed
 *                                        by snapshot_indices [N, T] / [T_total]
 *
 * Every call validates its arguments first. A rejected call returns a status, writes nothing
 * (no output or state element changes) and leaves a message naming the argument and the value
 * in gdn_last_error() (per thread). Nothing inside a call allocates device memory: callers ask
 * gdn_forward_workspace_size() first and pass the workspace.
 */
#ifndef GDN_GDN_H
#define GDN_GDN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(GDN_SHARED)
#  if defined(GDN_BUILDING)
#    define GDN_API __declspec(dllexport)
#  else
#    define GDN_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define GDN_API __attribute__((visibility("default")))
#else
#  define GDN_API
#endif

/* ---- version ------------------------------------------------------------------------- */
#define GDN_VERSION_MAJOR 0
#define GDN_VERSION_MINOR 1
#define GDN_VERSION_PATCH 0
/* major * 10000 + minor * 100 + patch, of the library actually loaded. */
GDN_API int gdn_version(void);
GDN_API const char* gdn_version_string(void);

/* ---- status -------------------------------------------------------------------------- */
/* Fixed numeric values: they are part of the ABI. */
typedef enum gdn_status {
  GDN_STATUS_SUCCESS = 0,
  GDN_STATUS_INVALID_ARGUMENT = 1,    /* a bad pointer, size, dtype, index, or combination */
  GDN_STATUS_UNSUPPORTED = 2,         /* valid per SPEC.md, but no kernel for it (names the value) */
  GDN_STATUS_BACKEND_UNAVAILABLE = 3, /* backend not compiled in, or no device present */
  GDN_STATUS_WORKSPACE_TOO_SMALL = 4, /* workspace_bytes < gdn_forward_workspace_size() */
  GDN_STATUS_DEVICE_ERROR = 5,        /* the CUDA runtime reported an error (message has it) */
  GDN_STATUS_INTERNAL_ERROR = 6       /* a bug in gdn */
} gdn_status;

GDN_API const char* gdn_status_string(gdn_status status);
/* Message of the last failed call on this thread ("" after a success). */
GDN_API const char* gdn_last_error(void);

/* ---- tensors ------------------------------------------------------------------------- */
typedef enum gdn_dtype {
  GDN_DTYPE_NONE = 0,
  GDN_DTYPE_F32 = 1,
  GDN_DTYPE_F16 = 2,
  GDN_DTYPE_BF16 = 3,
  GDN_DTYPE_I32 = 4,
  GDN_DTYPE_I64 = 5,
  GDN_DTYPE_F64 = 6 /* the reference backend only */
} gdn_dtype;

/* Values match DLPack's DLDeviceType. */
typedef enum gdn_device_type {
  GDN_DEVICE_CPU = 1,
  GDN_DEVICE_CUDA = 2
} gdn_device_type;

#define GDN_MAX_DIMS 5

/* A view of caller memory. An absent optional tensor has data == NULL.
 * strides are in elements; if every stride is 0 the tensor is row-major contiguous. The last
 * dimension must have stride 1; other strides may be anything >= 1 (views into larger buffers,
 * e.g. a state pool interleaved with other caches). */
typedef struct gdn_tensor {
  void* data;
  gdn_dtype dtype;
  int32_t ndim;
  int64_t shape[GDN_MAX_DIMS];
  int64_t strides[GDN_MAX_DIMS];
  gdn_device_type device_type;
  int32_t device_id;
} gdn_tensor;

/* ---- options (SPEC.md "Conventions") -------------------------------------------------- */
typedef enum gdn_gate_mode {
  GDN_GATE_LOG_DECAY = 0,  /* alpha = exp(g), g <= 0 (HF, FLA, vLLM, llama.cpp) */
  GDN_GATE_DECAY_RATE = 1, /* alpha = exp(-g), g >= 0 (mlx-native) */
  GDN_GATE_RAW = 2         /* g = -exp(A_log[h]) * softplus(a[t,h] + dt_bias[h]); alpha = exp(g) */
} gdn_gate_mode;

typedef enum gdn_beta_mode {
  GDN_BETA_PROB = 0, /* used as given */
  GDN_BETA_LOGIT = 1 /* beta = sigmoid(b) */
} gdn_beta_mode;

typedef enum gdn_head_map {
  GDN_HEAD_MAP_BLOCK = 0, /* j = h / r  (HF/FLA/vLLM weight order) */
  GDN_HEAD_MAP_TILED = 1  /* j = h % Hk (GGUF/llama.cpp order) */
} gdn_head_map;

typedef enum gdn_state_layout {
  GDN_STATE_VK = 0, /* [.., Hv, V, K], K contiguous (vLLM, SGLang, FlashInfer, llama.cpp, mlx) */
  GDN_STATE_KV = 1  /* [.., Hv, K, V] (HF fallback, FLA default) */
} gdn_state_layout;

typedef enum gdn_backend {
  GDN_BACKEND_AUTO = 0,     /* where the tensors live: CUDA tensors -> cuda, host -> cpu */
  GDN_BACKEND_CPU = 1,      /* multithreaded SIMD, f32 math */
  GDN_BACKEND_CUDA = 2,
  GDN_BACKEND_REFERENCE = 3 /* the f64 oracle on the CPU; also takes F64 tensors */
} gdn_backend;

typedef enum gdn_path {
  GDN_PATH_AUTO = 0,
  GDN_PATH_RECURRENT = 1,
  GDN_PATH_CHUNKED = 2
} gdn_path;

/* Bits raised in *error_flags by kernels that find invalid index contents in device memory.
 * The offending sequence writes nothing (no output, no state). */
#define GDN_ERROR_FLAG_CU_SEQLENS 0x1u
#define GDN_ERROR_FLAG_STATE_INDICES 0x2u
#define GDN_ERROR_FLAG_SNAPSHOT_INDICES 0x4u

/* The token granularity of gdn_forward_args.chunk_checkpoint_every (the chunked path's chunk). */
#define GDN_CHECKPOINT_TOKENS 64

/* ---- the forward call ---------------------------------------------------------------- */
typedef struct gdn_forward_args {
  /* inputs */
  gdn_tensor q;              /* [N, T, Hk, K] | [T_total, Hk, K]; f32, bf16 or f16 */
  gdn_tensor k;              /* same shape and dtype as q */
  gdn_tensor v;              /* [N, T, Hv, V] | [T_total, Hv, V]; q's dtype */
  gdn_tensor g;              /* [N, T, Hv] | [T_total, Hv]; f32 or q's dtype; unused (NULL) for gate raw */
  gdn_tensor beta;           /* [N, T, Hv] | [T_total, Hv]; f32 or q's dtype */
  gdn_tensor a;              /* gate raw only: [N, T, Hv] | [T_total, Hv]; f32 or q's dtype */
  gdn_tensor A_log;          /* gate raw only: [Hv]; f32 or q's dtype */
  gdn_tensor dt_bias;        /* gate raw only: [Hv]; f32 or q's dtype */
  gdn_tensor initial_state;  /* optional: [N, Hv, V, K] (vk) / [N, Hv, K, V] (kv); with state_indices
                                a pool [P, ...]; f32 or bf16 (bf16: storage only, math in f32) */
  gdn_tensor cu_seqlens;     /* optional: [N + 1] int32 or int64; present = packed batch */
  gdn_tensor state_indices;  /* optional: [N] int32 in [-1, P); -1 = padding slot: its state is
                                neither read nor written and its outputs are zero */
  gdn_tensor snapshot_indices; /* optional: [N, T] | [T_total] int32 in [-1, P2): pool slot of
                                the state after each token (-1: not stored) */
  /* outputs */
  gdn_tensor o;              /* [N, T, Hv, V] | [T_total, Hv, V]; q's dtype (reference: or f64) */
  gdn_tensor final_state;    /* optional: as initial_state (pool: same state_indices); may be the
                                very same memory as initial_state (in-place update) */
  gdn_tensor state_snapshots; /* optional: state after every token: [N, T, Hv, V, K] |
                                [T_total, Hv, V, K] (vk; kv swaps the last two), or a pool
                                [P2, Hv, V, K] with snapshot_indices; f32 or bf16 */
  /* options */
  gdn_gate_mode gate;
  gdn_beta_mode beta_mode;
  gdn_head_map head_map;
  gdn_state_layout state_layout;
  int32_t qk_l2norm;         /* nonzero: q, k <- x * rsqrt(sum(x^2) + 1e-6) per head */
  float scale;               /* 0: the default 1 / sqrt(K) */
  gdn_backend backend;
  gdn_path path;
  int32_t host_check_indices; /* nonzero: validate device-resident cu_seqlens / state_indices /
                                snapshot_indices on the host before launch (one synchronisation;
                                not graph-capturable) */
  int32_t chunk_checkpoint_every; /* 0: state_snapshots (if given) holds the state after every
                                token. n > 0 (prefix caching): only after every n *
                                GDN_CHECKPOINT_TOKENS tokens of each sequence (tokens t with
                                (t + 1) % (n * GDN_CHECKPOINT_TOKENS) == 0, t from the sequence's
                                start), so the chunked path can store them; other dense entries
                                are not written, other snapshot_indices entries not used (they
                                must still be in [-1, P2)); needs state_snapshots */
  /* execution */
  void* stream;              /* cudaStream_t for the cuda backend (NULL: the legacy default stream) */
  void* workspace;           /* backend-device memory of workspace_bytes, >= gdn_forward_workspace_size(),
                                256-byte aligned (as cudaMalloc and array allocators return it) */
  size_t workspace_bytes;
  uint32_t* error_flags;     /* optional, backend-device memory: kernels OR GDN_ERROR_FLAG_* bits in */
  int32_t num_threads;       /* cpu backends: 0 = all cores */
} gdn_forward_args;

/* Zero every field, then set the defaults (all enum defaults are 0, so this equals memset 0). */
GDN_API void gdn_forward_args_init(gdn_forward_args* args);

/* Validation only, and whether a kernel exists for this configuration. Writes nothing. */
GDN_API gdn_status gdn_forward_can_implement(const gdn_forward_args* args);
/* Bytes of workspace gdn_forward needs for these arguments: 0 for decode calls and the fused
 * chunked kernel; the cuda chunked path's split form (few long sequences) asks for about 1 KB
 * per token and value head (f32 inputs: 0.5 KB). */
GDN_API gdn_status gdn_forward_workspace_size(const gdn_forward_args* args, size_t* bytes);
/* Run. For the cuda backend the call is asynchronous on args->stream, allocates nothing and
 * synchronises nothing (unless host_check_indices), so it can be captured in a CUDA graph. */
GDN_API gdn_status gdn_forward(const gdn_forward_args* args);

/* ---- backends and devices ------------------------------------------------------------ */
/* Nonzero when the backend is compiled in and usable now (cuda: a device is present). */
GDN_API int gdn_backend_available(gdn_backend backend);
/* Number of CUDA devices (0 without the cuda backend or a GPU). */
GDN_API int gdn_cuda_device_count(void);
/* One line describing device `index` (name, SMs, memory), into buf. */
GDN_API gdn_status gdn_cuda_device_info(int index, char* buf, size_t buf_bytes);
/* The SIMD target the cpu backend dispatched to: "avx512bf16" (AVX-512 with its bf16
 * conversions), "avx512", "avx2", "sse2", "neon" or "scalar". The environment variable
 * GDN_CPU_TARGET (same names) forces a lower one, read once. */
GDN_API const char* gdn_cpu_simd_target(void);

#ifdef __cplusplus
}
#endif

#endif /* GDN_GDN_H */

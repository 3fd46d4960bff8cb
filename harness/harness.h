// The test harness: one case vocabulary for the tests, `gdn check`, `gdn bench` and `gdn demo`.
// A Case is parsed from a case string ("N=4,T=300,Hk=16,Hv=48,K=128,V=128,dtype=bf16,gate=raw,
// map=tiled"); generate() draws SPEC.md's realistic inputs for it; run_case() runs one backend
// on them with poisoned outputs, runs the f64 oracle on the same rounded inputs, and reports the
// relative L2 error of every output and whether every element that should be written was.
//
// Code that builds its own calls (benchmarks, demos, CUDA tests) uses the layers underneath:
//   Case --generate()--> GeneratedInputs (host tensors) --args()--> gdn_forward_args (host)
//                                        --DeviceBuffers--> gdn_forward_args (CUDA), download()
//   check_outputs() compares what a backend wrote against an oracle run (run_oracle()).
// The harness is test code: it throws std::invalid_argument / std::runtime_error on misuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gdn/gdn.h"

namespace gdn::harness {

struct Case {
  std::string name;  // optional label                              key: name=
  // sizes (SPEC letters); packed batches take each length from `seqlens`, or draw them
  int64_t N = 2, T = 33, Hk = 2, Hv = 4, K = 32, V = 32;
  gdn_dtype dtype = GDN_DTYPE_F32;        // q, k, v (and o)          key: dtype=f32|bf16|f16
  gdn_dtype gate_dtype = GDN_DTYPE_F32;   // g, beta, a, A_log, dt_bias  key: gdtype=
  gdn_dtype state_dtype = GDN_DTYPE_F32;  // states and snapshots     key: sdtype=f32|bf16
  gdn_gate_mode gate = GDN_GATE_LOG_DECAY;  // key: gate=log_decay|decay_rate|raw
  gdn_beta_mode beta = GDN_BETA_PROB;       // key: beta=prob|logit
  gdn_head_map map = GDN_HEAD_MAP_BLOCK;    // key: map=block|tiled
  gdn_state_layout layout = GDN_STATE_VK;   // key: layout=vk|kv
  bool l2norm = false;                      // key: l2norm=0|1
  float scale = 0.f;                        // key: scale=X (0: default)
  bool packed = false;                      // key: packed=1 (lengths random, mean T; or seqlens=)
  std::vector<int64_t> seqlens;             // key: seqlens=5:0:300 (implies packed, sets N)
  bool initial_state = true;                // key: h0=0|1
  bool final_state = true;                  // key: ht=0|1
  bool in_place = false;                    // key: inplace=1 (final state aliases the initial)
  int64_t pool = 0;                         // key: pool=P (state pool of P slots; 0 = dense)
  int64_t pad = 0;                          // key: pad=n (n of the N state_indices are -1)
  bool snapshots = false;                   // key: snap=1 (dense per-token states)
  bool snapshot_pool = false;               // key: snap=pool (pooled, with snapshot_indices)
  int64_t ckpt = 0;                         // key: ckpt=n (chunk_checkpoint_every: snapshots only
                                            // after every n x 64 tokens of a sequence)
  gdn_path path = GDN_PATH_AUTO;            // key: path=auto|recurrent|chunked
  // head-decay regime: key: decay=normal|none|fast|slow|mixed (g = logsigmoid(N(0,1)), 0, near
  // -20, near -0.1 (a chunk's start fades by about 2^-9 a chunk of 64 tokens), or value heads
  // cycling through the first three)
  std::string decay = "normal";
  uint64_t seed = 1;                        // key: seed=
  int64_t threads = 0;                      // key: threads= (cpu backend)
  // ---- additions
  bool strided = false;        // key: strided=1: every tensor a view with padded strides (as
                               // into a fused qkv projection or an interleaved state pool)
  bool cu_seqlens_i64 = false; // key: cu64=1: cu_seqlens as int64 (default int32)
};

// Parses a case string; throws std::invalid_argument naming the bad key or value.
Case parse_case(const std::string& text);
std::string to_string(const Case& c);
// The built-in case list of `gdn check` and the tests: every option, odd shapes.
std::vector<Case> builtin_cases();

// What random_case draws from. Everything else is drawn over all its values: gate, beta and
// decay regime, head map at ratios 1 to 3, layout, norm, scale, dense or packed batches (with
// empty sequences), initial and final state, in place, pools with padding (at times with fewer
// slots than sequences), snapshots dense or pooled, strided views.
struct RandomCaseSpace {
  std::vector<int64_t> K, V;             // head dims
  std::vector<std::string> dtypes;       // q, k, v ("f32", "bf16", "f16")
  std::vector<std::string> state_dtypes; // ("f32", "bf16")
  std::vector<int64_t> lengths;          // tokens of a sequence
  std::vector<int64_t> long_lengths;     // with state checkpoints (empty: none)
  bool per_token_snapshots = true;       // snap=1 / snap=pool without checkpoints
  bool threads = false;                  // the cpu backend's thread count (0 to 3)
  gdn_path path = GDN_PATH_AUTO;
};
// The case of `draw` (the same draw, the same case); its data seed stays 1.
Case random_case(uint64_t draw, const RandomCaseSpace& space);
// The space of a backend and path, from the configuration table's row (head dims listed there,
// or odd sizes up to its range's end; its dtypes) and the path's lengths (the chunked path's
// around its chunk edges, with checkpoints but no per-token snapshots). Empty K: no such row.
RandomCaseSpace random_case_space(gdn_backend backend, gdn_path path);

// Tolerances of SPEC.md's "Numerical targets" for a backend, path and input dtype.
struct Tolerance { double o, state; };
Tolerance tolerance(const Case& c, gdn_backend backend, gdn_path path);

struct Errors {
  double o = 0, final_state = 0, snapshots = 0;  // relative L2 vs the f64 oracle (0 if absent)
  bool all_written = true;     // no poison left where the backend must write
  bool untouched_ok = true;    // pool slots not addressed (and padding outputs) unchanged / zero
  bool finite = true;          // no NaN or Inf in any output
  std::string detail;          // first problem found, for messages
  bool pass(const Tolerance& t) const;
};

struct RunOptions {
  gdn_backend backend = GDN_BACKEND_CPU;
  int device_id = 0;
  void* stream = nullptr;           // cuda backend
  bool compare = true;              // run the oracle and fill Errors
  int64_t sample_heads = 0;         // >0: oracle only on this many value heads (long cases)
};

struct RunResult {
  gdn_status status = GDN_STATUS_SUCCESS;
  std::string message;  // gdn_last_error() on failure
  Errors errors;
  double ms = 0;        // one timed call (wall clock, synchronised), for information only
};

RunResult run_case(const Case& c, const RunOptions& opt);

// Relative L2 error ||x - ref|| / ||ref|| (ref all zero: ||x||).
double rel_l2(const double* x, const double* ref, int64_t n);

// ============================================================================================
// Additions: the layers under run_case(), for callers that build and time calls themselves.
// ============================================================================================

// One tensor in host memory: a view (shape, strides in elements, last stride 1) into 64-byte
// aligned storage it owns. Copies are deep. Absent tensors (optional inputs not used by a
// case) have dtype NONE and no storage.
class HostTensor {
 public:
  HostTensor() = default;
  // strides empty: row-major contiguous.
  HostTensor(gdn_dtype dtype, std::vector<int64_t> shape, std::vector<int64_t> strides = {});
  HostTensor(const HostTensor& other);
  HostTensor& operator=(const HostTensor& other);
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;
  ~HostTensor() = default;

  bool present() const { return dtype_ != GDN_DTYPE_NONE; }
  gdn_dtype dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t numel() const;             // logical elements
  int64_t storage_elements() const;  // elements the storage spans, stride gaps included
  size_t bytes() const;              // storage bytes
  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }

  int64_t offset(int64_t index) const;  // storage element of logical row-major `index`
  double get(int64_t index) const;      // logical element as f64
  void set(int64_t index, double x);    // rounds x to the dtype (round to nearest even)
  // Row `row` (index over all dimensions but the last) := x[0, shape.back()), rounded.
  void set_row(int64_t row, const double* x);
  void fill_poison();                   // every storage element := poison_bits(dtype)

  // The descriptor for this tensor at `data` (default: the host storage); explicit strides.
  gdn_tensor view(void* data = nullptr, gdn_device_type device = GDN_DEVICE_CPU,
                  int device_id = 0) const;

 private:
  struct Free { void operator()(void* p) const; };
  gdn_dtype dtype_ = GDN_DTYPE_NONE;
  std::vector<int64_t> shape_, strides_;
  std::unique_ptr<void, Free> storage_;
};

// The NaN bit pattern that fills outputs before a call (a signalling NaN no kernel produces).
uint64_t poison_bits(gdn_dtype dtype);

// A case's inputs and output buffers on the host, in SPEC.md's layouts, drawn in f64 and
// rounded to the case's dtypes: q ~ N(0, 1); k L2-normalised per head (raw N(0, 1) with
// l2norm=1, so that the kernel's norm matters); v ~ N(0, 1); g = logsigmoid(N(0, 1)) (decay=none:
// 0, fast: -20 + N(0, 0.5); decay_rate: -g); raw gate: a ~ N(0, 1), A_log ~ U(-1, 1),
// dt_bias ~ N(0, 0.5); beta = sigmoid(N(0, 1)) (logit: the draw itself); every state slot
// ~ N(0, 0.1^2). Packed: lengths uniform in [1, 2T - 1], one of them 0 when N >= 3. Pools:
// distinct random slots, `pad` of them -1. Snapshot pools: P2 = T_total + 3 slots, distinct per
// token, about a quarter of the tokens -1. (R, C) = (V, K) for the vk layout, (K, V) for kv.
struct GeneratedInputs {
  Case c;                      // the case; packed: seqlens filled in, N = seqlens.size()
  int64_t T_total = 0;         // tokens over the batch
  std::vector<int64_t> bos;    // [N + 1] first token of each sequence (dense: n * T)
  std::vector<int32_t> slot;   // [N] state slot of each sequence; -1: padding; dense: n
  int64_t state_slots = 0;     // P when pooled, else N
  int64_t snapshot_slots = 0;  // P2 when snapshots are pooled, else 0
  // inputs; absent ones are !present()
  HostTensor q, k;             // [N, T, Hk, K] | [T_total, Hk, K]
  HostTensor v;                // [N, T, Hv, V] | [T_total, Hv, V]
  HostTensor g, beta, a;       // [N, T, Hv] | [T_total, Hv]
  HostTensor A_log, dt_bias;   // [Hv]
  HostTensor initial_state;    // [N|P, Hv, V, K] (vk) | [N|P, Hv, K, V] (kv); the output in place
  HostTensor cu_seqlens;       // [N + 1] int32 (int64 with cu64=1)
  HostTensor state_indices;    // [N] int32
  HostTensor snapshot_indices; // [N, T] | [T_total] int32
  // outputs, filled with poison
  HostTensor o;                // [N, T, Hv, V] | [T_total, Hv, V]; q's dtype
  HostTensor final_state;      // as initial_state; absent when in place or ht=0
  HostTensor snapshots;        // [N, T, Hv, R, C] | [T_total, Hv, R, C] | pool [P2, Hv, R, C]

  // The tensor the backend writes the final state to (initial_state when in place), or null.
  HostTensor* final_state_out();
  const HostTensor* final_state_out() const;
  // Arguments for a call on these host buffers: options from the case (path, threads), the
  // given backend; no workspace. Pointers refer to this object: keep it alive and unmoved.
  gdn_forward_args args(gdn_backend backend = GDN_BACKEND_CPU);
  // Every output back to pristine's (poison; in place: the initial state), in the same storage.
  void reset_outputs(const GeneratedInputs& pristine);
};

GeneratedInputs generate(const Case& c);

// Device copies of a GeneratedInputs' tensors, made with the CUDA runtime. Available only in
// builds with GDN_HARNESS_CUDA (CUDA::cudart); elsewhere the constructor throws
// std::runtime_error. Move-only; frees everything on destruction.
class DeviceBuffers {
 public:
  static bool compiled();  // GDN_HARNESS_CUDA build
  // cudaMalloc and copy every present tensor (outputs too, with their poison) to `device_id`.
  DeviceBuffers(const GeneratedInputs& in, int device_id);
  DeviceBuffers(DeviceBuffers&& other) noexcept;
  DeviceBuffers& operator=(DeviceBuffers&& other) noexcept;
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  ~DeviceBuffers();

  // in.args(backend) with every pointer replaced by its device copy, device_type CUDA, and
  // the stream set. A workspace of `workspace_bytes` is allocated (grown) on demand. `in` is
  // the GeneratedInputs these buffers were made from, or a copy of it.
  gdn_forward_args args(GeneratedInputs& in, gdn_backend backend, void* stream,
                        size_t workspace_bytes = 0);
  // Copy every tensor from the host again (e.g. after in.reset_outputs()); synchronous.
  void upload(const GeneratedInputs& in);
  // Copy the outputs (o, the final state, snapshots) back into `in`; synchronous.
  void download(GeneratedInputs& in) const;
  int device_id() const { return device_id_; }
  // cudaStreamSynchronize(stream) on this buffers' device.
  void synchronize(void* stream) const;

 private:
  void release() noexcept;
  int device_id_ = 0;
  std::vector<void*> copies_;  // device storage of each tensor, by Role (tensor_roles.h)
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// The oracle's outputs in f64, contiguous; heads are the first `heads` value heads.
struct OracleOutputs {
  int64_t heads = 0;       // value heads the oracle ran on (Hv, or fewer when sampled)
  HostTensor o;            // [N, T, heads, V] | [T_total, heads, V]
  HostTensor final_state;  // [N|P, heads, R, C] (absent when the case writes none)
  HostTensor snapshots;    // as GeneratedInputs::snapshots with `heads` heads
};

// Runs GDN_BACKEND_REFERENCE through the C API on `pristine`'s inputs (never written to),
// on the first sample_heads value heads (0: all; block map: rounded to a multiple of r,
// tiled map: to a multiple of Hk). Returns the status; the message is in gdn_last_error().
gdn_status run_oracle(const GeneratedInputs& pristine, int64_t sample_heads, OracleOutputs* out);

// Checks what a backend wrote into `after` (a copy of `before` that went through one call)
// against the oracle: every element the call must write is written (no poison left), finite,
// and compared in rel L2 over the oracle's heads; o of padding sequences (state slot -1) is
// zero; everything else (pool slots no live sequence addresses, the snapshots of padding
// sequences, stride gaps) is byte-identical to before.
Errors check_outputs(const GeneratedInputs& before, const GeneratedInputs& after,
                     const OracleOutputs& oracle);

}  // namespace gdn::harness

// A valid gdn_forward call to break one argument at a time, and the check every rejection must
// pass: the status, a message naming the argument and the value, and not one byte written.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gdn/gdn.hpp"

namespace valid {

enum class Snapshots { kNone, kDense, kPool };

// Which valid call to build. Sizes: N = 2, T = 3 (packed: cu_seqlens = [0, 1, 3]), Hk = 1,
// Hv = 2, K and V below; pool P = 3 with state_indices = [2, 0]; snapshot pool P2 = 6 with
// snapshot_indices = [[0, 1, 2], [3, 4, 5]] (packed: [0, 1, 2]).
struct Config {
  bool packed = false;
  bool pooled = false;
  bool in_place = false;  // final_state is initial_state
  bool raw = false;       // gate raw: a, A_log, dt_bias instead of g
  Snapshots snapshots = Snapshots::kNone;
  int64_t K = 4, V = 4;
  gdn_dtype dtype = GDN_DTYPE_F32;          // q, k, v, o
  gdn_dtype state_dtype = GDN_DTYPE_F32;    // states and snapshots
  gdn_device_type device = GDN_DEVICE_CPU;  // CUDA: host memory labelled so, never touched
  gdn_backend backend = GDN_BACKEND_REFERENCE;
};

// Host buffers (zero inputs, valid indices, outputs poisoned with 0xA5 bytes) and args
// describing them. Per-head inputs (g, beta, a, A_log, dt_bias) are f32.
class Call {
 public:
  static constexpr int64_t N = 2, T = 3, T_total_packed = 3, Hk = 1, Hv = 2, P = 3, P2 = 6;

  explicit Call(const Config& c = Config()) : config(c) {
    const int64_t K = c.K, V = c.V;
    const int64_t T_total = c.packed ? T_total_packed : N * T;
    const int64_t slots = c.pooled ? P : N;
    q_ = zeros(c.dtype, T_total * Hk * K);
    k_ = zeros(c.dtype, T_total * Hk * K);
    v_ = zeros(c.dtype, T_total * Hv * V);
    o_ = poison(c.dtype, T_total * Hv * V);
    per_head_ = {zeros(GDN_DTYPE_F32, T_total * Hv), zeros(GDN_DTYPE_F32, T_total * Hv),
                 zeros(GDN_DTYPE_F32, T_total * Hv)};                      // g, beta, a
    head_vectors_ = {zeros(GDN_DTYPE_F32, Hv), zeros(GDN_DTYPE_F32, Hv)};  // A_log, dt_bias
    initial_state_ = zeros(c.state_dtype, slots * Hv * V * K);
    final_state_ = poison(c.state_dtype, slots * Hv * V * K);
    const int64_t snapshot_count = c.snapshots == Snapshots::kPool ? P2 : T_total;
    snapshots_ = poison(c.state_dtype, snapshot_count * Hv * V * K);
    cu_seqlens_ = {0, 1, 3};
    state_indices_ = {2, 0};
    snapshot_indices_ =
        c.packed ? std::vector<int32_t>{0, 1, 2} : std::vector<int32_t>{0, 1, 2, 3, 4, 5};

    const gdn_device_type d = c.device;
    if (c.packed) {
      args.q = gdn::tensor(q_.data(), c.dtype, {T_total, Hk, K}, d);
      args.k = gdn::tensor(k_.data(), c.dtype, {T_total, Hk, K}, d);
      args.v = gdn::tensor(v_.data(), c.dtype, {T_total, Hv, V}, d);
      args.o = gdn::tensor(o_.data(), c.dtype, {T_total, Hv, V}, d);
      args.g = gdn::tensor(per_head_[0].data(), GDN_DTYPE_F32, {T_total, Hv}, d);
      args.beta = gdn::tensor(per_head_[1].data(), GDN_DTYPE_F32, {T_total, Hv}, d);
      a_ = gdn::tensor(per_head_[2].data(), GDN_DTYPE_F32, {T_total, Hv}, d);
      args.cu_seqlens = gdn::tensor(cu_seqlens_.data(), GDN_DTYPE_I32, {N + 1}, d);
    } else {
      args.q = gdn::tensor(q_.data(), c.dtype, {N, T, Hk, K}, d);
      args.k = gdn::tensor(k_.data(), c.dtype, {N, T, Hk, K}, d);
      args.v = gdn::tensor(v_.data(), c.dtype, {N, T, Hv, V}, d);
      args.o = gdn::tensor(o_.data(), c.dtype, {N, T, Hv, V}, d);
      args.g = gdn::tensor(per_head_[0].data(), GDN_DTYPE_F32, {N, T, Hv}, d);
      args.beta = gdn::tensor(per_head_[1].data(), GDN_DTYPE_F32, {N, T, Hv}, d);
      a_ = gdn::tensor(per_head_[2].data(), GDN_DTYPE_F32, {N, T, Hv}, d);
    }
    A_log_ = gdn::tensor(head_vectors_[0].data(), GDN_DTYPE_F32, {Hv}, d);
    dt_bias_ = gdn::tensor(head_vectors_[1].data(), GDN_DTYPE_F32, {Hv}, d);
    if (c.raw) {
      args.gate = GDN_GATE_RAW;
      args.g = gdn_tensor{};
      args.a = a_;
      args.A_log = A_log_;
      args.dt_bias = dt_bias_;
    }
    args.initial_state = gdn::tensor(initial_state_.data(), c.state_dtype, {slots, Hv, V, K}, d);
    args.final_state = c.in_place
                           ? args.initial_state
                           : gdn::tensor(final_state_.data(), c.state_dtype, {slots, Hv, V, K}, d);
    if (c.pooled) args.state_indices = gdn::tensor(state_indices_.data(), GDN_DTYPE_I32, {N}, d);
    if (c.snapshots == Snapshots::kDense)
      args.state_snapshots =
          c.packed ? gdn::tensor(snapshots_.data(), c.state_dtype, {T_total, Hv, V, K}, d)
                   : gdn::tensor(snapshots_.data(), c.state_dtype, {N, T, Hv, V, K}, d);
    if (c.snapshots == Snapshots::kPool) {
      args.state_snapshots = gdn::tensor(snapshots_.data(), c.state_dtype, {P2, Hv, V, K}, d);
      args.snapshot_indices =
          c.packed ? gdn::tensor(snapshot_indices_.data(), GDN_DTYPE_I32, {T_total}, d)
                   : gdn::tensor(snapshot_indices_.data(), GDN_DTYPE_I32, {N, T}, d);
    }
    args.backend = c.backend;
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // Tensors of the raw gate, for calls that do not use it: a [N, T, Hv], A_log and dt_bias [Hv].
  gdn_tensor a() const { return a_; }
  gdn_tensor A_log() const { return A_log_; }
  gdn_tensor dt_bias() const { return dt_bias_; }

  // The index buffers, to write bad contents into.
  std::vector<int32_t>& cu_seqlens() { return cu_seqlens_; }
  std::vector<int32_t>& state_indices() { return state_indices_; }
  std::vector<int32_t>& snapshot_indices() { return snapshot_indices_; }

  // Every byte the call could write (and the inputs too).
  std::vector<std::vector<unsigned char>> bytes() const {
    return {q_,
            k_,
            v_,
            o_,
            per_head_[0],
            per_head_[1],
            per_head_[2],
            head_vectors_[0],
            head_vectors_[1],
            initial_state_,
            final_state_,
            snapshots_};
  }

  const Config config;
  gdn::ForwardArgs args;

 private:
  static std::vector<unsigned char> zeros(gdn_dtype t, int64_t n) {
    return std::vector<unsigned char>(size_t(n * bytes_of(t)), 0);
  }
  static std::vector<unsigned char> poison(gdn_dtype t, int64_t n) {
    return std::vector<unsigned char>(size_t(n * bytes_of(t)), 0xA5);
  }
  static int64_t bytes_of(gdn_dtype t) {
    return t == GDN_DTYPE_F64 || t == GDN_DTYPE_I64   ? 8
           : t == GDN_DTYPE_F32 || t == GDN_DTYPE_I32 ? 4
                                                      : 2;
  }

  std::vector<unsigned char> q_, k_, v_, o_, initial_state_, final_state_, snapshots_;
  std::vector<std::vector<unsigned char>> per_head_, head_vectors_;
  std::vector<int32_t> cu_seqlens_, state_indices_, snapshot_indices_;
  gdn_tensor a_{}, A_log_{}, dt_bias_{};
};

// Stores any int in an enum field, as a C caller can (a C++ cast to the enum would be undefined).
template <class Enum>
void store_int(Enum& field, int value) {
  static_assert(sizeof(Enum) == sizeof(int), "gdn enums are int-sized");
  std::memcpy(&field, &value, sizeof value);
}

// The valid configuration after `change`.
inline Config with(void (*change)(Config&)) {
  Config c;
  change(c);
  return c;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Both gdn_forward_can_implement and gdn_forward return `status` with a message holding every
// one of `parts` (the argument's name, the value), and no byte of the call's buffers changes.
inline void expect_rejected(const Call& call, gdn_status status,
                            const std::vector<const char*>& parts) {
  const auto before = call.bytes();
  for (bool run : {false, true}) {
    SCOPED_TRACE(run ? "gdn_forward" : "gdn_forward_can_implement");
    const gdn_status got = run ? gdn_forward(&call.args) : gdn_forward_can_implement(&call.args);
    const std::string message = gdn_last_error();
    EXPECT_EQ(got, status) << gdn_status_string(got) << ": " << message;
    for (const char* part : parts)
      EXPECT_TRUE(contains(message, part)) << "'" << part << "' not in: " << message;
  }
  EXPECT_TRUE(call.bytes() == before) << "a rejected call wrote into its buffers";
}

inline void expect_invalid(const Call& call, const std::vector<const char*>& parts) {
  expect_rejected(call, GDN_STATUS_INVALID_ARGUMENT, parts);
}

inline void expect_unsupported(const Call& call, const std::vector<const char*>& parts) {
  expect_rejected(call, GDN_STATUS_UNSUPPORTED, parts);
}

}  // namespace valid

// The one table of supported configurations: which backend and path take which input dtypes,
// head dimensions K and V, and state dtypes. Validation, dispatch, tests and benchmarks all
// read it; anything outside it is GDN_STATUS_UNSUPPORTED with a message naming the value.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/problem.h"

namespace gdn {

// A set of dtypes, one bit per gdn_dtype value.
using DtypeSet = uint32_t;

constexpr DtypeSet dtype_bit(gdn_dtype t) { return DtypeSet{1} << t; }

template <class... Dtypes>
constexpr DtypeSet dtype_set(Dtypes... ts) {
  return (DtypeSet{0} | ... | dtype_bit(ts));
}

constexpr bool contains(DtypeSet set, gdn_dtype t) {
  const int bit = int(t);  // (any int a caller cast to the enum)
  return bit >= 0 && bit < 32 && (set & (DtypeSet{1} << bit)) != 0;
}

// A set of head dimensions: either every value in [1, max], or the listed values only.
struct DimSet {
  static constexpr int kMaxListed = 4;
  int64_t max = 0;
  int64_t listed[kMaxListed] = {};
  int count = 0;  // 0: the range [1, max]

  constexpr bool contains(int64_t d) const {
    if (count == 0) return d >= 1 && d <= max;
    for (int i = 0; i < count; ++i)
      if (listed[i] == d) return true;
    return false;
  }
};

constexpr DimSet dims_up_to(int64_t max) { return DimSet{max, {}, 0}; }

template <class... Dims>
constexpr DimSet dims_of(Dims... ds) {
  static_assert(sizeof...(ds) <= DimSet::kMaxListed, "too many listed head dimensions");
  DimSet s{0, {int64_t(ds)...}, int(sizeof...(ds))};
  for (int i = 0; i < s.count; ++i) s.max = s.listed[i] > s.max ? s.listed[i] : s.max;
  return s;
}

struct ConfigRow {
  gdn_backend backend;
  gdn_path path;
  DtypeSet inputs;  // q, k, v (o has q's dtype; the reference backend may also write f64)
  DimSet K, V;
  DtypeSet states;  // initial_state, final_state, state_snapshots
};

namespace table {
constexpr gdn_dtype f32 = GDN_DTYPE_F32, bf16 = GDN_DTYPE_BF16, f16 = GDN_DTYPE_F16,
                    f64 = GDN_DTYPE_F64;
constexpr DtypeSet kHalfAndF32 = dtype_set(f32, bf16, f16);
constexpr DtypeSet kAnyFloat = dtype_set(f32, bf16, f16, f64);
constexpr DtypeSet kF32Bf16 = dtype_set(f32, bf16);
constexpr DtypeSet kF32Bf16F64 = dtype_set(f32, bf16, f64);
}  // namespace table

// Path AUTO accepts a configuration when any row of its backend does; the backend then picks.
// clang-format off
inline constexpr ConfigRow kConfigTable[] = {
    // backend              path                inputs              K                 V                 states
    {GDN_BACKEND_REFERENCE, GDN_PATH_RECURRENT, table::kAnyFloat,   dims_up_to(256),  dims_up_to(256),  table::kF32Bf16F64},
    {GDN_BACKEND_CPU,       GDN_PATH_RECURRENT, table::kHalfAndF32, dims_up_to(256),  dims_up_to(256),  table::kF32Bf16},
    {GDN_BACKEND_CUDA,      GDN_PATH_RECURRENT, table::kHalfAndF32, dims_of(64, 128), dims_of(64, 128), table::kF32Bf16},
    // cuda chunked: bf16 / f16 tensor-core products; f32 inputs in 3xTF32 (chunked_f32.cu)
    {GDN_BACKEND_CUDA,      GDN_PATH_CHUNKED,   table::kHalfAndF32, dims_of(128),     dims_of(128),     table::kF32Bf16},
};
// clang-format on

// Every row, for tests and benchmarks (header-only: usable from outside libgdn).
struct ConfigRows {
  const ConfigRow* first;
  size_t size;
  constexpr const ConfigRow* begin() const { return first; }
  constexpr const ConfigRow* end() const { return first + size; }
};
constexpr ConfigRows config_rows() {
  return ConfigRows{kConfigTable, sizeof kConfigTable / sizeof kConfigTable[0]};
}

// SUCCESS when a row of p.backend (and p.path unless AUTO) takes p's input dtype, K, V and
// state dtype; otherwise GDN_STATUS_UNSUPPORTED naming the value, e.g.
// "K: 200 is not supported by the cuda recurrent path (supported: 64, 128)".
gdn_status check_supported(const Problem& p);

}  // namespace gdn

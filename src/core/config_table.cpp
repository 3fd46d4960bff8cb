// Checking a resolved Problem against the table of supported configurations.
#include "core/config_table.h"

#include <cstdio>

#include "core/dtype.h"
#include "core/error.h"
#include "core/names.h"

namespace gdn {
namespace {

// "f32, f16, bf16" into buf (gdn_dtype order).
const char* format_dtypes(DtypeSet set, char* buf, size_t size) {
  buf[0] = '\0';
  size_t used = 0;
  for (int t = GDN_DTYPE_F32; t <= GDN_DTYPE_F64 && used < size; ++t) {
    if (!contains(set, gdn_dtype(t))) continue;
    used +=
        std::snprintf(buf + used, size - used, "%s%s", used ? ", " : "", dtype_name(gdn_dtype(t)));
  }
  return buf;
}

// "64, 128" or "1..256" into buf.
const char* format_dims(const DimSet& set, char* buf, size_t size) {
  if (set.count == 0) {
    std::snprintf(buf, size, "1..%lld", (long long)set.max);
    return buf;
  }
  buf[0] = '\0';
  size_t used = 0;
  for (int i = 0; i < set.count && used < size; ++i)
    used +=
        std::snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)set.listed[i]);
  return buf;
}

// The state tensor that carries the problem's state dtype (all of them share it), if any.
const char* state_tensor(const Problem& p, gdn_dtype* dtype) {
  if (p.initial_state.data) {
    *dtype = p.initial_state.dtype;
    return "initial_state";
  }
  if (p.final_state.data) {
    *dtype = p.final_state.dtype;
    return "final_state";
  }
  if (p.snapshots_dense.data) {
    *dtype = p.snapshots_dense.dtype;
    return "state_snapshots";
  }
  if (p.snapshots_pool.data) {
    *dtype = p.snapshots_pool.dtype;
    return "state_snapshots";
  }
  return nullptr;
}

// SUCCESS when `row` takes the problem; otherwise UNSUPPORTED with the first value it refuses.
gdn_status match(const ConfigRow& row, const Problem& p) {
  const char* by_backend = backend_name(row.backend);
  const char* by_path = path_name(row.path);
  char supported[128];
  if (!contains(row.inputs, p.input_dtype))
    return fail(GDN_STATUS_UNSUPPORTED,
                "q: dtype %s is not supported by the %s %s path (supported: %s)",
                dtype_name(p.input_dtype), by_backend, by_path,
                format_dtypes(row.inputs, supported, sizeof supported));
  if (!row.K.contains(p.K))
    return fail(GDN_STATUS_UNSUPPORTED,
                "K: %lld is not supported by the %s %s path (supported: %s)", (long long)p.K,
                by_backend, by_path, format_dims(row.K, supported, sizeof supported));
  if (!row.V.contains(p.V))
    return fail(GDN_STATUS_UNSUPPORTED,
                "V: %lld is not supported by the %s %s path (supported: %s)", (long long)p.V,
                by_backend, by_path, format_dims(row.V, supported, sizeof supported));
  gdn_dtype state_dtype = GDN_DTYPE_NONE;
  if (const char* name = state_tensor(p, &state_dtype); name && !contains(row.states, state_dtype))
    return fail(GDN_STATUS_UNSUPPORTED,
                "%s: dtype %s is not supported by the %s %s path (supported: %s)", name,
                dtype_name(state_dtype), by_backend, by_path,
                format_dtypes(row.states, supported, sizeof supported));
  return GDN_STATUS_SUCCESS;
}

}  // namespace

gdn_status check_supported(const Problem& p) {
  const ConfigRow* first = nullptr;
  for (const ConfigRow& row : config_rows()) {
    if (row.backend != p.backend) continue;
    if (p.path != GDN_PATH_AUTO && row.path != p.path) continue;
    if (match(row, p) == GDN_STATUS_SUCCESS) return GDN_STATUS_SUCCESS;
    if (!first) first = &row;
  }
  if (first) return match(*first, p);  // report against the backend's first candidate row

  char paths[64] = "";
  size_t used = 0;
  for (const ConfigRow& row : config_rows())
    if (row.backend == p.backend && used < sizeof paths)
      used += std::snprintf(paths + used, sizeof paths - used, "%s%s", used ? ", " : "",
                            path_name(row.path));
  if (used == 0)
    return fail(GDN_STATUS_INTERNAL_ERROR, "backend: %s has no row in the configuration table",
                backend_name(p.backend));
  return fail(GDN_STATUS_UNSUPPORTED, "path: %s is not supported by the %s backend (supported: %s)",
              path_name(p.path), backend_name(p.backend), paths);
}

}  // namespace gdn

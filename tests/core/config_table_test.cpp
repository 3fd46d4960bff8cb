// The table of supported configurations, probed row by row through the C API: what a row lists
// passes validation, the values just outside it are UNSUPPORTED with a message naming them.
#include "core/config_table.h"

#include <string>
#include <vector>

#include "core/valid_call.h"

namespace {

using gdn::ConfigRow;
using gdn::DimSet;
using valid::Call;
using valid::Config;

const gdn_dtype kFloats[] = {GDN_DTYPE_F32, GDN_DTYPE_F16, GDN_DTYPE_BF16, GDN_DTYPE_F64};

const char* name_of(gdn_dtype t) {
  switch (t) {
    case GDN_DTYPE_F32: return "f32";
    case GDN_DTYPE_F16: return "f16";
    case GDN_DTYPE_BF16: return "bf16";
    default: return "f64";
  }
}

// The values a row accepts that a test tries: its list, or both ends of its range.
std::vector<int64_t> accepted(const DimSet& s) {
  if (s.count == 0) return {1, s.max};
  return std::vector<int64_t>(s.listed, s.listed + s.count);
}

// A value just outside: one past the largest, and (for lists) one past the first.
std::vector<int64_t> refused(const DimSet& s) {
  std::vector<int64_t> out = {s.max + 1};
  if (s.count > 0 && !s.contains(s.listed[0] + 1)) out.push_back(s.listed[0] + 1);
  return out;
}

gdn_dtype first_of(gdn::DtypeSet set) {
  for (gdn_dtype t : kFloats)
    if (gdn::contains(set, t)) return t;
  return GDN_DTYPE_NONE;
}

// A valid call for `row`: its backend and path, tensors where that backend runs (host memory
// labelled CUDA for the cuda rows: validation never reads it).
Config for_row(const ConfigRow& row) {
  Config c;
  c.backend = row.backend;
  c.device = row.backend == GDN_BACKEND_CUDA ? GDN_DEVICE_CUDA : GDN_DEVICE_CPU;
  c.K = accepted(row.K)[0];
  c.V = accepted(row.V)[0];
  c.dtype = first_of(row.inputs);
  c.state_dtype = first_of(row.states);
  return c;
}

void expect_refused(const ConfigRow& row, const Config& c, const std::string& value) {
  Call call(c);
  call.args.path = row.path;
  const std::string by = std::string(row.backend == GDN_BACKEND_CUDA  ? "cuda"
                                     : row.backend == GDN_BACKEND_CPU ? "cpu"
                                                                      : "reference");
  valid::expect_unsupported(call, {value.c_str(), by.c_str()});
}

// Host rows must accept; cuda rows can only be checked up to the backend's own hook here.
void expect_accepted(const ConfigRow& row, const Config& c) {
  if (row.backend == GDN_BACKEND_CUDA && gdn_backend_available(GDN_BACKEND_CUDA)) return;
  Call call(c);
  call.args.path = row.path;
  const gdn_status want =
      row.backend == GDN_BACKEND_CUDA ? GDN_STATUS_BACKEND_UNAVAILABLE : GDN_STATUS_SUCCESS;
  EXPECT_EQ(gdn_forward_can_implement(&call.args), want) << gdn_last_error();
}

TEST(ConfigTable, EveryBackendHasARow) {
  for (gdn_backend b : {GDN_BACKEND_CPU, GDN_BACKEND_CUDA, GDN_BACKEND_REFERENCE}) {
    bool found = false;
    for (const ConfigRow& row : gdn::config_rows()) found = found || row.backend == b;
    EXPECT_TRUE(found) << "backend " << b;
  }
}

TEST(ConfigTable, AcceptsWhatEachRowLists) {
  for (const ConfigRow& row : gdn::config_rows()) {
    SCOPED_TRACE(testing::Message() << "backend " << row.backend << " path " << row.path);
    for (int64_t K : accepted(row.K)) {
      Config c = for_row(row);
      c.K = K;
      expect_accepted(row, c);
    }
    for (int64_t V : accepted(row.V)) {
      Config c = for_row(row);
      c.V = V;
      expect_accepted(row, c);
    }
    for (gdn_dtype t : kFloats) {
      Config inputs = for_row(row);
      inputs.dtype = t;
      if (gdn::contains(row.inputs, t)) expect_accepted(row, inputs);
      Config states = for_row(row);
      states.state_dtype = t;
      if (gdn::contains(row.states, t)) expect_accepted(row, states);
    }
  }
}

TEST(ConfigTable, RefusesWhatNoRowLists) {
  for (const ConfigRow& row : gdn::config_rows()) {
    SCOPED_TRACE(testing::Message() << "backend " << row.backend << " path " << row.path);
    for (int64_t K : refused(row.K)) {
      Config c = for_row(row);
      c.K = K;
      expect_refused(row, c, "K: " + std::to_string(K));
    }
    for (int64_t V : refused(row.V)) {
      Config c = for_row(row);
      c.V = V;
      expect_refused(row, c, "V: " + std::to_string(V));
    }
    for (gdn_dtype t : kFloats) {
      Config inputs = for_row(row);
      inputs.dtype = t;
      if (!gdn::contains(row.inputs, t))
        expect_refused(row, inputs, std::string("q: dtype ") + name_of(t));
      Config states = for_row(row);
      states.state_dtype = t;
      if (!gdn::contains(row.states, t))
        expect_refused(row, states, std::string("initial_state: dtype ") + name_of(t));
    }
  }
}

}  // namespace

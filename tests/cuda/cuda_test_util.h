// Shared by the cuda tests: skipping without a GPU, the CUDA rows of the configuration table,
// reports, bit-level comparisons of host copies, test names of cases, the device error word.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cctype>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>

#include "core/config_table.h"
#include "core/dtype.h"
#include "harness/harness.h"

namespace gdn::harness {

// Test names and failure messages print a case as its case string.
inline void PrintTo(const Case& c, std::ostream* os) { *os << to_string(c); }

}  // namespace gdn::harness

namespace gdn::cuda_test {

using namespace gdn::harness;

inline bool have_gpu() {
  return DeviceBuffers::compiled() && gdn_backend_available(GDN_BACKEND_CUDA);
}

// This machine has no GPU (CI, the development host): every cuda test skips.
#define GDN_SKIP_WITHOUT_GPU()                                             \
  do {                                                                     \
    if (!::gdn::cuda_test::have_gpu()) GTEST_SKIP() << "no CUDA device";   \
  } while (0)

// A gtest name for a case: its label (or its index), non-alphanumerics as '_'.
inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.name.empty() ? "case" + std::to_string(info.index) : info.param.name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

// Device memory for the kernels' error word (GDN_ERROR_FLAG_*), zeroed.
struct ErrorWord {
  uint32_t* ptr = nullptr;
  ErrorWord() {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr), sizeof(uint32_t)), cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr, 0, sizeof(uint32_t)), cudaSuccess);
  }
  ~ErrorWord() { cudaFree(ptr); }
  ErrorWord(const ErrorWord&) = delete;
  ErrorWord& operator=(const ErrorWord&) = delete;
  uint32_t read() const {
    uint32_t v = 0;
    EXPECT_EQ(cudaMemcpy(&v, ptr, sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
};

// Whether a row of the configuration table gives the cuda backend's recurrent path this case.
inline bool cuda_supports(const Case& c) {
  if (c.path == GDN_PATH_CHUNKED) return false;
  for (const ConfigRow& row : kConfigTable)
    if (row.backend == GDN_BACKEND_CUDA && row.path == GDN_PATH_RECURRENT &&
        contains(row.inputs, c.dtype) && row.K.contains(c.K) && row.V.contains(c.V) &&
        contains(row.states, c.state_dtype))
      return true;
  return false;
}

// A fresh seed per run, printed with every failure; GDN_TEST_SEED=<n> repeats a run.
inline uint64_t fresh_seed() {
  if (const char* fixed = std::getenv("GDN_TEST_SEED")) return std::strtoull(fixed, nullptr, 10);
  return std::random_device{}() | uint64_t(std::random_device{}()) << 32;
}

inline Tolerance cuda_tolerance(const Case& c) {
  return tolerance(c, GDN_BACKEND_CUDA, GDN_PATH_RECURRENT);
}

inline std::string report(const Case& c, const Errors& e) {
  const Tolerance t = cuda_tolerance(c);
  return "case " + to_string(c) + ": rel L2 o " + std::to_string(e.o) + " (<= " + std::to_string(t.o) +
         "), final state " + std::to_string(e.final_state) + ", snapshots " + std::to_string(e.snapshots) +
         " (<= " + std::to_string(t.state) + "); written " + std::to_string(e.all_written) +
         ", untouched " + std::to_string(e.untouched_ok) + ", finite " + std::to_string(e.finite) + "; " +
         e.detail;
}

// Whether logical element i of a and b has the same bytes (poison included).
inline bool same_bits(const HostTensor& a, const HostTensor& b, int64_t i) {
  const int64_t size = dtype_size(a.dtype());
  return std::memcmp(static_cast<const char*>(a.data()) + a.offset(i) * size,
                     static_cast<const char*>(b.data()) + b.offset(i) * size, size_t(size)) == 0;
}

}  // namespace gdn::cuda_test

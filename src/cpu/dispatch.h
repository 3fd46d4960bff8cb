// The cpu backend's SIMD target, chosen once per process.
#pragma once

#include "cpu/kernel.h"

namespace gdn::cpu {

struct Target {
  const char* name;  // "avx512bf16", "avx512", "avx2", "sse2" (x86-64 baseline), "neon", "scalar"
  KernelFn run;
};

// The best target this CPU runs, chosen at the first call. The environment variable
// GDN_CPU_TARGET=<name> (read then, once) asks for a lesser one, for tests and comparisons;
// a name the CPU cannot run, or an unknown one, is ignored.
const Target& selected_target();

}  // namespace gdn::cpu

// Runtime dispatch: the kernel compiled for the best instruction set this CPU has.
#include "cpu/dispatch.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

#include "core/backend.h"

namespace gdn::cpu {
namespace {

struct Candidate {
  Target target;
  bool supported;
};

#if defined(__x86_64__) || defined(_M_X64)
// F16C from CPUID (leaf 1, ECX): Clang's __builtin_cpu_supports does not know "f16c".
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c(); }
bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("fma") && has_f16c();
}
#endif

Target choose() {
  // best first; the last one runs everywhere
  const Candidate candidates[] = {
#if defined(__x86_64__) || defined(_M_X64)
      {{"avx512bf16", avx512bf16::run}, has_avx512() && __builtin_cpu_supports("avx512bf16")},
      {{"avx512", avx512::run}, has_avx512()},
      {{"avx2", avx2::run}, has_avx2()},
      {{"sse2", baseline::run}, true},
#elif defined(__aarch64__)
      {{"neon", baseline::run}, true},
#else
      {{"scalar", baseline::run}, true},
#endif
  };
  if (const char* wanted = std::getenv("GDN_CPU_TARGET")) {
    for (const Candidate& c : candidates)
      if (c.supported && std::strcmp(c.target.name, wanted) == 0) return c.target;
  }
  for (const Candidate& c : candidates)
    if (c.supported) return c.target;
  return candidates[sizeof candidates / sizeof candidates[0] - 1].target;
}

}  // namespace

const Target& selected_target() {
  static const Target target = choose();
  return target;
}

}  // namespace gdn::cpu

namespace gdn {

const char* cpu_simd_target() { return cpu::selected_target().name; }

}  // namespace gdn

// The kernel compiled for the portable baseline: SSE2 on x86-64, NEON on aarch64, scalar
// elsewhere (no extra flags; see CMakeLists.txt).
#define GDN_CPU_TARGET baseline
#include "cpu/kernel_impl.h"

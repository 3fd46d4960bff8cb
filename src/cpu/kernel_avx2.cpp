// The kernel compiled for AVX2 + FMA + F16C; flags in CMakeLists.txt.
#define GDN_CPU_TARGET avx2
#include "cpu/kernel_impl.h"
